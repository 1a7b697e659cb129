package process

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/fencepost-dev/fencepost/internal/memo"
	"github.com/fencepost-dev/fencepost/internal/stateref"
	"github.com/fencepost-dev/fencepost/internal/wait"
	"github.com/fencepost-dev/fencepost/stages"
)

// NamedStage is a stage with the name its errors and dead letters carry.
type NamedStage struct {
	Name  string
	Stage stages.Stage
}

// Chain runs records through stages in order, isolating failures.
type Chain struct {
	Stages []NamedStage
	Policy FailurePolicy
	// Timeout bounds one stage call (Process on a batch, or on one record
	// while failures are isolated). A call still running at Timeout has
	// its context cancelled and fails like any error: its records are run
	// one by one, the one that keeps failing is retried and then
	// dead-lettered or stops its partition. Zero means no limit.
	Timeout time.Duration
	Log     stages.Logger // required
	// OnDeadLetter, if set, is called for every dead letter written, or
	// dropped with no sink (after the sink acknowledged it), with the
	// source record it carries (see Run).
	OnDeadLetter func(r stages.Record, stage string, err error)
	// OnStuck, if set, is called with +1 when a stage call has not
	// returned StuckAfter past its Timeout (the stage ignores its
	// context and its partition waits for it), and with -1 when such a
	// call returns at last.
	OnStuck func(stage string, delta int)
	// OnUnavailable, if set, is told when a partition waits for a
	// destination: a stage call failed as unavailable
	// (stages.IsUnavailable: its destination takes no record now), or a
	// dead-letter write failed with an error that is not permanent (the
	// stage is then DeadLetterStage). Delta +1 with the error when the wait starts, 0 with the new error
	// on every further failed attempt, -1 with a nil error when it ends
	// (written at last, or ctx ended).
	OnUnavailable func(stage string, delta int, err error)
	// StuckAfter is how long past its Timeout a stage call may run
	// before it is reported as stuck; default DefaultStuckAfter.
	StuckAfter time.Duration
	// OnStage, if set, is called once for every stage a Run reached,
	// when the stage is done with the run's records (isolation, retries
	// and dead letters included), from the goroutine that called Run.
	// It is not called for a stage whose run ctx ended.
	OnStage func(StageRun)

	calls *callCounter // if set (a Step's chain), counts the stage calls running
}

// StageRun is what one stage did with the records of one Chain.Run.
type StageRun struct {
	Stage string
	// In is how many records the stage was given; Out how many it
	// returned (for the next stage).
	In, Out int
	// Dropped counts the records given that no returned record derives
	// from (their source offset is on none of Out; see
	// stages.Record.Offset) and that did not fail: what a filter drops.
	Dropped int
	// Failed counts the records that failed for good (every retry):
	// dead-lettered, or stopping their partition. DeadLettered counts
	// those the dead-letter sink acknowledged (or dropped with no sink).
	Failed, DeadLettered int
	// Duration is the time the stage took on the run, retries and dead
	// letters included.
	Duration time.Duration
}

// DefaultStuckAfter is the default Chain.StuckAfter.
const DefaultStuckAfter = 5 * time.Second

// errAborted: ctx ended during processing; nothing is marked, the records
// are redelivered after restart.
var errAborted = errors.New("processing aborted")

func aborted(ctx context.Context) error { return fmt.Errorf("%w: %w", errAborted, context.Cause(ctx)) }

