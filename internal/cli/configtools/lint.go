// Package configtools holds the commands that help write a configuration
// without connecting to Kafka: lint checks files as run would, stages
// lists the stages a pipeline can name, with their options.
package configtools

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/config"
)

// cli is the environment the commands run in.
type cli struct{ *clibase.Env }

// LintCommand returns the lint command.
func LintCommand(env *clibase.Env) *cobra.Command { return (&cli{env}).lintCmd() }

func (c *cli) lintCmd() *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "lint -c FILE...",
		Short: "Check configuration files without running them",
		Long: `lint checks configuration files as run would, without connecting to Kafka:
YAML, environment variables, keys and types, stages and their options (each
stage is built, so a bad expression is found), and the pipeline settings.
Every problem is reported at once, as file:line:col with a hint. The exit
code is 1 if any file has a problem.

Warnings (file:line:col: warning: ...) point at what run accepts but that
does not do what the file promises, such as a stage that does not take
part in exactly-once under guarantee: exactly_once; they do not change
the exit code.`,
		Example: "  processor lint -c configs/quickstart.yaml\n  processor lint configs/*.yaml",
		RunE: func(cmd *cobra.Command, args []string) error {
			files = append(files, args...)
			if len(files) == 0 {
				return errors.New("lint: name at least one file (-c FILE)")
			}
			bad := 0
			for _, f := range files {
				if !c.lintFile(cmd.OutOrStdout(), f) {
					bad++
				}
			}
			if bad > 0 {
				return clibase.Failure("%d of %d configuration file(s) have problems", bad, len(files))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "config", "c", nil, "configuration `FILE` to check (repeatable; files may also be given as arguments)")
	return cmd
}

// lintFile checks one file and prints its problems, or its warnings and
// that it is fine.
func (c *cli) lintFile(w io.Writer, file string) bool {
	cfg, err := config.Load(file, c.Registry)
	if err == nil {
		ws := cfg.Warnings()
		clibase.PrintConfigWarnings(w, ws)
		switch len(ws) {
		case 0:
			fmt.Fprintf(w, "%s: ok\n", file)
		case 1:
			fmt.Fprintf(w, "%s: ok, 1 warning\n", file)
		default:
			fmt.Fprintf(w, "%s: ok, %d warnings\n", file, len(ws))
		}
		return true
	}
	clibase.PrintConfigError(w, err)
	return false
}
