package stagetest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/process"
)

// Result is what a Run did. Records are listed by partition (sorted by
// topic, then partition number), in the order the chain produced them.
type Result struct {
	// Outputs are the records the last stage returned.
	Outputs []stages.Record
	// DeadLetters are the records the dead-letter sink acknowledged,
	// with the process.Header* error headers.
	DeadLetters []stages.Record
	// Marks holds, per partition, the offset that would be committed:
	// the last input offset + 1 if the partition's batch finished, the
	// offset of the failing record if the stop policy stopped it. A
	// partition whose run ended with ctx has no mark.
	Marks map[offsetstore.TopicPartition]int64
	// Stopped holds the error of each partition that did not finish: a
	// *process.StoppedError under the stop policy, or an error wrapping
	// ctx.Err() if ctx ended.
	Stopped map[offsetstore.TopicPartition]error
	// Mutated lists input records (as given to Run) whose content a stage
	// changed in place, breaking the stages.Record contract. It is
	// empty for correct stages.
	Mutated []stages.Record
}

// Run runs records through the named stages as the pipeline does: the
// records are grouped into one batch per topic and partition, sorted by
// offset, and each batch goes through a process.Chain with policy (its
// isolation of failing records, retries with backoff, dead-lettering or
// stop). Partitions run concurrently, so stages see concurrent calls.
//
// Dead letters always reach an in-memory sink, recorded in
// Result.DeadLetters; if policy.Sink is set, they go to it first and are
// recorded once it acknowledged them (a Sink that keeps failing blocks
// until ctx ends, as in the pipeline). Policy.Backoff 0 means the chain's
// default of 100ms: set a small one when testing retries. Run neither
// modifies records nor closes the stages.
func Run(ctx context.Context, records []stages.Record, policy process.FailurePolicy, named ...process.NamedStage) Result {
	parts := map[offsetstore.TopicPartition][]stages.Record{}
	for _, r := range records {
		tp := offsetstore.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		parts[tp] = append(parts[tp], r)
	}
	tps := make([]offsetstore.TopicPartition, 0, len(parts))
	for tp := range parts {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b offsetstore.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})

	runs := make([]partitionRun, len(tps))
	var wg sync.WaitGroup
	for i, tp := range tps {
		batch := parts[tp]
		slices.SortStableFunc(batch, func(a, b stages.Record) int { return cmp.Compare(a.Offset, b.Offset) })
		runs[i] = partitionRun{tp: tp, batch: batch, before: deepCopy(batch)}
		wg.Go(func() { runs[i].run(ctx, policy, named) })
	}
	wg.Wait()

	res := Result{Marks: map[offsetstore.TopicPartition]int64{}, Stopped: map[offsetstore.TopicPartition]error{}}
	for _, pr := range runs {
		res.Outputs = append(res.Outputs, pr.out...)
		res.DeadLetters = append(res.DeadLetters, pr.sink.got...)
		if pr.marked {
			res.Marks[pr.tp] = pr.mark
		}
		if pr.err != nil {
			res.Stopped[pr.tp] = pr.err
		}
		for i := range pr.batch {
			if !equal(pr.batch[i], pr.before[i]) {
				res.Mutated = append(res.Mutated, pr.before[i])
			}
		}
	}
	return res
}

// partitionRun is one partition's batch and what became of it.
type partitionRun struct {
	tp     offsetstore.TopicPartition
	batch  []stages.Record
	before []stages.Record // deep copy of batch, to detect mutation
	sink   memorySink
	out    []stages.Record
	err    error
	mark   int64
	marked bool
}

func (pr *partitionRun) run(ctx context.Context, policy process.FailurePolicy, named []process.NamedStage) {
	pr.sink.next = policy.Sink
	policy.Sink = &pr.sink
	chain := process.Chain{Stages: named, Policy: policy, Log: zap.NewNop()}
	pr.out, pr.err = chain.Run(ctx, pr.batch)
	var stop *process.StoppedError
	switch {
	case pr.err == nil:
		pr.mark, pr.marked = pr.batch[len(pr.batch)-1].Offset+1, true
	case errors.As(pr.err, &stop):
		pr.mark, pr.marked = stop.Offset, true
	}
}

// memorySink records the dead letters of one partition, after next (the
// caller's sink, if any) acknowledged them.
type memorySink struct {
	next process.DeadLetterSink
	got  []stages.Record
}

func (s *memorySink) Send(ctx context.Context, records []stages.Record) error {
	if s.next != nil {
		if err := s.next.Send(ctx, records); err != nil {
			return err
		}
	}
	s.got = append(s.got, records...)
	return nil
}

func deepCopy(rs []stages.Record) []stages.Record {
	out := make([]stages.Record, len(rs))
	for i, r := range rs {
		r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
		if r.Headers != nil {
			hs := make([]stages.Header, len(r.Headers))
			for j, h := range r.Headers {
				hs[j] = stages.Header{Key: h.Key, Value: bytes.Clone(h.Value)}
			}
			r.Headers = hs
		}
		out[i] = r
	}
	return out
}

func equal(a, b stages.Record) bool {
	if a.Topic != b.Topic || a.Partition != b.Partition || a.Offset != b.Offset || !a.Timestamp.Equal(b.Timestamp) ||
		!sameBytes(a.Key, b.Key) || !sameBytes(a.Value, b.Value) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !sameBytes(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// sameBytes is bytes.Equal that also tells null from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