// Run passes records (one partition's, in offset order) through every
// stage and returns the output of the last stage.
//
// A record that fails a stage is isolated, retried and dead-lettered, and
// the others go on. What is dead-lettered is the source record the
// failing record derives from, as it was consumed (records is
// referenced, not copied), once per source record and Run. Under the
// stop policy (or when a record cannot be dead-lettered) Run fails with a *StoppedError: the records before the
// failing one still run through the remaining stages, so that every
// source record below StoppedError.Offset has finished every stage, and
// nothing from the failing record on goes further. Run fails with an
// error wrapping ctx's error if ctx ended: then nothing may be marked.
//
// Source offsets are what derived records carry in stages.Record.Offset;
// a record whose Offset is not one of the input's counts as derived from
// the first input record.
func (c *Chain) Run(ctx context.Context, records []stages.Record) ([]stages.Record, error) {
	// The built-in stages share what they parse of a record's bytes
	// within this call (internal/memo).
	ctx = memo.With(ctx)
	var stop *stages.StoppedError
	run := &runState{sources: records}
	in := records
	for _, st := range c.Stages {
		if len(in) == 0 {
			break
		}
		var began time.Time
		if c.OnStage != nil {
			began = time.Now()
		}
		failedAt, deadLettered := -1, 0
		out, err := c.call(ctx, st, in)
		if err != nil {
			if ctx.Err() != nil {
				return nil, aborted(ctx)
			}
			known := knownFailures(err, len(in))
			var cause error
			out, failedAt, cause, err = c.isolate(ctx, run, st, in, known, err, &deadLettered)
			if err != nil {
				return nil, err
			}
			if failedAt >= 0 {
				src := sources(records)
				if off := src.firstOf(in[failedAt:]); stop == nil || off < stop.Offset {
					stop = &stages.StoppedError{Stage: st.Name, Offset: off, Failed: src.failed(in[failedAt]), Err: cause}
				}
			}
		}
		if c.OnStage != nil {
			c.OnStage(stageRun(st.Name, in, out, failedAt, deadLettered, time.Since(began)))
		}
		if stop != nil {
			out = sources(records).below(out, stop.Offset)
		}
		in = out
	}
	if stop != nil {
		return in, stop
	}
	return in, nil
}

// isolate handles a failed stage call on in. With known failures (a
// consistent *stages.RecordErrors), the other records' output is taken
// from it; otherwise every record is run alone. Failing records are
// retried, then dead-lettered. It returns the output of the records that
// finished the stage, in input order.
//
// Under the stop policy, or when a record cannot be dead-lettered, it
// stops at the first record that fails for good: failedAt is its index in
// in, cause says why, and out holds the output of the records before it
// only. failedAt is -1 when every record finished or was dead-lettered.
// Each record dead-lettered adds one to *deadLettered. A non-nil err
// means ctx ended.
func (c *Chain) isolate(ctx context.Context, run *runState, st NamedStage, in []stages.Record, known *stages.RecordErrors, batchErr error,
	deadLettered *int) (out []stages.Record, failedAt int, cause, err error) {
	j := 0 // next output of known
	for i := range in {
		var recErr error
		if known != nil {
			var failed bool
			if recErr, failed = known.Errs[i]; !failed {
				for ; j < len(known.Out) && known.From[j] == i; j++ {
					out = append(out, known.Out[j])
				}
				continue
			}
		} else {
			var o []stages.Record
			if o, recErr = c.call(ctx, st, in[i:i+1]); recErr == nil {
				out = append(out, o...)
				continue
			}
		}
		o, recErr := c.retry(ctx, st, in[i], recErr)
		if recErr == nil {
			out = append(out, o...)
			continue
		}
		if ctx.Err() != nil {
			return nil, -1, nil, aborted(ctx)
		}
		if c.Policy.Stop {
			return out, i, recErr, nil
		}
		switch dlErr := c.deadLetter(ctx, run, st.Name, in[i], recErr); {
		case dlErr == nil:
			*deadLettered++
		case ctx.Err() != nil:
			return nil, -1, nil, aborted(ctx)
		default: // undeliverable: the partition stops here
			return out, i, dlErr, nil
		}
	}
	if known == nil {
		c.Log.Debug("stage failed a batch; its records were run one by one", "stage", st.Name, "error", batchErr)
	}
	return out, -1, nil, nil
}

// retry runs one record alone up to Policy.Retries more times.
func (c *Chain) retry(ctx context.Context, st NamedStage, r stages.Record, err error) ([]stages.Record, error) {
	delay := c.Policy.Backoff
	if delay <= 0 {
		delay = 100 * time.Millisecond
	}
	maxWait := c.Policy.MaxBackoff
	if maxWait <= 0 {
		maxWait = 10 * time.Second
	}
	for attempt := 0; attempt < c.Policy.Retries && !stages.IsPermanent(err); attempt++ {
		if !wait.For(ctx, delay) {
			return nil, ctx.Err()
		}
		delay = min(2*delay, maxWait)
		var out []stages.Record
		if out, err = c.call(ctx, st, []stages.Record{r}); err == nil {
			return out, nil
		}
	}
	return nil, err
}

