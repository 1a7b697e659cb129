package app

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fencepost-dev/fencepost/stages"
)

func (c *cli) stagesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stages [NAME...]",
		Short: "List the stages this binary has, with their options",
		Long: `stages lists the stages a configuration's pipeline can name, with each
option's type, whether it is required, its default and its documentation.
The list comes from the stages' own specs, so it is always current.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			specs := c.registry.Specs()
			if len(args) > 0 {
				var picked []stages.Spec
				for _, name := range args {
					s, ok := c.registry.Lookup(name)
					if !ok {
						return failure("no stage %q in this binary (run 'processor stages' for the list)", name)
					}
					picked = append(picked, s)
				}
				specs = picked
			}
			if len(specs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no stages are registered in this binary")
				return nil
			}
			for i, s := range specs {
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				writeSpec(cmd.OutOrStdout(), s)
			}
			return nil
		},
	}
}

// writeSpec documents one stage.
func writeSpec(w io.Writer, s stages.Spec) {
	fmt.Fprintf(w, "%s\n    %s\n", s.Name, s.Summary)
	if len(s.Options) == 0 {
		fmt.Fprintln(w, "    (no options)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "    option\ttype\trequired\tdefault\tdescription")
	for _, o := range s.Options {
		req := "no"
		if o.Required {
			req = "yes"
		}
		def := "-"
		if o.Default != nil {
			def = formatDefault(o.Default)
		}
		doc := strings.Join(strings.Fields(o.Doc), " ")
		if len(o.Enum) > 0 {
			doc = strings.TrimSpace(doc + " One of: " + strings.Join(o.Enum, ", ") + ".")
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", o.Name, o.Type, req, def, doc)
	}
	_ = tw.Flush()
}

func formatDefault(v any) string {
	switch d := v.(type) {
	case string:
		return fmt.Sprintf("%q", d)
	case []string:
		return "[" + strings.Join(d, ", ") + "]"
	}
	return fmt.Sprint(v)
}
