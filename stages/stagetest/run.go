package stagetest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/fetch"
	"github.com/fencepost-dev/fencepost/stages/process"
)

// Result is what a Run did. Records are listed by partition (sorted by
// topic, then partition number), in the order the chain produced them.
type Result struct {
	// Outputs are the records the last stage returned (and the chain
	// passed on: under the stop policy, only those of records before
	// the stop).
	Outputs []stages.Record
	// DeadLetters are the records the dead-letter sink acknowledged,
	// with the process.Header* error headers.
	DeadLetters []stages.Record
	// Marks holds, per partition, the offset that would be committed:
	// one past the last input offset if every record finished, the
	// offset the stop policy stopped at otherwise. A partition whose run
	// ended with ctx has no mark.
	Marks map[offsetstore.TopicPartition]int64
	// Stopped holds the error of each partition that did not finish: a
	// *process.StoppedError under the stop policy, or an error wrapping
	// ctx.Err() if ctx ended.
	Stopped map[offsetstore.TopicPartition]error
	// Mutated lists input records (as given to Run) whose content a stage
	// changed in place, breaking the stages.Record contract. It is
	// empty for correct stages.
	Mutated []stages.Record
	// Violations lists broken promises of the record path that the
	// harness saw while it ran: a mark that passes a record some stage
	// never finished (nor dead-lettered), two stage calls holding
	// records with the same key of one partition at once, an input
	// record changed in place. It is empty for a correct stage run
	// through a correct pipeline; Check turns it into an error.
	Violations []string
}

// Check returns an error listing the Violations, or nil if there are
// none. A stage test should fail on it.
func (r Result) Check() error {
	if len(r.Violations) == 0 {
		return nil
	}
	return fmt.Errorf("stagetest: %d violation(s) of the record path's contract:\n  %s", len(r.Violations),
		joinLines(r.Violations))
}

// Runner runs records through stages as the pipeline's process stage
// does: the records are grouped by topic and partition, sorted by offset,
// cut into batches, and scheduled by the pipeline's own scheduler (with
// its ordering and concurrency) through a process.Chain with Policy (its
// isolation of failing records, retries with backoff, dead-lettering or
// stop). The zero value runs each partition as one batch, with partition
// ordering, partitions concurrently.
type Runner struct {
	// Policy is the failure policy. Dead letters always reach an
	// in-memory sink, recorded in Result.DeadLetters; if Policy.Sink is
	// set, they go to it first and are recorded once it acknowledged
	// them (a Sink that keeps failing blocks until ctx ends, as in the
	// pipeline). Policy.Backoff 0 means the chain's default of 100ms:
	// set a small one when testing retries.
	Policy process.FailurePolicy
	// KeyOrdering runs records of one partition with different keys
	// concurrently, as consumer.ordering: key does.
	KeyOrdering bool
	// Concurrency is the most units run at once; default 4.
	Concurrency int
	// BatchSize cuts each partition's records into batches of at most
	// this many records; 0 means one batch per partition.
	BatchSize int
	// Timeout is the processing timeout of one stage call; 0: none.
	Timeout time.Duration
}

// Run runs records through the named stages with the failure policy: see
// Runner. Run neither modifies records nor closes the stages.
func Run(ctx context.Context, records []stages.Record, policy process.FailurePolicy, named ...process.NamedStage) Result {
	return Runner{Policy: policy}.Run(ctx, records, named...)
}

