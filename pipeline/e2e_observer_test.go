package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// observed is a pipeline.Observer that keeps everything it is told.
type observed struct {
	mu         sync.Mutex
	stagesDone map[string]pipeline.StageDone // summed per stage
	fetched    pipeline.FetchDone            // summed
	commits    []pipeline.CommitDone
	committed  []pipeline.CommittedOffset
	rebalances []pipeline.Rebalance
}

func (o *observed) StageDone(d pipeline.StageDone) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.stagesDone[d.Stage]
	s.Stage = d.Stage
	s.Records += d.Records
	s.Out += d.Out
	s.Dropped += d.Dropped
	s.Failed += d.Failed
	s.DeadLettered += d.DeadLettered
	s.Duration += d.Duration
	o.stagesDone[d.Stage] = s
}

func (o *observed) FetchDone(d pipeline.FetchDone) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fetched.Partitions += d.Partitions
	o.fetched.Records += d.Records
	o.fetched.Bytes += d.Bytes
	o.fetched.Errors += d.Errors
	o.fetched.Latency += d.Latency
}

func (o *observed) CommitDone(d pipeline.CommitDone) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.commits = append(o.commits, d)
}

func (o *observed) OffsetsCommitted(cs []pipeline.CommittedOffset) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.committed = append(o.committed, cs...)
}

func (o *observed) Rebalanced(r pipeline.Rebalance) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rebalances = append(o.rebalances, r)
}

// TestObserver: a run reports what its stages did (a filter's drops and
// a stage's dead letters), what was fetched, every commit with the
// newest committed record's time, and the generation's partitions
// assigned and, at the stop, revoked.
func TestObserver(t *testing.T) {
	c := kafkatest.New(t, 2).Kafka
	topic, group, dlq := c.Name("obs"), c.Name("g"), c.Name("obs.dlq")
	c.CreateTopic(t, topic, 2)
	c.CreateTopic(t, dlq, 1)
	produced := time.Now()
	for p := int32(0); p < 2; p++ {
		c.Produce(t, topic, p, 100, values("v"))
	}
	evens := stageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		var out []stages.Record
		for _, r := range in {
			if r.Offset%2 == 0 {
				out = append(out, r)
			}
		}
		return out, nil
	})
	rec := newRecorder()
	o := &observed{stagesDone: map[string]pipeline.StageDone{}}
	cfg := fastConfig(c, group, topic)
	cfg.DeadLetter = pipeline.DeadLetterConfig{Topic: dlq, Retries: -1}
	r := start(t, cfg, pipeline.WithObserver(o), pipeline.WithStage("evens", evens),
		pipeline.WithStage("reject", rejectOffsets(10, 20)), pipeline.WithStage("record", rec))
	waitFor(t, 20*time.Second, "the records processed", func() bool { return rec.total() >= 96 })
	if err := r.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	want := map[string]pipeline.StageDone{
		"evens":  {Stage: "evens", Records: 200, Out: 100, Dropped: 100},
		"reject": {Stage: "reject", Records: 100, Out: 96, Failed: 4, DeadLettered: 4},
		"record": {Stage: "record", Records: 96, Out: 96},
	}
	for name, w := range want {
		got := o.stagesDone[name]
		if got.Duration <= 0 {
			t.Errorf("%s: no time measured", name)
		}
		got.Duration = 0
		if got != w {
			t.Errorf("%s: %+v, want %+v", name, got, w)
		}
	}
	if o.fetched.Records != 200 || o.fetched.Bytes <= 0 || o.fetched.Errors != 0 || o.fetched.Latency <= 0 {
		t.Errorf("fetched %+v, want 200 records, some bytes and time, no errors", o.fetched)
	}
	var payload int64 // key and value are both values("v")(i), on each partition
	for i := range 100 {
		payload += 2 * 2 * int64(len(values("v")(i)))
	}
	if o.fetched.Bytes != payload {
		t.Errorf("fetched %d bytes, want the records' payload, %d", o.fetched.Bytes, payload)
	}
	if len(o.commits) == 0 {
		t.Fatal("no commit reported")
	}
	for _, cd := range o.commits {
		if cd.Err != nil || cd.Reason() != "" || cd.Partitions == 0 || cd.Latency <= 0 {
			t.Errorf("commit %+v (reason %q)", cd, cd.Reason())
		}
	}
	last := map[int32]pipeline.CommittedOffset{}
	for _, co := range o.committed {
		last[co.Partition.Partition] = co
	}
	for p := int32(0); p < 2; p++ {
		co := last[p]
		if co.Offset != 100 || co.RecordTime.Before(produced.Add(-time.Second)) || co.RecordTime.After(time.Now()) {
			t.Errorf("partition %d: last committed %+v, want offset 100 with a record time after %v", p, co, produced)
		}
	}
	// a start with both partitions, its end; a rebalance repeats the pair
	if len(o.rebalances) < 2 {
		t.Fatalf("rebalances %+v, want a start and an end", o.rebalances)
	}
	for i, rb := range o.rebalances {
		if rb.Ended != (i%2 == 1) || rb.Partitions != 2 || (!rb.Ended && rb.Paused <= 0) || len(o.rebalances)%2 != 0 {
			t.Fatalf("rebalances %+v, want pairs of 2 partitions assigned (after a pause) then revoked", o.rebalances)
		}
	}
}

var errTest = errors.New("rejected by the test")

// rejectOffsets is a stage that fails, for good, the records at the
// given offsets of every partition.
func rejectOffsets(offsets ...int64) stages.Stage {
	return stageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		return stages.ForEach(in, func(r *stages.Record, emit func(stages.Record)) error {
			if slices.Contains(offsets, r.Offset) {
				return stages.Permanent(errTest)
			}
			emit(*r)
			return nil
		})
	})
}

// TestCommitDoneReason: a failed commit's reason is a short label.
func TestCommitDoneReason(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("REBALANCE_IN_PROGRESS: %w", offsets.ErrGenerationEnded), "fenced"},
		{offsets.ErrStaleGeneration, "fenced"},
		{fmt.Errorf("commit not acknowledged in time: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("commit: %w", kafka.GroupCoordinatorNotAvailable), "group_coordinator_not_available"},
		{errors.New("connection reset"), "other"},
	}
	for _, tt := range tests {
		if got := (pipeline.CommitDone{Err: tt.err}).Reason(); got != tt.want {
			t.Errorf("%v: reason %q, want %q", tt.err, got, tt.want)
		}
	}
}
