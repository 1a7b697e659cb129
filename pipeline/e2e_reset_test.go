package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// events collects reset and stop notices.
type events struct {
	mu      sync.Mutex
	resets  []offsetstore.ResetEvent
	stopped []pipeline.PartitionStopped
}

func (e *events) options() []pipeline.Option {
	return []pipeline.Option{
		pipeline.OnReset(func(ev offsetstore.ResetEvent) { e.mu.Lock(); e.resets = append(e.resets, ev); e.mu.Unlock() }),
		pipeline.OnPartitionStopped(func(s pipeline.PartitionStopped) { e.mu.Lock(); e.stopped = append(e.stopped, s); e.mu.Unlock() }),
	}
}

func (e *events) resetCount() int   { e.mu.Lock(); defer e.mu.Unlock(); return len(e.resets) }
func (e *events) stoppedCount() int { e.mu.Lock(); defer e.mu.Unlock(); return len(e.stopped) }

func (e *events) resetsOf(tp offsetstore.TopicPartition) []offsetstore.ResetEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []offsetstore.ResetEvent
	for _, r := range e.resets {
		if r.Partition == tp {
			out = append(out, r)
		}
	}
	return out
}

// TestNewGroupResetPolicies: a group without committed offsets starts
// where auto_offset_reset says; none stops the partition with a typed
// error and processes nothing.
func TestNewGroupResetPolicies(t *testing.T) {
	newGroupResetPolicies(t, func(t *testing.T) *kafkatest.Kafka { return kafkatest.New(t, 1).Kafka })
}

// newGroupResetPolicies runs on the clusters cluster returns.
func newGroupResetPolicies(t *testing.T, cluster func(*testing.T) *kafkatest.Kafka) {
	tests := []struct {
		policy    offsetstore.ResetPolicy
		processed []int64 // offsets processed: 0..9 existed, 10..14 produced after start
		to        int64
	}{
		{policy: offsetstore.ResetEarliest, processed: seq(0, 15), to: 0},
		{policy: offsetstore.ResetLatest, processed: seq(10, 15), to: 10},
		{policy: offsetstore.ResetNone},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			c := cluster(t)
			topic := c.Name("t")
			tp := offsetstore.TopicPartition{Topic: topic, Partition: 0}
			c.CreateTopic(t, topic, 1)
			c.Produce(t, topic, 0, 10, values("old"))
			rec := newRecorder()
			ev := &events{}
			cfg := fastConfig(c, c.Name("g-"+tt.policy.String()), topic)
			cfg.Consumer.AutoOffsetReset = tt.policy
			r := start(t, cfg, append(ev.options(), pipeline.WithStage("record", rec))...)
			if tt.policy == offsetstore.ResetNone {
				waitFor(t, 10*time.Second, "the partition to stop", func() bool { return ev.stoppedCount() > 0 })
				var re *offsetstore.ResetError
				if !errors.As(ev.stopped[0].Err, &re) || re.Reason != offsetstore.ReasonNoCommittedOffset || re.Partition != tp {
					t.Fatalf("stopped with %v, want a *ResetError for %s (no committed offset)", ev.stopped[0].Err, tp)
				}
				c.Produce(t, topic, 0, 5, values("new"))
				time.Sleep(300 * time.Millisecond)
				if n := rec.total(); n != 0 {
					t.Fatalf("processed %d records of a stopped partition", n)
				}
				st, err := r.p.Stats(context.Background())
				if err != nil || len(st.Partitions) != 1 || st.Partitions[0].State != pipeline.Stopped {
					t.Fatalf("stats %+v, %v: want the partition STOPPED", st.Partitions, err)
				}
				return
			}
			waitFor(t, 10*time.Second, "the start to resolve", func() bool { return ev.resetCount() > 0 })
			c.Produce(t, topic, 0, 5, values("new"))
			waitFor(t, 10*time.Second, "the records", func() bool { return rec.total() >= len(tt.processed) })
			if err := r.shutdown(t); err != nil {
				t.Fatal(err)
			}
			if got := rec.offsets(tp); !slices.Equal(got, tt.processed) {
				t.Fatalf("processed %v, want %v", got, tt.processed)
			}
			rs := ev.resetsOf(tp)
			if len(rs) != 1 || rs[0].Reason != offsetstore.ReasonNoCommittedOffset || rs[0].To != tt.to || rs[0].From != -1 {
				t.Fatalf("resets %+v, want one no_committed_offset to %d", rs, tt.to)
			}
			if got := c.Committed(t, cfg.Consumer.Group, topic)[0]; got != 15 {
				t.Fatalf("committed %d, want 15", got)
			}
		})
	}
}

// TestCommittedAboveHighWatermark: the topic was deleted and recreated,
// so the group's committed offset (50) is above the new log's high
// watermark (5). The policy decides the new start, the reset is reported
// as data loss, and the new records are processed and committed.
func TestCommittedAboveHighWatermark(t *testing.T) {
	committedAboveHighWatermark(t, kafkatest.New(t, 1).Kafka)
}

