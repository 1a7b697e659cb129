package pipeline_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/logging"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestMissedDrainDeadlineIsLoggedAsSuch: a stop while a stage holds
// records past the drain deadline logs that the in-flight work did not
// finish, and then that only what finished was committed, not that the
// work "drained".
func TestMissedDrainDeadlineIsLoggedAsSuch(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	topic, group := c.Name("orders"), c.Name("g-drain")
	c.CreateTopic(t, topic, 1)
	c.Produce(t, topic, 0, 50, values("o"))
	var started atomic.Int64
	released := make(chan struct{})
	stuck := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		if started.Add(1) == 2 {
			defer close(released)
			time.Sleep(1700 * time.Millisecond) // ignores ctx, past the drain deadline (about 1.3s)
		}
		return in, nil
	})
	defer func() { <-released }() // the stage call ends before the test does
	cfg := fastConfig(c, group, topic)
	cfg.ShutdownTimeout = 2 * time.Second
	cfg.Consumer.MaxPartitionFetchBytes = 200 // a few records per batch
	var logs logSink
	r := start(t, cfg, pipeline.WithStage("stuck", stuck), pipeline.WithLogger(logging.ForStage(logs.logger())))
	waitFor(t, 10*time.Second, "the stage to hold a batch", func() bool { return started.Load() >= 2 })
	_ = r.shutdown(t)
	if !logs.contains("did not finish before the drain deadline") {
		t.Fatalf("no warning that the drain deadline passed:\n%s", logs.text())
	}
	if logs.contains("in-flight work drained and committed") {
		t.Errorf("the log says the work drained although the drain deadline passed:\n%s", logs.text())
	}
	if !logs.contains("committed the records that finished; those in flight at the drain deadline were not committed") {
		t.Errorf("the end of the generation is not logged as a partial drain:\n%s", logs.text())
	}
}

// text returns every line logged.
func (l *logSink) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "")
}