// MaxUnavailableBackoff caps the wait between two attempts of a call
// whose destination is unavailable (see stages.Unavailable).
const MaxUnavailableBackoff = 5 * time.Second

// call runs one stage call (see attempt). A call that fails because its
// destination is unavailable for every record (stages.IsUnavailable) is
// not the records' failure: the partition waits, and the same call is
// made again with backoff (Policy.Backoff doubling up to
// MaxUnavailableBackoff, or Policy.MaxBackoff if lower) until it
// succeeds, fails otherwise, or ctx ends. The wait is reported to
// OnUnavailable.
func (c *Chain) call(ctx context.Context, st NamedStage, in []stages.Record) ([]stages.Record, error) {
	out, err := c.attempt(ctx, st, in)
	if err == nil || !stages.IsUnavailable(err) || ctx.Err() != nil {
		return out, err
	}
	w := c.startWait(st.Name, err)
	defer w.end()
	for {
		if !w.sleep(ctx) {
			return nil, err
		}
		if out, err = c.attempt(ctx, st, in); err == nil || !stages.IsUnavailable(err) || ctx.Err() != nil {
			return out, err
		}
		w.failed(err)
	}
}

// unavailableWait is one partition waiting for an unavailable
// destination.
type unavailableWait struct {
	c       *Chain
	stage   string
	delay   time.Duration
	max     time.Duration
	started time.Time
}

func (c *Chain) startWait(stage string, err error) *unavailableWait {
	w := &unavailableWait{c: c, stage: stage, delay: c.Policy.Backoff, max: MaxUnavailableBackoff, started: time.Now()}
	if w.delay <= 0 {
		w.delay = 100 * time.Millisecond
	}
	if m := c.Policy.MaxBackoff; m > 0 && m < w.max {
		w.max = m
	}
	c.Log.Error("cannot write to the destination now: the partition waits and retries the same records "+
		"(nothing is dead-lettered for this; /readyz reports it)", "stage", stage, "error", err)
	if c.OnUnavailable != nil {
		c.OnUnavailable(stage, +1, err)
	}
	return w
}

// sleep waits the backoff; false if ctx ended.
func (w *unavailableWait) sleep(ctx context.Context) bool {
	if !wait.For(ctx, w.delay) {
		return false
	}
	w.delay = min(2*w.delay, w.max)
	return true
}

func (w *unavailableWait) failed(err error) {
	w.c.Log.Debug("destination still unavailable; retrying", "stage", w.stage, "error", err, "waiting", time.Since(w.started))
	if w.c.OnUnavailable != nil {
		w.c.OnUnavailable(w.stage, 0, err)
	}
}

func (w *unavailableWait) end() {
	w.c.Log.Info("destination wait over", "stage", w.stage, "waited", time.Since(w.started))
	if w.c.OnUnavailable != nil {
		w.c.OnUnavailable(w.stage, -1, nil)
	}
}

// attempt runs one stage call within the chain's Timeout, turning a panic
// into an error and reporting a call that ignores its cancellation.
func (c *Chain) attempt(ctx context.Context, st NamedStage, in []stages.Record) ([]stages.Record, error) {
	if c.calls != nil {
		c.calls.enter(st.Name)
		defer c.calls.leave(st.Name)
	}
	if c.Timeout <= 0 {
		return callStage(ctx, st.Stage, in)
	}
	cctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	var (
		mu                 sync.Mutex
		returned, reported bool
	)
	started := time.Now()
	grace := c.StuckAfter
	if grace <= 0 {
		grace = DefaultStuckAfter
	}
	watchdog := time.AfterFunc(c.Timeout+grace, func() {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			return
		}
		reported = true
		c.Log.Error("stage ignores cancellation: still running after its processing_timeout; its partition waits for it "+
			"(make the stage return when its context is done)", "stage", st.Name,
			"processing_timeout", c.Timeout, "running", time.Since(started))
		if c.OnStuck != nil {
			c.OnStuck(st.Name, +1)
		}
	})
	out, err := callStage(cctx, st.Stage, in)
	watchdog.Stop()
	mu.Lock()
	returned = true
	if reported {
		c.Log.Warn("stuck stage call returned", "stage", st.Name, "after", time.Since(started))
		if c.OnStuck != nil {
			c.OnStuck(st.Name, -1)
		}
	}
	mu.Unlock()
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		err = &stages.TimeoutError{Stage: st.Name, Timeout: c.Timeout, Records: len(in), Err: err}
	}
	return out, err
}

