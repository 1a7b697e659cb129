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
	"github.com/fencepost-dev/fencepost/stages"
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

A file without problems is followed by its topology, as run logs it at
start: the sub-pipelines the stages are cut into at each repartition
(a stage with key: groups anew), each with the topics it reads, its
stages, the stores it keeps with their changelog topics
(<group>-<store>-changelog), the tables it reads, the topics it writes
and the repartition topic (<group>-<name>-repartition) it ends with.

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

// lintFile checks one file and prints its problems, or its warnings,
// that it is fine, and its topology.
func (c *cli) lintFile(w io.Writer, file string) bool {
	cfg, err := config.Load(file, c.Registry)
	if err != nil {
		clibase.PrintConfigError(w, err)
		return false
	}
	segs, err := cfg.Topology()
	if err != nil && !errors.Is(err, stages.ErrNoProducer) {
		fmt.Fprintf(w, "%s: pipeline: %s\n    hint: run refuses it too: change the stages' names or options it names\n",
			file, cfg.Redactor.Redact(err.Error()))
		return false
	}
	w = cfg.Redactor.Writer(w)
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
	if err != nil {
		fmt.Fprintf(w, "  topology: not known without a cluster: %v\n", err)
		return true
	}
	writeTopology(w, cfg, segs)
	return true
}
