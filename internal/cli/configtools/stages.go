package configtools

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/stages"
)

// StagesCommand returns the stages command, which lists env.Registry's
// stages.
func StagesCommand(env *clibase.Env) *cobra.Command { return (&cli{env}).stagesCmd() }

func (c *cli) stagesCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "stages [NAME...]",
		Short: "List the stages this binary has, with their options",
		Long: `stages lists the stages a configuration's pipeline can name, with each
option's type, whether it is required, its default and its documentation,
and whether the stage takes part in exactly-once (guarantee: exactly_once):
"yes" if its only effects are the records it returns and writes to Kafka
through the pipeline, "no" if it has others (printing, a Go stage's own
calls), which are at-least-once: repeated after a crash or abort.
The list comes from the stages' own specs, so it is always current;
--format markdown prints the table docs/plugins.md shows.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "markdown" {
				return clibase.Failure("--format %q: use text or markdown", format)
			}
			specs := c.Registry.Specs()
			if len(args) > 0 {
				var picked []stages.Spec
				for _, name := range args {
					s, ok := c.Registry.Lookup(name)
					if !ok {
						return clibase.Failure("no stage %q in this binary (run 'processor stages' for the list)", name)
					}
					picked = append(picked, s)
				}
				specs = picked
			}
			if len(specs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no stages are registered in this binary")
				return nil
			}
			if format == "markdown" {
				writeMarkdown(cmd.OutOrStdout(), specs)
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
	cmd.Flags().StringVar(&format, "format", "text", "text, or markdown (a table)")
	return cmd
}

// writeMarkdown documents the stages as one Markdown table: a row per
// stage (its summary), then a row per option.
func writeMarkdown(w io.Writer, specs []stages.Spec) {
	cell := func(s string) string { return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`) }
	fmt.Fprintln(w, "| stage | exactly-once | option | type | default | what it does |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, s := range specs {
		fmt.Fprintf(w, "| `%s` | %s | | | | %s |\n", s.Name, yesNo(s.ExactlyOnce), cell(s.Summary))
		for _, o := range s.Options {
			name := "`" + o.Name + "`"
			if o.Required {
				name += " (required)"
			}
			typ := string(o.Type)
			if len(o.Enum) > 0 {
				typ += ": `" + strings.Join(o.Enum, "`, `") + "`"
			}
			def := ""
			if o.Default != nil {
				def = "`" + formatDefault(o.Default) + "`"
			}
			fmt.Fprintf(w, "| | | %s | %s | %s | %s |\n", name, cell(typ), cell(def), cell(o.Doc))
		}
	}
}

// writeSpec documents one stage.
func writeSpec(w io.Writer, s stages.Spec) {
	fmt.Fprintf(w, "%s\n    %s\n    %s\n", s.Name, s.Summary, exactlyOnceLine(s))
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

// exactlyOnceLine says whether s takes part in exactly-once, and what
// that means.
func exactlyOnceLine(s stages.Spec) string {
	if s.ExactlyOnce {
		return "exactly-once: yes (its only effects are the records it returns and writes through the pipeline's producers)"
	}
	return "exactly-once: no (its effects outside the output records are at-least-once: repeated after a crash or abort)"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
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
