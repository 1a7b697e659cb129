package pipeline_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestSeedScenario is the bug this project exists to make impossible,
// against a real Kafka-protocol broker: a group committed 10 on two
// partitions led by two brokers and stopped; the logs grew to 60 and
// retention (DeleteRecords) removed everything below 40. On restart both
// fetches answer OffsetOutOfRange; one broker's answer is held back so the
// two arrive apart, the second while the first partition is being
// re-resolved. Expected: no crash, one reset per partition (10 -> 40, 30
// skipped), offsets 40..59 processed exactly once each, commits 60 and 60.
// It runs 20 times, alternately with and without committed-offset
// validation (with it, the bad offsets are caught before any fetch).
func TestSeedScenario(t *testing.T) {
	for i := 0; i < 20; i++ {
		validate := i%2 == 1
		t.Run(fmt.Sprintf("run%02d/validate=%v", i, validate), func(t *testing.T) { seedScenario(t, kafkatest.New(t, 2).Kafka, validate) })
	}
}

// seedScenario runs on c, kfake's cluster or Apache Kafka. With one broker
// both partitions share a leader, so their answers cannot arrive apart:
// the scenario then checks the outcome without the interleaving.
func seedScenario(t *testing.T, c *kafkatest.Kafka, validate bool) {
	topic, group := c.Name("seed"), c.Name("seed-group")
	c.CreateTopic(t, topic, 2) // partition 0 on one broker, partition 1 on another
	for p := int32(0); p < 2; p++ {
		c.Produce(t, topic, p, 60, values("s"))
	}
	c.CommitOffsets(t, group, topic, map[int32]int64{0: 10, 1: 10})
	for p := int32(0); p < 2; p++ {
		c.DeleteRecords(t, topic, p, 40)
		if ls, hw := c.Bounds(t, topic, p); ls != 40 || hw != 60 {
			t.Fatalf("partition %d log is %d..%d, want 40..60", p, ls, hw)
		}
	}

	// Hold back the slow broker's first fetch 300ms, and the fast
	// broker's first lookup 600ms: the slow partition's OffsetOutOfRange
	// then arrives while the fast partition's re-resolve is in flight.
	slow, fast := c.Leader(t, topic, 0), c.Leader(t, topic, 1)
	interleave := slow != fast
	var held, heldLookup atomic.Bool
	var fetchReleased, lookupReleased atomic.Int64
	if interleave {
		c.Intercept(t, kmsg.Fetch, func(node int32, _ kmsg.Request) kafkatest.Action {
			if node == slow && held.CompareAndSwap(false, true) {
				fetchReleased.Store(time.Now().Add(300 * time.Millisecond).UnixNano())
				return kafkatest.Action{Delay: 300 * time.Millisecond}
			}
			return kafkatest.Action{}
		})
		c.Intercept(t, kmsg.ListOffsets, func(node int32, _ kmsg.Request) kafkatest.Action {
			if node == fast && heldLookup.CompareAndSwap(false, true) {
				lookupReleased.Store(time.Now().Add(600 * time.Millisecond).UnixNano())
				return kafkatest.Action{Delay: 600 * time.Millisecond}
			}
			return kafkatest.Action{}
		})
	} else {
		t.Logf("one broker leads both partitions: their answers arrive together")
	}

	var mu sync.Mutex
	var resets []offsetstore.ResetEvent
	rec := newRecorder()
	cfg := fastConfig(c, group, topic)
	cfg.Consumer.SkipOffsetValidation = !validate
	// The scenario is about resets, not rebalances: a session long
	// enough that a loaded machine's stalls do not end it (a second
	// generation would start from the committed offset 10 again and
	// process 40..59 twice, which at-least-once allows but this test's
	// exact counts do not).
	cfg.Consumer.SessionTimeout = 10 * time.Second
	cfg.Consumer.HeartbeatInterval = 500 * time.Millisecond
	r := start(t, cfg, pipeline.WithStage("record", rec), pipeline.OnReset(func(ev offsetstore.ResetEvent) {
		mu.Lock()
		resets = append(resets, ev)
		mu.Unlock()
	}))
	waitFor(t, 20*time.Second, "40 records", func() bool { return rec.total() >= 40 })
	waitFor(t, 10*time.Second, "commits of 60", func() bool {
		got := c.Committed(t, group, topic)
		return got[0] == 60 && got[1] == 60
	})
	if err := r.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !validate && interleave {
		if !held.Load() || !heldLookup.Load() {
			t.Fatalf("held fetch %v, held lookup %v: the interleaving did not happen", held.Load(), heldLookup.Load())
		}
		if fetchReleased.Load() >= lookupReleased.Load() {
			t.Fatal("the second OffsetOutOfRange did not arrive while the first re-resolve was in flight")
		}
	}

	mu.Lock()
	defer mu.Unlock()
	for p := int32(0); p < 2; p++ {
		tp := offsetstore.TopicPartition{Topic: topic, Partition: p}
		var mine []offsetstore.ResetEvent
		for _, ev := range resets {
			if ev.Partition == tp {
				mine = append(mine, ev)
			}
		}
		if len(mine) != 1 {
			t.Fatalf("%s: %d resets, want 1: %+v", tp, len(mine), mine)
		}
		if ev := mine[0]; ev.Reason != offsetstore.ReasonBelowLogStart || ev.From != 10 || ev.To != 40 || ev.Skipped != 30 {
			t.Fatalf("%s: reset %+v, want below_log_start 10 -> 40 skipped 30", tp, ev)
		}
		got := rec.offsets(tp)
		if len(got) != 20 {
			t.Fatalf("%s: processed %v, want 40..59 once each", tp, got)
		}
		for i, o := range got {
			if o != int64(40+i) {
				t.Fatalf("%s: processed %v, want 40..59 once each", tp, got)
			}
		}
	}
	if got := c.Committed(t, group, topic); got[0] != 60 || got[1] != 60 {
		t.Fatalf("committed %v, want 60 and 60", got)
	}
}
