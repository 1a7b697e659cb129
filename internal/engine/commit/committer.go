// Package commit is the pipeline's commit step: it writes a CommitRequest
// to the CommitStore of the batch's generation, retrying transient
// failures, and never resending a batch the group fenced.
//
// It is internal to the engine: package pipeline wires it, and nothing
// outside this module can import it.
package commit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"

	"github.com/fencepost-dev/fencepost/internal/wait"
)

// Committer runs commits one at a time (the coordinator sends the next
// only after the previous answered).
type Committer struct {
	backoff time.Duration
	timeout time.Duration
}

// NewCommitter returns a Committer that retries transient errors with
// backoff (default 100ms, doubling) for up to timeout (default 10s).
func NewCommitter(backoff, timeout time.Duration) *Committer {
	if backoff <= 0 {
		backoff = 100 * time.Millisecond
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &Committer{backoff: backoff, timeout: timeout}
}

// Commit writes r.Request to r.Store. It returns at once on success, on an
// error wrapping offsets.ErrGenerationEnded or ErrStaleGeneration
// (never retried: the generation is over), or when ctx ends; other
// errors are retried until the timeout and the last one is returned.
func (c *Committer) Commit(ctx context.Context, r Job) *Result {
	if r.Store == nil {
		return &Result{Request: r.Request, Err: errors.New("commit: no store for the generation")}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if ts, ok := r.Store.(offsets.TransactionStore); ok {
		// A transaction is committed or aborted once: the store retries
		// what can be retried within it, and says what happened.
		var err error
		if r.Abort {
			err = ts.Abort(ctx)
		} else {
			err = ts.Commit(ctx, r.Request)
		}
		return &Result{Request: r.Request, Err: err}
	}
	if r.Abort {
		return &Result{Request: r.Request, Err: fmt.Errorf("%w: abort asked of a store without transactions", offsets.ErrTransactionFailed)}
	}
	delay := c.backoff
	for attempt := 1; ; attempt++ {
		err := r.Store.Commit(ctx, r.Request)
		if err == nil || errors.Is(err, offsets.ErrGenerationEnded) || errors.Is(err, offsets.ErrStaleGeneration) {
			return &Result{Request: r.Request, Err: err}
		}
		if !wait.For(ctx, delay) {
			return &Result{Request: r.Request, Err: fmt.Errorf("commit of %d partitions failed after %d attempts: %w", r.Request.Len(), attempt, err)}
		}
		delay = min(2*delay, 2*time.Second)
	}
}
