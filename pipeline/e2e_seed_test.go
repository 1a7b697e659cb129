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
		t.Run(fmt.Sprintf("run%02d/validate=%v", i, validate), func(t *testing.T) { seedScenario(t, validate) })
	}
}

func seedScenario(t *testing.T, validate bool) {
	c := kafkatest.New(t, 2)
	c.CreateTopic(t, "seed", 2) // partition 0 on broker 0, partition 1 on broker 1
	for p := int32(0); p < 2; p++ {
		c.Produce(t, "seed", p, 60, values("s"))
	}
	c.CommitOffsets(t, "seed-group", "seed", map[int32]int64{0: 10, 1: 10})
	for p := int32(0); p < 2; p++ {
		c.DeleteRecords(t, "seed", p, 40)
		if ls, hw := c.Bounds(t, "seed", p); ls != 40 || hw != 60 {
			t.Fatalf("partition %d log is %d..%d, want 40..60", p, ls, hw)
		}
	}

	// Hold back the slow broker's first fetch 300ms, and the fast
	// broker's first lookup 600ms: the slow partition's OffsetOutOfRange
	// then arrives while the fast partition's re-resolve is in flight.
	slow := c.LeaderFor("seed", 0)
	var held, heldLookup atomic.Bool
	var fetchReleased, lookupReleased atomic.Int64
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if c.CurrentNode() == slow && held.CompareAndSwap(false, true) {
			c.SleepControl(func() { time.Sleep(300 * time.Millisecond) })
			fetchReleased.Store(time.Now().UnixNano())
			c.DropControl()
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if c.CurrentNode() != slow && heldLookup.CompareAndSwap(false, true) {
			c.SleepControl(func() { time.Sleep(600 * time.Millisecond) })
			lookupReleased.Store(time.Now().UnixNano())
			c.DropControl()
		}
		return nil, nil, false
	})

	var mu sync.Mutex
	var resets []offsetstore.ResetEvent
	rec := newRecorder()
	cfg := fastConfig(c, "seed-group", "seed")
	cfg.Consumer.SkipOffsetValidation = !validate
	r := start(t, cfg, pipeline.WithStage("record", rec), pipeline.OnReset(func(ev offsetstore.ResetEvent) {
		mu.Lock()
		resets = append(resets, ev)
		mu.Unlock()
	}))
	waitFor(t, 20*time.Second, "40 records", func() bool { return rec.total() >= 40 })
	waitFor(t, 10*time.Second, "commits of 60", func() bool {
		got := c.Committed(t, "seed-group", "seed")
		return got[0] == 60 && got[1] == 60
	})
	if err := r.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !validate {
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
		tp := offsetstore.TopicPartition{Topic: "seed", Partition: p}
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
	if got := c.Committed(t, "seed-group", "seed"); got[0] != 60 || got[1] != 60 {
		t.Fatalf("committed %v, want 60 and 60", got)
	}
}
