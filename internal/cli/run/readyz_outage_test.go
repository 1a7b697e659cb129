package run

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// TestReadyzReportsAnUnavailableOutput: while a stage's destination is
// unavailable for every record (stages.Unavailable), /readyz answers 503
// with the reason and nothing is dead-lettered; once it is back, /readyz
// is ready again and the run ends cleanly.
func TestReadyzReportsAnUnavailableOutput(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	reg := &stages.Registry{}
	if err := reg.Register(stages.Spec{
		Name: "sink", Summary: "Write somewhere that may be down.",
		New: func(stages.Options, stages.Env) (stages.Stage, error) {
			return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
				if down.Load() {
					return nil, stages.Unavailable(errors.New("UNKNOWN_TOPIC_OR_PARTITION: output topic gone"))
				}
				return in, nil
			}), nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, t.TempDir(), "c.yaml", strings.NewReplacer("RATE", "100", "stage: count", "stage: sink").Replace(embeddedConfig))
	base, errOut, done, cancel := startRun(t, cfg, "200ms", reg)
	waitUntil(t, 20*time.Second, "/readyz to report the unavailable output", func() bool {
		code, body := get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "waiting for an unavailable output") &&
			strings.Contains(body, "output topic gone")
	})
	if _, body := get(t, base+"/metrics"); metricValue(body, "fencepost_waiting_for_output_calls") < 1 {
		t.Errorf("fencepost_waiting_for_output_calls = %v during the outage, want at least 1", metricValue(body, "fencepost_waiting_for_output_calls"))
	}
	down.Store(false)
	waitUntil(t, 20*time.Second, "/readyz to be ready once the output is back", func() bool {
		code, _ := get(t, base+"/readyz")
		return code == http.StatusOK
	})
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d, want 0\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop within 30s of cancellation")
	}
	if strings.Contains(errOut.String(), "sending its source record to the dead-letter sink") {
		t.Fatalf("records were dead-lettered during the outage:\n%s", errOut.String())
	}
}

// TestRunForEndsDespiteASpinningStage: `run --for` ends within
// shutdown_timeout plus a small bound although a stage spins and never
// looks at its context, exits non-zero, and says which stage it
// abandoned. (The spinning goroutine is the stage's; it stops when the
// test ends.)
func TestRunForEndsDespiteASpinningStage(t *testing.T) {
	var quit, entered atomic.Bool
	t.Cleanup(func() { quit.Store(true) })
	reg := &stages.Registry{}
	if err := reg.Register(stages.Spec{
		Name: "spin", Summary: "Spin on one record, ignoring the context.",
		New: func(stages.Options, stages.Env) (stages.Stage, error) {
			return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
				for _, r := range in {
					if r.Partition == 0 && r.Offset == 3 {
						entered.Store(true)
						for !quit.Load() {
							time.Sleep(time.Millisecond) // a busy stage that never checks ctx
						}
					}
				}
				return in, nil
			}), nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, t.TempDir(), "c.yaml", strings.NewReplacer("RATE", "200", "stage: count", "stage: spin",
		"shutdown_timeout: 10s", "shutdown_timeout: 2s").Replace(embeddedConfig))
	var out, errOut stagetest.Buffer
	done := make(chan int, 1)
	began := time.Now()
	go func() {
		done <- execute(context.Background(), []string{"run", "-c", cfg, "--for", "2s"}, &clibase.Env{Stdout: &out, Stderr: &errOut, Registry: reg})
	}()
	select {
	case code := <-done:
		took := time.Since(began)
		if !entered.Load() {
			t.Fatal("the stage never reached the record it spins on; the test proves nothing")
		}
		if code == 0 {
			t.Fatalf("exit 0 after abandoning a stage call, want non-zero\n%s", errOut.String())
		}
		if !strings.Contains(errOut.String(), `stage "spin"`) || !strings.Contains(errOut.String(), "ignore cancellation") {
			t.Fatalf("the output does not name the abandoned stage:\n%s", errOut.String())
		}
		// --for 2s, then shutdown_timeout 2s, plus a small bound; the
		// embedded broker's start adds a little
		if took > 9*time.Second {
			t.Fatalf("run took %v", took)
		}
		t.Logf("run ended after %v with exit %d", took, code)
	case <-time.After(30 * time.Second):
		t.Fatal("run --for 2s with shutdown_timeout 2s was still running after 30s")
	}
}
