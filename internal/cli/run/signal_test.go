package run

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// TestSecondSignalForcesExit: the first SIGINT ends the run's context (a
// graceful stop); a second one exits at once with ExitForced, saying
// that in-flight records are processed again after restart.
func TestSecondSignalForcesExit(t *testing.T) {
	var errOut stagetest.Buffer
	exited := make(chan int, 1)
	c := &cli{&clibase.Env{Stderr: &errOut, Exit: func(code int) { exited <- code }}}
	ctx, stop := c.notifySignals(context.Background(), zap.NewNop())
	defer stop()
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := self.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first SIGINT did not end the run's context")
	}
	select {
	case code := <-exited:
		t.Fatalf("exited with %d after one signal", code)
	case <-time.After(50 * time.Millisecond):
	}
	if err := self.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != ExitForced {
			t.Fatalf("exit code %d, want %d", code, ExitForced)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second signal did not force the exit")
	}
	if !strings.Contains(errOut.String(), "exiting now without waiting for in-flight records") {
		t.Fatalf("stderr %q does not say what a forced exit means", errOut.String())
	}
}
