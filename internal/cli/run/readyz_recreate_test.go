package run

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
)

// TestReadyzAndConsumingAcrossATopicsRecreation: the input topic is
// deleted under a running processor; it holds no partition, and once
// that lasts past the grace (metadata_max_age + session_timeout +
// rebalance_timeout, 4s here: the group checks the topics at most once a second) /readyz answers 503 saying so. The topic
// is created again and written to: the processor consumes the new
// records from auto_offset_reset (a topic_recreated reset, in the log
// and the metrics) and is ready again.
func TestReadyzAndConsumingAcrossATopicsRecreation(t *testing.T) {
	k := kafkatest.New(t, 1).Kafka
	k.CreateTopic(t, "orders", 2)
	k.Produce(t, "orders", 0, 5, func(int) []byte { return []byte("a") })
	var n atomic.Int64
	cfg := writeFile(t, t.TempDir(), "c.yaml", "kafka:\n  brokers: ['"+k.Addrs[0]+"']\n  metadata_max_age: 500ms\n"+
		"consumer:\n  group: g\n  topics: [orders]\n  auto_offset_reset: earliest\n  commit_interval: 100ms\n"+
		"  session_timeout: 1s\n  heartbeat_interval: 100ms\n  rebalance_timeout: 2s\n  fetch_max_wait: 100ms\n"+
		"pipeline:\n  - stage: count\nshutdown_timeout: 10s\n")
	base, errOut, done, cancel := startRun(t, cfg, "200ms", countRegistry(&n))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the run's log:\n%s", errOut.String())
		}
	})
	unready := func(what string) {
		t.Helper()
		var last string
		defer func() { t.Logf("last /readyz: %s", last) }()
		waitUntil(t, 20*time.Second, what, func() bool {
			code, body := get(t, base+"/readyz")
			last = body
			return code == http.StatusServiceUnavailable && strings.Contains(body, "no partition of the subscribed topics assigned for") &&
				strings.Contains(body, "grace 4s")
		})
	}
	ready := func(what string, partitions int) {
		t.Helper()
		waitUntil(t, 20*time.Second, what, func() bool {
			code, body := get(t, base+"/readyz")
			return code == http.StatusOK && strings.Contains(body, `"partitions":`+string(rune('0'+partitions)))
		})
	}
	ready("/readyz 200 while the topic exists", 2)
	waitUntil(t, 20*time.Second, "the first 5 records", func() bool { return n.Load() == 5 })

	ctx, cancelAdmin := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelAdmin()
	if _, err := k.Admin.DeleteTopics(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	unready("/readyz 503 after the topic was deleted")
	k.CreateTopic(t, "orders", 2)
	k.Produce(t, "orders", 1, 10, func(int) []byte { return []byte("b") })
	ready("/readyz 200 once the topic is back", 2)
	waitUntil(t, 20*time.Second, "the recreated topic's 10 records", func() bool { return n.Load() == 15 })
	_, metrics := get(t, base+"/metrics")
	if v := metricValue(metrics, `fencepost_resets_total{reason="topic_recreated"}`); v != 2 {
		t.Errorf(`fencepost_resets_total{reason="topic_recreated"} = %v, want 2 (both partitions)`, v)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d, want 0\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop within 30s of cancellation")
	}
	if !strings.Contains(errOut.String(), "topic_recreated") {
		t.Errorf("no reset naming the recreation in the log:\n%s", errOut.String())
	}
}