func committedAboveHighWatermark(t *testing.T, c *kafkatest.Kafka) {
	topic, group := c.Name("recreated"), c.Name("g-loss")
	tp := offsetstore.TopicPartition{Topic: topic, Partition: 0}
	c.CreateTopic(t, topic, 1)
	c.Produce(t, topic, 0, 50, values("old"))
	c.CommitOffsets(t, group, topic, map[int32]int64{0: 50})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Admin.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	// Apache Kafka may still be removing the old topic for a moment.
	var err error
	waitFor(t, 10*time.Second, "the topic to be created again", func() bool { err = c.CreateTopicE(topic, 1); return err == nil })
	c.Produce(t, topic, 0, 5, values("new"))
	if c.Committed(t, group, topic)[0] != 50 {
		// The broker dropped the deleted topic's offsets (Kafka does so
		// too); put back what a group that committed just before the
		// deletion still has.
		c.CommitOffsets(t, group, topic, map[int32]int64{0: 50})
	}

	rec := newRecorder()
	ev := &events{}
	r := start(t, fastConfig(c, group, topic), append(ev.options(), pipeline.WithStage("record", rec))...)
	waitFor(t, 10*time.Second, "5 records", func() bool { return rec.total() >= 5 })
	waitFor(t, 5*time.Second, "commit 5", func() bool { return c.Committed(t, group, topic)[0] == 5 })
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	if got := rec.offsets(tp); !slices.Equal(got, seq(0, 5)) {
		t.Fatalf("processed %v, want 0..4", got)
	}
	rs := ev.resetsOf(tp)
	if len(rs) != 1 || rs[0].Reason != offsetstore.ReasonAboveHighWatermark || !rs[0].DataLoss || rs[0].From != 50 || rs[0].To != 0 {
		t.Fatalf("resets %+v, want one data-loss reset 50 -> 0", rs)
	}
	if got := c.Committed(t, group, topic)[0]; got != 5 {
		t.Fatalf("committed %d, want 5 (the watermark restarts after data loss)", got)
	}
}

// TestFallsBelowLogStartWhileRunning: retention removes records the
// consumer has not read yet; it resumes at the new log start with a
// reset event, and processes everything after it.
func TestFallsBelowLogStartWhileRunning(t *testing.T) {
	fallsBelowLogStartWhileRunning(t, kafkatest.New(t, 1).Kafka)
}

func fallsBelowLogStartWhileRunning(t *testing.T, c *kafkatest.Kafka) {
	topic, group := c.Name("slow"), c.Name("g-slow")
	tp := offsetstore.TopicPartition{Topic: topic, Partition: 0}
	c.CreateTopic(t, topic, 1)
	c.Produce(t, topic, 0, 100, func(i int) []byte { return []byte(fmt.Sprintf("%0100d", i)) }) // 200 bytes each
	rec := newRecorder()
	gate := make(chan struct{})
	ev := &events{}
	cfg := fastConfig(c, group, topic)
	cfg.Consumer.MaxPartitionFetchBytes = 1 * pipeline.KiB // small fetches: a few records each
	cfg.Consumer.BufferBytes = 1 * pipeline.KiB
	cfg.Consumer.FetchMaxBytes = 1 * pipeline.KiB
	blocking := stageFunc(func(ctx context.Context, in []stagesRecord) ([]stagesRecord, error) {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return rec.Process(ctx, in)
	})
	r := start(t, cfg, append(ev.options(), pipeline.WithStage("gate", blocking))...)
	waitFor(t, 10*time.Second, "the first fetch", func() bool {
		st, err := r.p.Stats(context.Background())
		return err == nil && st.BufferedBytes > 0
	})
	// The consumer holds a few records; retention deletes up to 70.
	c.DeleteRecords(t, topic, 0, 70)
	close(gate)
	waitFor(t, 10*time.Second, "the reset", func() bool { return len(ev.resetsOf(tp)) > 1 })
	waitFor(t, 10*time.Second, "the records after the log start", func() bool {
		got := rec.offsets(tp)
		return len(got) > 0 && got[len(got)-1] == 99
	})
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	rs := ev.resetsOf(tp)
	if len(rs) != 2 || rs[0].Reason != offsetstore.ReasonNoCommittedOffset ||
		rs[1].Reason != offsetstore.ReasonBelowLogStart || rs[1].To != 70 || rs[1].From >= 70 || rs[1].Skipped != 70-rs[1].From {
		t.Fatalf("resets %+v, want the start at 0, then one below_log_start to 70", rs)
	}
	got := rec.offsets(tp)
	// what was fetched before the deletion is processed, then 70..99
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] || (got[i] != got[i-1]+1 && got[i] != 70) {
			t.Fatalf("processed %v: not in order, or a gap no reset explains", got)
		}
	}
	if got[len(got)-1] != 99 || c.Committed(t, group, topic)[0] != 100 {
		t.Fatalf("processed up to %d, committed %d; want 99 and 100", got[len(got)-1], c.Committed(t, group, topic)[0])
	}
}

func seq(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}
