package app

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
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
