// Package app is the processor's command line: run, lint, stages,
// offsets, consume, produce, topics, state, broker and version. cmd/processor is a thin
// main around Main; a program with stages of its own builds its binary the
// same way:
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
// The built-in stages (package stages/builtin) are always included. The
// commands themselves live in internal/cli (run, kafkatools, configtools,
// broker, buildinfo); this package only puts them together.
package app

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/fencepost-dev/fencepost/internal/cli/broker"
	"github.com/fencepost-dev/fencepost/internal/cli/buildinfo"
	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/cli/configtools"
	"github.com/fencepost-dev/fencepost/internal/cli/kafkatools"
	"github.com/fencepost-dev/fencepost/internal/cli/run"
	"github.com/fencepost-dev/fencepost/stages"
	_ "github.com/fencepost-dev/fencepost/stages/builtin" // every processor binary has the built-in stages
)

// Exit codes of Main.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = clibase.ExitOK
	// ExitFailure: the command failed (a configuration with problems, a
	// pipeline that could not start or stopped with an error).
	ExitFailure = clibase.ExitFailure
	// ExitUsage: the command line was wrong (unknown command or flag).
	ExitUsage = clibase.ExitUsage
	// ExitForced: run got a second SIGINT or SIGTERM and exited without
	// finishing its graceful stop.
	ExitForced = clibase.ExitForced
)

// Version and Commit are the processor's version and source commit.
// Release builds set them with -ldflags "-X
// github.com/fencepost-dev/fencepost/cmd/processor/app.Version=v1.2.3 -X
// ...app.Commit=0123abcd"; otherwise they come from the build
// information: the module version, and the commit Go records when it
// builds from a git clone (go build or go install with -buildvcs not
// false; a git worktree is not recognized).
var (
	Version = ""
	Commit  = ""
)

// Main runs the processor command line with args (os.Args[1:]) and
// returns the exit code. Stages are resolved in stages.Default, so
// packages that register stages must be imported by the program. Main
// returns once the command is done: every goroutine it started has
// ended.
func Main(args []string) int {
	return execute(context.Background(), args, &clibase.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Registry: stages.Default, Exit: os.Exit, OwnsProcess: true, Version: Version, Commit: Commit})
}

// execute runs the command line args in env with every command.
func execute(ctx context.Context, args []string, env *clibase.Env) int {
	return clibase.Execute(ctx, env, args, commands(env)...)
}

// commands are the processor's commands, each from its package under
// internal/cli.
func commands(env *clibase.Env) []*cobra.Command {
	return []*cobra.Command{
		run.Command(env),
		configtools.LintCommand(env),
		configtools.StagesCommand(env),
		kafkatools.OffsetsCommand(env),
		kafkatools.ConsumeCommand(env),
		kafkatools.ProduceCommand(env),
		kafkatools.TopicsCommand(env),
		kafkatools.StateCommand(env),
		broker.Command(env),
		buildinfo.Command(env),
	}
}
