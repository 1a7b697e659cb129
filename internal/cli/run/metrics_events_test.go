package run

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/stages"
	_ "github.com/fencepost-dev/fencepost/stages/builtin" // dedupe and aggregate
)

// TestRunExportsStageEvents: what the stateful stages drop, and why, is
// on /metrics: each stage's events are there at 0 from the start, then a
// duplicate dropped by dedupe, a late record and one beyond max_future
// dropped by aggregate are counted once each under the stage's name.
func TestRunExportsStageEvents(t *testing.T) {
	k := kafkatest.New(t, 1).Kafka
	k.CreateTopic(t, "events", 1)
	events := []string{
		`{"id":1,"user":"a","ts":10000}`,
		`{"id":2,"user":"a","ts":130000}`,       // stream time 130s: [0, 60s) has closed
		`{"id":3,"user":"a","ts":20000}`,        // late for [0, 60s)
		`{"id":3,"user":"a","ts":20000}`,        // a duplicate of id 3
		`{"id":4,"user":"a","ts":999999999999}`, // beyond max_future
		`{"id":5,"user":"a","ts":140000}`,
	}
	cfg := writeFile(t, t.TempDir(), "c.yaml", "kafka:\n  brokers: ['"+k.Addrs[0]+"']\n"+
		"consumer:\n  group: g\n  topics: [events]\n  auto_offset_reset: earliest\n  commit_interval: 100ms\n"+
		"  session_timeout: 1s\n  heartbeat_interval: 100ms\n  rebalance_timeout: 2s\n  fetch_max_wait: 100ms\n"+
		"state:\n  store: memory\n"+
		"pipeline:\n"+
		"  - stage: json\n"+
		"  - stage: dedupe\n    name: once\n    key: json.id\n    repartition: false\n    time: json.ts\n    within: 1h\n"+
		"  - stage: aggregate\n    name: per_minute\n    key: json.user\n    repartition: false\n    time: json.ts\n"+
		"    window: {type: tumbling, size: 1m}\n    fields: {n: count()}\n"+
		"shutdown_timeout: 10s\n")
	base, errOut, done, cancel := startRun(t, cfg, "200ms", stages.Default)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the run's log:\n%s", errOut.String())
		}
	})
	metric := func(stage, event string) string {
		return fmt.Sprintf(`fencepost_stage_events_total{event=%q,stage=%q}`, event, stage)
	}
	_, body := get(t, base+"/metrics")
	for _, name := range []string{metric("once", "duplicate_records_dropped"), metric("per_minute", "late_records_dropped"),
		metric("per_minute", "future_records_dropped")} {
		if got := metricValue(body, name); got != 0 {
			t.Errorf("before any record: %s = %v, want 0", name, got)
		}
	}
	k.Produce(t, "events", 0, len(events), func(i int) []byte { return []byte(events[i]) })
	waitUntil(t, 30*time.Second, "every event processed", func() bool {
		_, body = get(t, base+"/metrics")
		return metricValue(body, "fencepost_processed_records_total") >= float64(len(events))
	})
	for name, want := range map[string]float64{
		metric("once", "duplicate_records_dropped"):    1,
		metric("per_minute", "late_records_dropped"):   1,
		metric("per_minute", "future_records_dropped"): 1,
	} {
		if got := metricValue(body, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Fatalf("exit %d\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop within 30s of cancellation")
	}
}
