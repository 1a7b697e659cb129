// Package clibase is what the processor's commands share: the
// environment a command runs in (Env: where it reads and writes, which
// stages exist, how to exit at once), failures a command reports itself
// (Failure), the exit codes, the root command and how its error becomes
// an exit code (Execute), and how a configuration's problems are printed
// (PrintConfigError). Each command lives in a package of its own under
// internal/cli; cmd/processor/app puts them together.
package clibase

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/fencepost-dev/fencepost/internal/logging"
	"github.com/fencepost-dev/fencepost/stages"
)

// HideSecrets makes env's output hide the secrets r knows (a loaded
// configuration's Redactor, as run's log does) from now on: Stderr, so
// the error Execute prints too, and Stdout unless records is set (a
// command whose standard output is record data, which must come out as
// it is). A nil r hides nothing.
func (env *Env) HideSecrets(r *logging.Redactor, records bool) {
	env.Stderr = r.Writer(env.Stderr)
	if !records {
		env.Stdout = r.Writer(env.Stdout)
	}
}

// Exit codes of a command line (app.Main returns them).
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitFailure: the command failed (a configuration with problems, a
	// pipeline that could not start or stopped with an error).
	ExitFailure = 1
	// ExitUsage: the command line was wrong (unknown command or flag).
	ExitUsage = 2
	// ExitForced: run got a second SIGINT or SIGTERM and exited without
	// finishing its graceful stop.
	ExitForced = 130
)

// Env is what the commands share: where they read and write, which
// stages exist, and how to exit at once (a second signal during a
// graceful stop).
type Env struct {
	Stdin          io.Reader // produce's input; nil reads nothing
	Stdout, Stderr io.Writer
	Registry       *stages.Registry
	// Exit ends the process at once with a code; nil is os.Exit.
	Exit func(code int)
	// OwnsProcess: the command line is the process's main (not a test
	// calling it in process), so run may set process-wide settings: the
	// memory limit.
	OwnsProcess bool
	// Version and Commit are set at link time (app.Version, app.Commit);
	// empty, the build information Go recorded is used.
	Version, Commit string
}

// Failed is a command's failure, already reported to the user (Execute
// prints it and returns ExitFailure; any other error is a usage error).
type Failed struct{ Err error }

func (f Failed) Error() string { return f.Err.Error() }

// Failure wraps a failure the command reports itself; Execute prints it
// and returns ExitFailure.
func Failure(format string, args ...any) error { return Failed{fmt.Errorf(format, args...)} }

// Execute runs the command line args with the processor's root command
// holding cmds, and returns the exit code: ExitOK, ExitFailure for a
// Failed error, ExitUsage for any other (a wrong command line), with the
// error printed on env.Stderr.
func Execute(ctx context.Context, env *Env, args []string, cmds ...*cobra.Command) int {
	root := Root(env, cmds...)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var f Failed
	if errors.As(err, &f) {
		if f.Err.Error() != "" {
			fmt.Fprintln(env.Stderr, "error:", f.Err)
		}
		return ExitFailure
	}
	fmt.Fprintln(env.Stderr, "error:", err)
	fmt.Fprintln(env.Stderr, "run 'processor --help' for usage")
	return ExitUsage
}

// Root returns the processor's root command with cmds under it, writing
// to env's Stdout and Stderr; it reports errors to its caller (Execute)
// instead of printing them.
func Root(env *Env, cmds ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:   "processor",
		Short: "fencepost: a Kafka stream processor",
		Long: `fencepost consumes Kafka topics through a pipeline of stages, writes the
results and commits offsets so that nothing is lost and little is repeated.

Try it with no Kafka installed:

  processor run -c configs/quickstart.yaml`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(cmds...)
	return root
}
