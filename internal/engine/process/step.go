package process

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// Config configures a Step.
type Config struct {
	Chain Chain
	// Routes, if set, are the chains of the records of particular
	// topics (a pipeline's segments after a repartition); the records of
	// any other topic run through Chain.
	Routes map[string]*Chain
	// Concurrency is the most units (batches, or key groups of batches)
	// processed at once. Default GOMAXPROCS.
	Concurrency int
	// KeyOrdering keeps order per key instead of per partition: records
	// of a partition with different keys are processed concurrently,
	// records with the same key never are.
	KeyOrdering bool
	// OnDone, if set, is called with the number of source records of
	// every batch that finished them.
	OnDone func(records int)
	// AbandonAfter is how long Run waits, once its context ended, for
	// the units still running before it abandons them (see
	// AbandonedError). Default DefaultAbandonAfter.
	AbandonAfter time.Duration
	// State, if set, readies the state of each unit's partition before
	// its chain runs and writes the unit's state changes after. A
	// pipeline with state orders by partition: a unit holds one
	// partition's batches.
	State UnitState
}

// UnitState is the state of the partitions units run on (the stores of
// stateful stages).
type UnitState interface {
	// Begin readies tp's state for a unit of the given generation and
	// epoch and returns the context its chain runs in. An error means
	// the unit cannot run: ctx ended, or the state failed for good.
	Begin(ctx context.Context, tp offsetstore.TopicPartition, gen offsets.Generation, epoch offsetstore.Epoch) (context.Context, error)
	// End writes the unit's state changes once its chain returned;
	// finished says whether any record of the unit finished. An error
	// means the unit must not count as finished.
	End(ctx context.Context, tp offsetstore.TopicPartition, finished bool) error
}

// DefaultAbandonAfter is the default Config.AbandonAfter.
const DefaultAbandonAfter = time.Second

// Step is the process step: a Scheduler owned by Run's goroutine,
// and workers that run its units through the chain.
type Step struct {
	cfg   Config
	sched *Scheduler
	calls *callCounter
}

// NewStep returns a Step.
func NewStep(cfg Config) *Step {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = runtime.GOMAXPROCS(0)
	}
	if cfg.Chain.Log == nil {
		cfg.Chain.Log = stages.NopLogger
	}
	for _, c := range cfg.Routes {
		if c.Log == nil {
			c.Log = stages.NopLogger
		}
	}
	if cfg.AbandonAfter <= 0 {
		cfg.AbandonAfter = DefaultAbandonAfter
	}
	calls := &callCounter{n: map[string]int{}}
	cfg.Chain.calls = calls
	for _, c := range cfg.Routes {
		c.calls = calls
	}
	s := NewScheduler(cfg.Concurrency, cfg.KeyOrdering)
	s.onDone = cfg.OnDone
	return &Step{cfg: cfg, sched: s, calls: calls}
}

type unitDone struct {
	u   *Unit
	err error
}

// AbandonedError is what Step.Run returns when units were still running
// AbandonAfter past the end of its context: a stage call ignores its
// cancellation. Their records are reported as finished by no one, so
// they are never committed (they are redelivered after a restart); the
// goroutines running them are left behind, blocked in the stage's code,
// and end when the stage returns (their result is then discarded).
type AbandonedError struct {
	// Stages are the stages with a call still running, and how many.
	Stages map[string]int
	// Units and Records are what the abandoned units held.
	Units, Records int
	// From is, per partition, the lowest source offset abandoned: the
	// commit stays below it.
	From map[offsetstore.TopicPartition]int64
}

