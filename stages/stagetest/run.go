package stagetest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// NamedStage is a stage with the name its dead letters and errors carry
// (the name a configuration file gives it).
type NamedStage struct {
	Name  string
	Stage stages.Stage
}

// Step is the former name of NamedStage.
//
// Deprecated: use NamedStage ("step" names the engine's own pieces).
type Step = NamedStage

// Policy says what happens to a record a stage keeps rejecting, as the
// pipeline's dead_letter section does.
type Policy struct {
	// Retries is how many times a failing record is retried alone before
	// it is dead-lettered (or stops its partition).
	Retries int
	// Backoff is the wait before the first retry; it doubles at each
	// retry. Zero means 1ms (the pipeline's default is 100ms).
	Backoff time.Duration
	// Stop stops the record's partition instead of dead-lettering it.
	Stop bool
	// DeadLetters, if set, is written to before a dead letter is
	// recorded in Result.DeadLetters; while it fails, the partition waits
	// and the write is retried (a stages.Permanent error makes the
	// pipeline send a truncated dead letter instead, and stop if that
	// is refused too).
	DeadLetters stages.Producer
}

// Partition names a topic partition.
type Partition struct {
	Topic     string
	Partition int32
}

func (p Partition) String() string { return fmt.Sprintf("%s/%d", p.Topic, p.Partition) }

// Result is what a Run did. Records are listed by partition (sorted by
// topic, then partition number), in the order the chain produced them.
type Result struct {
	// Outputs are the records the last stage returned (and the pipeline
	// passed on: under the stop policy, only those of records before
	// the stop).
	Outputs []stages.Record
	// DeadLetters are the dead letters written, with the
	// stages.Header* error and source headers.
	DeadLetters []stages.Record
	// Marks holds, per partition, the offset that would be committed:
	// one past the last input offset if every record finished, the
	// offset the stop policy stopped at otherwise. A partition whose run
	// ended with its context has no mark.
	Marks map[Partition]int64
	// Stopped holds the error of each partition that did not finish: a
	// *stages.StoppedError under the stop policy, or an error wrapping
	// the context's error if it ended.
	Stopped map[Partition]error
	// Mutated lists input records (as given to Run) whose content a stage
	// changed in place, breaking the stages.Record contract. It is
	// empty for correct stages.
	Mutated []stages.Record
	// Violations lists broken promises of the record path that the
	// harness saw while it ran: a mark that passes a record some stage
	// never finished (nor dead-lettered), two stage calls holding
	// records with the same key of one partition at once, an input
	// record changed in place. Run fails the test for each.
	Violations []string
}

// Check returns an error listing the Violations, or nil if there are
// none.
func (r Result) Check() error {
	if len(r.Violations) == 0 {
		return nil
	}
	return fmt.Errorf("stagetest: %d violation(s) of the record path's contract:\n  %s", len(r.Violations),
		joinLines(r.Violations))
}

// Runner runs records through stages as the pipeline's process step
// does: the records are grouped by topic and partition, sorted by offset,
// cut into batches, and scheduled by the pipeline's own scheduler (with
// its ordering and concurrency) through the pipeline's own chain (failure
// isolation, retries with backoff, dead-lettering or stop). The zero value
// runs each partition as one batch, with partition ordering, partitions
// concurrently.
type Runner struct {
	Policy Policy
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
	// State holds the stores of stateful stages (stages.Stateful) across
	// Runs; nil gives each Run an empty State of its own.
	State *State
}

// T is what Run needs of a test: *testing.T, *testing.B, *testing.F and
// *rapid.T all are one. Run fails it with Errorf, and its Context is the
// stages' context.
type T interface {
	Errorf(format string, args ...any)
	Context() context.Context
}

// Run runs records through the stages with the zero Runner: see Runner
// and Runner.Run.
func Run(t T, records []stages.Record, named ...NamedStage) Result {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	return Runner{}.RunContext(t.Context(), t, records, named...)
}

// Run runs records through the stages and returns what happened. It
// fails t (Errorf) for every violation of the record path's promises it
// saw (Result.Violations): a correct stage never causes one. It neither
// modifies records nor closes the stages.
func (rn Runner) Run(t T, records []stages.Record, named ...NamedStage) Result {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	return rn.RunContext(t.Context(), t, records, named...)
}

