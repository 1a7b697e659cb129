package process

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.uber.org/zap"

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
	Log    *zap.Logger
	// OnDeadLetter, if set, is called for every record dead-lettered or
	// dropped by policy (after the sink acknowledged it).
	OnDeadLetter func(r stages.Record, stage string, err error)
}

// StoppedError is the error of a partition stopped by the failure policy.
type StoppedError struct {
	Stage  string
	Offset int64 // source offset of the record that failed
	Err    error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("stage %q rejected the record at offset %d and dead_letter policy is stop: %v "+
		"(fix the stage or the record, then seek past it or restart)", e.Stage, e.Offset, e.Err)
}

func (e *StoppedError) Unwrap() error { return e.Err }

// errAborted: ctx ended during processing; nothing is marked, the records
// are redelivered after restart.
var errAborted = errors.New("processing aborted")

// Run passes records through every stage. It returns the output of the
// last stage. It fails with a *StoppedError if a record failed and the
// policy is Stop (records before it are finished), or with an error
// wrapping ctx's error if ctx ended (nothing may be marked).
func (c *Chain) Run(ctx context.Context, records []stages.Record) ([]stages.Record, error) {
	in := records
	for _, st := range c.Stages {
		if len(in) == 0 {
			return nil, nil
		}
		out, err := call(ctx, st.Stage, in)
		if err == nil {
			in = out
			continue
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", errAborted, ctx.Err())
		}
		var known *stages.RecordErrors
		if re := (*stages.RecordErrors)(nil); errors.As(err, &re) && re.Consistent(len(in)) {
			known = re
		}
		in, err = c.isolate(ctx, st, in, known, err)
		if err != nil {
			return nil, err
		}
	}
	return in, nil
}

// isolate handles a failed batch. With known failures (a consistent
// *stages.RecordErrors), the other records' output is taken from it;
// otherwise every record is run alone. Failing records are retried, then
// dead-lettered or stop the partition. Output stays in input order.
func (c *Chain) isolate(ctx context.Context, st NamedStage, in []stages.Record, known *stages.RecordErrors, batchErr error) ([]stages.Record, error) {
	var out []stages.Record
	j := 0 // next output of known
	for i := range in {
		var err error
		if known != nil {
			var failed bool
			if err, failed = known.Errs[i]; !failed {
				for ; j < len(known.Out) && known.From[j] == i; j++ {
					out = append(out, known.Out[j])
				}
				continue
			}
		} else {
			var o []stages.Record
			if o, err = call(ctx, st.Stage, in[i:i+1]); err == nil {
				out = append(out, o...)
				continue
			}
		}
		o, err := c.retry(ctx, st, in[i], err)
		if err == nil {
			out = append(out, o...)
			continue
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", errAborted, ctx.Err())
		}
		if c.Policy.Stop {
			return nil, &StoppedError{Stage: st.Name, Offset: in[i].Offset, Err: err}
		}
		if err := c.deadLetter(ctx, st.Name, in[i], err); err != nil {
			return nil, err
		}
	}
	if known == nil {
		c.Log.Debug("stage failed a batch; its records were run one by one", zap.String("stage", st.Name), zap.Error(batchErr))
	}
	return out, nil
}

// retry runs one record alone up to Policy.Retries more times.
func (c *Chain) retry(ctx context.Context, st NamedStage, r stages.Record, err error) ([]stages.Record, error) {
	wait := c.Policy.Backoff
	if wait <= 0 {
		wait = 100 * time.Millisecond
	}
	maxWait := c.Policy.MaxBackoff
	if maxWait <= 0 {
		maxWait = 10 * time.Second
	}
	for attempt := 0; attempt < c.Policy.Retries && !stages.IsPermanent(err); attempt++ {
		if !sleep(ctx, wait) {
			return nil, ctx.Err()
		}
		wait = min(2*wait, maxWait)
		var out []stages.Record
		if out, err = call(ctx, st.Stage, []stages.Record{r}); err == nil {
			return out, nil
		}
	}
	return nil, err
}

// deadLetter hands the record to the sink, retrying until it is
// acknowledged or ctx ends: a dead letter is never lost.
func (c *Chain) deadLetter(ctx context.Context, stage string, r stages.Record, cause error) error {
	c.Log.Warn("record failed; sending it to the dead-letter sink", zap.String("stage", stage),
		zap.String("topic", r.Topic), zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset), zap.Error(cause))
	if c.Policy.Sink == nil {
		c.Log.Error("record dropped: no dead-letter topic is configured (set dead_letter.topic, or policy stop)",
			zap.String("stage", stage), zap.String("topic", r.Topic), zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset))
		if c.OnDeadLetter != nil {
			c.OnDeadLetter(r, stage, cause)
		}
		return nil
	}
	dl := []stages.Record{deadLetter(r, stage, cause)}
	wait := 100 * time.Millisecond
	for {
		err := c.Policy.Sink.Send(ctx, dl)
		if err == nil {
			if c.OnDeadLetter != nil {
				c.OnDeadLetter(r, stage, cause)
			}
			return nil
		}
		c.Log.Error("dead-letter write failed; retrying (the partition waits)", zap.Error(err))
		if !sleep(ctx, wait) {
			return fmt.Errorf("%w: %w", errAborted, ctx.Err())
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// call runs one stage, turning a panic into an error.
func call(ctx context.Context, s stages.Stage, in []stages.Record) (out []stages.Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return s.Process(ctx, in)
}

// PanicError is a stage panic turned into an error.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("stage panicked: %v", e.Value) }

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