func (e *AbandonedError) Error() string {
	names := slices.Sorted(maps.Keys(e.Stages))
	var b strings.Builder
	fmt.Fprintf(&b, "abandoned %d stage call(s) still running after their context ended (stage", e.Units)
	if len(names) != 1 {
		b.WriteString("s")
	}
	for i, n := range names {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %q", n)
	}
	fmt.Fprintf(&b, "; %d record(s)", e.Records)
	tps := slices.SortedFunc(maps.Keys(e.From), func(a, b offsetstore.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for _, tp := range tps {
		fmt.Fprintf(&b, ", %s from offset %d", tp, e.From[tp])
	}
	b.WriteString("): their records are not committed and are redelivered after restart; make the stage return when its context is done")
	return b.String()
}

// Run processes messages from in until ctx ends or in is closed, and
// sends every report of completions to out (the coordinator's).
//
// Each unit runs with a context of its own, derived from ctx: a Fence
// with Cancel cancels those it calls off (see Fence), and their batches
// are reported unfinished, without an error, once their stage calls
// return.
//
// When ctx ends it waits up to AbandonAfter for the units running (stage
// calls see ctx, so they should return at once), then returns an
// *AbandonedError for those still running instead of waiting for them:
// a stage that ignores cancellation cannot hold a shutdown. It returns
// nil when nothing was abandoned.
func (p *Step) Run(ctx context.Context, in <-chan Message, out chan<- *Report) error {
	s := p.sched
	// Each unit runs on a goroutine of its own (at most Concurrency run
	// at once: the scheduler says so) and sends its result to done once;
	// done holds them all, so one Run left behind never blocks.
	done := make(chan unitDone, p.cfg.Concurrency)
	// running holds the units running, each with the cancellation of
	// its own context (a fence with Cancel calls it); owned by this
	// goroutine.
	running := map[*Unit]*runningUnit{}
	var report *Report
	for {
		for {
			u, ok := s.Next()
			if !ok {
				break
			}
			uctx, cancel := context.WithCancelCause(ctx)
			running[u] = &runningUnit{cancel: cancel}
			go func() {
				done <- unitDone{u: u, err: p.runUnit(uctx, u)}
			}()
		}
		if r := s.TakeReport(); r != nil {
			if report == nil {
				report = r
			} else {
				report.Completions = append(report.Completions, r.Completions...)
			}
		}
		if in == nil && s.Running() == 0 && report == nil {
			return nil
		}
		var sendCh chan<- *Report
		if report != nil {
			sendCh = out
		}
		select {
		case <-ctx.Done():
			// Report nothing more (the coordinator is stopping too).
			return p.wait(running, done)
		case m, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			cancelUnits(running, m.Fences)
			s.Accept(m)
		case d := <-done:
			r := running[d.u]
			r.cancel(nil)
			delete(running, d.u)
			if r.canceled {
				// Whatever the chain made of it (a stage may ignore
				// its context, or have failed just before), nothing of
				// a canceled unit counts, and it is no stop.
				d.err = fmt.Errorf("%w: %w", errAborted, errFenceCancel)
			}
			s.Finish(d.u, d.err)
		case sendCh <- report:
			report = nil
		}
	}
}

// chainOf returns the chain u's records run through: their topic's route,
// or Chain.
func (p *Step) chainOf(u *Unit) *Chain {
	if len(p.cfg.Routes) > 0 {
		if c := p.cfg.Routes[u.pieces[0].job.batch.Partition().Topic]; c != nil {
			return c
		}
	}
	return &p.cfg.Chain
}

// runUnit runs u through the chain, within its partition's state when
// the pipeline has state.
func (p *Step) runUnit(ctx context.Context, u *Unit) error {
	return RunUnit(ctx, p.chainOf(u), p.cfg.State, u)
}

// RunUnit runs u through chain within its partition's state (st; nil
// without state): st.Begin before the chain, st.End after. It is what a
// Step's worker does with a unit the Scheduler handed out, for those who
// drive a Scheduler themselves (the record-path models); its error is the
// unit's result for Scheduler.Finish.
func RunUnit(ctx context.Context, chain *Chain, st UnitState, u *Unit) error {
	if st == nil {
		_, err := chain.Run(ctx, u.Records())
		return err
	}
	b := u.pieces[0].job.batch
	tp := b.Partition()
	var first int64
	if recs := u.Records(); len(recs) > 0 {
		first = recs[0].Offset
	}
	cctx, err := st.Begin(ctx, tp, b.Generation(), b.Epoch())
	if err != nil {
		return stateFailed(ctx, first, err)
	}
	_, err = chain.Run(cctx, u.Records())
	var stop *stages.StoppedError
	finished := err == nil || (errors.As(err, &stop) && stop.Offset > first)
	if eerr := st.End(ctx, tp, finished); eerr != nil && finished {
		return stateFailed(ctx, first, eerr)
	}
	return err
}

// stateFailed is a unit's error when its state could not be readied or
// written: unfinished without a stop when ctx ended (the records run
// again), else a stop of the partition at the unit's first record, with
// the reason.
func stateFailed(ctx context.Context, first int64, err error) error {
	if ctx.Err() != nil || stages.IsUnavailable(err) {
		return fmt.Errorf("%w: %w", errAborted, err)
	}
	return &stages.StoppedError{Stage: "state", Offset: first, Err: err}
}

// errFenceCancel is the cause of the context of a unit canceled by a
// Fence with Cancel (context.Cause): what its stage calls see.
var errFenceCancel = errors.New("processing canceled: the partition was fenced (its transaction is aborted or its epoch is over)")

// runningUnit is a unit Run has running.
type runningUnit struct {
	cancel   context.CancelCauseFunc
	canceled bool // by a fence: its result is discarded
}

// cancelUnits cancels the running units the fences with Cancel call
// off: those of the fence's partition whose epoch is at most the
// fence's.
func cancelUnits(running map[*Unit]*runningUnit, fences []Fence) {
	for _, f := range fences {
		if !f.Cancel {
			continue
		}
		for u, r := range running {
			if u.partition() == f.Partition && u.epoch() <= f.Epoch {
				r.cancel(errFenceCancel)
				r.canceled = true
			}
		}
	}
}

// wait waits up to AbandonAfter for the running units, and describes
// those still running then.
func (p *Step) wait(running map[*Unit]*runningUnit, done <-chan unitDone) error {
	if len(running) == 0 {
		return nil
	}
	t := time.NewTimer(p.cfg.AbandonAfter)
	defer t.Stop()
	for len(running) > 0 {
		select {
		case d := <-done:
			running[d.u].cancel(nil)
			delete(running, d.u)
		case <-t.C:
			e := &AbandonedError{Stages: p.calls.running(), Units: len(running), From: map[offsetstore.TopicPartition]int64{}}
			for u, r := range running {
				r.cancel(nil)
				recs := u.Records()
				e.Records += len(recs)
				if len(recs) == 0 {
					continue
				}
				tp := offsetstore.TopicPartition{Topic: recs[0].Topic, Partition: recs[0].Partition}
				if o, ok := e.From[tp]; !ok || recs[0].Offset < o {
					e.From[tp] = recs[0].Offset
				}
			}
			return e
		}
	}
	return nil
}

// callCounter counts the stage calls running, by stage name.
type callCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *callCounter) enter(stage string) {
	c.mu.Lock()
	c.n[stage]++
	c.mu.Unlock()
}

func (c *callCounter) leave(stage string) {
	c.mu.Lock()
	if c.n[stage]--; c.n[stage] <= 0 {
		delete(c.n, stage)
	}
	c.mu.Unlock()
}

// running returns a copy of the counts.
func (c *callCounter) running() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}