// RunContext is Run with a context of the caller's: when it ends, the
// stages' contexts end, and the records not finished get no mark. t may
// be nil (in an Example): then check Result.Check yourself.
func (rn Runner) RunContext(ctx context.Context, t T, records []stages.Record, named ...NamedStage) Result {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	res := rn.run(ctx, records, named)
	if err := res.Check(); err != nil && t != nil {
		t.Errorf("%v", err)
	}
	return res
}

func (rn Runner) run(ctx context.Context, records []stages.Record, named []NamedStage) Result {
	parts := map[Partition][]stages.Record{}
	for _, r := range records {
		tp := Partition{Topic: r.Topic, Partition: r.Partition}
		parts[tp] = append(parts[tp], r)
	}
	tps := make([]Partition, 0, len(parts))
	for tp := range parts {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b Partition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})

	chk := newChecker(named)
	var units process.UnitState
	if stores, err := declaredStores(named); err != nil {
		chk.violate("%v", err)
	} else if len(stores) > 0 {
		if rn.KeyOrdering {
			chk.violate("stages with state (stores %v) need partition ordering: a pipeline refuses ordering: key with them", stores)
		}
		st := rn.State
		if st == nil {
			st = NewState()
		}
		units = st.unitState(stores)
	}
	sink := &memorySink{next: rn.Policy.DeadLetters, got: map[Partition][]stages.Record{}, chk: chk}
	backoff := rn.Policy.Backoff
	if backoff <= 0 {
		backoff = time.Millisecond
	}
	collect := &collector{got: map[Partition][]stages.Record{}}
	chain := process.Chain{Stages: append(chk.wrap(named), process.NamedStage{Name: "stagetest.outputs", Stage: collect}),
		Policy:  process.FailurePolicy{Retries: rn.Policy.Retries, Backoff: backoff, Stop: rn.Policy.Stop, Sink: sink},
		Timeout: rn.Timeout, Log: stages.NopLogger}

	var msg process.Message
	batches := map[Partition]int{}
	befores := map[Partition][]stages.Record{}
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
			span := offsets.Span{Start: batch[0].Offset, End: batch[n-1].Offset + 1}
			otp := offsetstore.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
			msg.Batches = append(msg.Batches, fetch.NewBatch(otp, 1, 1, span, batch[:n:n], 0))
			batches[tp]++
			batch = batch[n:]
		}
	}
	completions := runProcessStep(ctx, rn, chain, msg, units)

	res := Result{Marks: map[Partition]int64{}, Stopped: map[Partition]error{}}
	for _, tp := range tps {
		in := parts[tp]
		wm := offsets.NewWatermark(1, 1, in[0].Offset)
		var stopErr error
		unfinished := len(completions[tp]) < batches[tp] // ctx ended first
		for _, c := range completions[tp] {
			sp := c.Batch.Span()
			if c.FinishedBelow > sp.Start {
				_ = wm.Mark(1, 1, offsets.Span{Start: sp.Start, End: c.FinishedBelow})
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

// runProcessStep runs the batches through the engine's process step and
// returns the completions by partition.
func runProcessStep(ctx context.Context, rn Runner, chain process.Chain, msg process.Message, units process.UnitState) map[Partition][]process.Completion {
	conc := rn.Concurrency
	if conc <= 0 {
		conc = 4
	}
	p := process.NewStep(process.Config{Chain: chain, Concurrency: conc, KeyOrdering: rn.KeyOrdering, State: units})
	in := make(chan process.Message, 1)
	out := make(chan *process.Report)
	in <- msg
	close(in)
	done := make(chan struct{})
	got := map[Partition][]process.Completion{}
	want := len(msg.Batches)
	go func() {
		defer close(done)
		p.Run(ctx, in, out)
	}()
	for n := 0; n < want; {
		select {
		case ev := <-out:
			for _, c := range ev.Completions {
				tp := Partition{Topic: c.Batch.Partition().Topic, Partition: c.Batch.Partition().Partition}
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
	got map[Partition][]stages.Record
}

func (c *collector) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range in {
		tp := Partition{Topic: r.Topic, Partition: r.Partition}
		c.got[tp] = append(c.got[tp], r)
	}
	return nil, nil
}

// memorySink records the dead letters, after next (the caller's
// producer, if any) acknowledged them.
type memorySink struct {
	next stages.Producer
	chk  *checker
	mu   sync.Mutex
	got  map[Partition][]stages.Record
}

func (s *memorySink) Produce(ctx context.Context, records []stages.Record) error {
	if s.next != nil {
		if err := s.next.Produce(ctx, records); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range records {
		tp := Partition{Topic: r.Topic, Partition: r.Partition}
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