// callStage runs one stage, turning a panic into an error. The state
// changes of a call that fails are taken back (stateref.Journal): its
// records run again, alone, or go to the dead-letter topic. A call that
// names its failed records (knownFailures) keeps its changes: the records
// that did not fail count as finished, and run no more (their output is
// taken from the error); the failed ones changed nothing (see
// stages.Store).
func callStage(ctx context.Context, s stages.Stage, in []stages.Record) (out []stages.Record, err error) {
	j := stateref.JournalOf(ctx)
	if j != nil {
		j.Begin()
	}
	defer func() {
		if p := recover(); p != nil {
			err = &stages.PanicError{Value: p, Stack: debug.Stack()}
		}
		if j != nil {
			if err != nil && knownFailures(err, len(in)) == nil {
				j.Rollback()
			} else {
				j.Keep()
			}
		}
	}()
	return s.Process(ctx, in)
}

// knownFailures returns the *stages.RecordErrors of a failed call on n
// records whose other records count as finished: a consistent one, not
// marked unavailable (such a call is made again whole). nil otherwise:
// every record of the call runs again.
func knownFailures(err error, n int) *stages.RecordErrors {
	var re *stages.RecordErrors
	if errors.As(err, &re) && re.Consistent(n) && !stages.IsUnavailable(err) {
		return re
	}
	return nil
}

// runState is what one Run knows of its source records: the records as
// consumed (the Run's input, referenced, not copied), and which of them
// were dead-lettered already.
type runState struct {
	sources []stages.Record
	dead    map[int64]struct{} // source offsets dead-lettered in this run
}

// source returns the source record r derives from (the input record
// whose Offset r carries), or false if r's Offset is none of the input's.
func (s *runState) source(r stages.Record) (stages.Record, bool) {
	byOffset := func(x stages.Record, off int64) int { return cmp.Compare(x.Offset, off) }
	if i, ok := slices.BinarySearchFunc(s.sources, r.Offset, byOffset); ok {
		return s.sources[i], true
	}
	// A unit's records are in offset order; in any other order, look
	// through them all.
	for _, x := range s.sources {
		if x.Offset == r.Offset {
			return x, true
		}
	}
	return stages.Record{}, false
}

// sourceSet is the source offsets of one run, to attribute a record a
// stage emitted to the source record it derives from.
type sourceSet struct {
	offsets []int64 // sorted
}

func sources(records []stages.Record) sourceSet {
	offs := make([]int64, len(records))
	for i, r := range records {
		offs[i] = r.Offset
	}
	if !slices.IsSorted(offs) {
		slices.Sort(offs)
	}
	return sourceSet{offsets: offs}
}

// of returns the source offset r is attributed to: its own Offset if that
// is one of the run's, else the run's first (a record of unknown source
// holds back the whole run).
func (s sourceSet) of(r stages.Record) int64 {
	if _, ok := slices.BinarySearch(s.offsets, r.Offset); ok {
		return r.Offset
	}
	if len(s.offsets) == 0 {
		return -1
	}
	return s.offsets[0]
}

// failed returns r's Offset if it is one of the run's, else -1.
func (s sourceSet) failed(r stages.Record) int64 {
	if _, ok := slices.BinarySearch(s.offsets, r.Offset); ok {
		return r.Offset
	}
	return -1
}

// firstOf returns the lowest source offset the records are attributed to.
func (s sourceSet) firstOf(rs []stages.Record) int64 {
	first := int64(-1)
	for i, r := range rs {
		if o := s.of(r); i == 0 || o < first {
			first = o
		}
	}
	return first
}

// below keeps the records attributed to a source offset below limit.
func (s sourceSet) below(rs []stages.Record, limit int64) []stages.Record {
	keep := rs[:0:0]
	for _, r := range rs {
		if s.of(r) < limit {
			keep = append(keep, r)
		}
	}
	return keep
}