// Run runs records through the named stages; see Runner. It neither
// modifies records nor closes the stages.
func (rn Runner) Run(ctx context.Context, records []stages.Record, named ...process.NamedStage) Result {
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

	chk := newChecker(named)
	sink := &memorySink{next: rn.Policy.Sink, got: map[offsetstore.TopicPartition][]stages.Record{}, chk: chk}
	policy := rn.Policy
	policy.Sink = sink
	collect := &collector{got: map[offsetstore.TopicPartition][]stages.Record{}}
	chain := process.Chain{Stages: append(chk.wrap(named), process.NamedStage{Name: "stagetest.outputs", Stage: collect}),
		Policy: policy, Timeout: rn.Timeout, Log: zap.NewNop()}

	var msg process.Message
	batches := map[offsetstore.TopicPartition]int{}
	befores := map[offsetstore.TopicPartition][]stages.Record{}
	for _, tp := range tps {
		batch := parts[tp]
		slices.SortStableFunc(batch, func(a, b stages.Record) int { return cmp.Compare(a.Offset, b.Offset) })
		befores[tp] = deepCopy(batch)
		chk.inputs(tp, batch)
		for len(batch) > 0 {
			n := len(batch)
			if rn.BatchSize > 0 {
				n = min(n, rn.BatchSize)
			}
			span := offsetstore.Span{Start: batch[0].Offset, End: batch[n-1].Offset + 1}
			msg.Batches = append(msg.Batches, fetch.NewBatch(tp, 1, 1, span, batch[:n:n], 0))
			batches[tp]++
			batch = batch[n:]
		}
	}
	completions := runProcessor(ctx, rn, chain, msg)

	res := Result{Marks: map[offsetstore.TopicPartition]int64{}, Stopped: map[offsetstore.TopicPartition]error{}}
	for _, tp := range tps {
		in := parts[tp]
		wm := offsetstore.NewWatermark(1, 1, in[0].Offset)
		var stopErr error
		unfinished := len(completions[tp]) < batches[tp] // ctx ended first
		for _, c := range completions[tp] {
			sp := c.Batch.Span()
			if c.FinishedBelow > sp.Start {
				_ = wm.Mark(1, 1, offsetstore.Span{Start: sp.Start, End: c.FinishedBelow})
			}
			if c.Err != nil && stopErr == nil {
				stopErr = c.Err
			}
			if c.FinishedBelow < sp.End {
				unfinished = true
			}
		}
		mark, _ := wm.Committable()
		switch {
		case stopErr != nil:
			res.Stopped[tp], res.Marks[tp] = stopErr, mark
		case unfinished && ctx.Err() != nil:
			res.Stopped[tp] = fmt.Errorf("stagetest: run ended before the records finished: %w", ctx.Err())
		default:
			res.Marks[tp] = mark
		}
		res.Outputs = append(res.Outputs, collect.got[tp]...)
		res.DeadLetters = append(res.DeadLetters, sink.got[tp]...)
		for i := range in {
			if !equal(in[i], befores[tp][i]) {
				res.Mutated = append(res.Mutated, befores[tp][i])
			}
		}
		if m, ok := res.Marks[tp]; ok {
			chk.checkMark(tp, m)
		}
	}
	for _, m := range res.Mutated {
		chk.violate("a stage changed the input record at %s/%d offset %d in place (build new records instead)", m.Topic, m.Partition, m.Offset)
	}
	res.Violations = chk.violations
	return res
}

// runProcessor runs the batches through the pipeline's processor and
// returns the completions by partition.
func runProcessor(ctx context.Context, rn Runner, chain process.Chain, msg process.Message) map[offsetstore.TopicPartition][]process.Completion {
	conc := rn.Concurrency
	if conc <= 0 {
		conc = 4
	}
	p := process.NewProcessor(process.Config{Chain: chain, Concurrency: conc, KeyOrdering: rn.KeyOrdering})
	in := make(chan process.Message, 1)
	out := make(chan any)
	in <- msg
	close(in)
	done := make(chan struct{})
	got := map[offsetstore.TopicPartition][]process.Completion{}
	want := len(msg.Batches)
	go func() {
		defer close(done)
		p.Run(ctx, in, out)
	}()
	for n := 0; n < want; {
		select {
		case ev := <-out:
			for _, c := range ev.(*process.Report).Completions {
				tp := c.Batch.Partition()
				got[tp] = append(got[tp], c)
				n++
			}
		case <-done:
			n = want
		}
	}
	<-done
	return got
}

// collector is the stage after the user's: it records what reaches the
// end of the chain.
type collector struct {
	mu  sync.Mutex
	got map[offsetstore.TopicPartition][]stages.Record
}

func (c *collector) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range in {
		tp := offsetstore.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		c.got[tp] = append(c.got[tp], r)
	}
	return nil, nil
}

// memorySink records the dead letters, after next (the caller's sink, if
// any) acknowledged them.
type memorySink struct {
	next process.DeadLetterSink
	chk  *checker
	mu   sync.Mutex
	got  map[offsetstore.TopicPartition][]stages.Record
}

func (s *memorySink) Send(ctx context.Context, records []stages.Record) error {
	if s.next != nil {
		if err := s.next.Send(ctx, records); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range records {
		tp := offsetstore.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		s.got[tp] = append(s.got[tp], r)
		s.chk.deadLettered(tp, r)
	}
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
