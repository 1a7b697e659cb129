// Package app is the processor's command line: run, lint, stages,
// offsets, consume, produce, broker and version. cmd/processor is a thin main around Main; a program
// with stages of its own builds its binary the same way:
//
//	package main
//
//	import (
//		"os"
//
//		"github.com/fencepost-dev/fencepost/cmd/processor/app"
//		_ "example.com/mystages" // registers its stages in stages.Default
//	)
//
//	func main() { os.Exit(app.Main(os.Args[1:])) }
//
// The built-in stages (package stages/builtin) are always included.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/fencepost-dev/fencepost/stages"
	_ "github.com/fencepost-dev/fencepost/stages/builtin" // every processor binary has the built-in stages
)

// Exit codes of Main.
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

// Main runs the processor command line with args (os.Args[1:]) and
// returns the exit code. Stages are resolved in stages.Default, so
// packages that register stages must be imported by the program. Main
// returns once the command is done: every goroutine it started has
// ended.
func Main(args []string) int {
	return execute(context.Background(), args, &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, registry: stages.Default,
		exit: os.Exit, ownsProcess: true})
}

// cli is what the commands share: where they read and write, which
// stages exist, and how to exit at once (a second signal during a
// graceful stop).
type cli struct {
	stdin          io.Reader // produce's input; nil reads nothing
	stdout, stderr io.Writer
	registry       *stages.Registry
	exit           func(code int)
	// ownsProcess: the cli is the process's main (not a test calling it
	// in process), so run may set process-wide settings: the memory
	// limit (memlimit.go).
	ownsProcess bool
}

// failed is a command's failure, already reported to the user.
type failed struct{ err error }

func (f failed) Error() string { return f.err.Error() }

// failure wraps a failure the command reports itself; Main prints it
// and exits with ExitFailure.
func failure(format string, args ...any) error { return failed{fmt.Errorf(format, args...)} }

func execute(ctx context.Context, args []string, c *cli) int {
	root := c.root()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var f failed
	if errors.As(err, &f) {
		if f.err.Error() != "" {
			fmt.Fprintln(c.stderr, "error:", f.err)
		}
		return ExitFailure
	}
	fmt.Fprintln(c.stderr, "error:", err)
	fmt.Fprintln(c.stderr, "run 'processor --help' for usage")
	return ExitUsage
}

func (c *cli) root() *cobra.Command {
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
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(c.runCmd(), c.lintCmd(), c.stagesCmd(), c.offsetsCmd(), c.consumeCmd(), c.produceCmd(), c.brokerCmd(), c.versionCmd())
	return root
}
