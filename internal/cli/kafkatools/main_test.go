package kafkatools

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/cli/clitest"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestMain checks that no test leaves a goroutine behind (the commands'
// contract: they return once every goroutine they started has ended).
func TestMain(m *testing.M) {
	if dir := os.Getenv("FENCEPOST_HOLD_STORE"); dir != "" {
		os.Exit(holdStoreProcess(dir)) // TestStateLocalInUse's other process
	}
	goleak.VerifyTestMain(m)
}

// The exit codes, as the tests name them.
const (
	ExitOK      = clibase.ExitOK
	ExitFailure = clibase.ExitFailure
	ExitUsage   = clibase.ExitUsage
	ExitForced  = clibase.ExitForced
)

// commands are this package's commands, under the root in runCLI.
func commands(env *clibase.Env) []*cobra.Command {
	return []*cobra.Command{OffsetsCommand(env), ConsumeCommand(env), ProduceCommand(env), TopicsCommand(env), StateCommand(env)}
}

// runCLI runs the command line in process with reg's stages.
func runCLI(ctx context.Context, reg *stages.Registry, args ...string) (code int, stdout, stderr string) {
	return runCLIInput(ctx, reg, "", args...)
}

// runCLIInput runs the command line in process with stdin.
func runCLIInput(ctx context.Context, reg *stages.Registry, stdin string, args ...string) (code int, stdout, stderr string) {
	return clitest.Run(ctx, reg, stdin, commands, args...)
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	return clitest.WriteFile(t, dir, name, content)
}

// testClient returns a franz-go client to the cluster at addr that writes
// records to the partition they name; the caller closes it.
func testClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return clitest.Client(t, addr, opts...)
}

// waitUntil polls cond until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	clitest.WaitUntil(t, timeout, what, cond)
}

// execute runs the command line in env with this package's commands.
func execute(ctx context.Context, args []string, env *clibase.Env) int {
	return clibase.Execute(ctx, env, args, commands(env)...)
}
