package offsets

import (
	"context"
	"errors"
)

// Sentinel errors of the engine. They are returned wrapped with details;
// test with errors.Is.
var (
	// ErrBackwards: an offset or span would move a position or watermark
	// backwards within one epoch.
	ErrBackwards = errors.New("offset moves backwards within an epoch")
	// ErrStaleEpoch: a mark or result belongs to an epoch that is no
	// longer current; it was dropped.
	ErrStaleEpoch = errors.New("stale partition epoch")
	// ErrStaleGeneration: a mark, result or commit belongs to a group
	// generation that is no longer current; it was dropped.
	ErrStaleGeneration = errors.New("stale group generation")
	// ErrEmptySpan: a span's end is not after its start.
	ErrEmptySpan = errors.New("span end must be greater than its start")
	// ErrGenerationEnded: the group coordinator fenced a commit
	// (RebalanceInProgress, IllegalGeneration, UnknownMemberId,
	// NotCoordinator). The generation is over; its offsets must not be
	// resent under a new generation.
	ErrGenerationEnded = errors.New("consumer group generation ended; the commit was fenced")
	// ErrTransactionAborted: a transactional store (guarantee
	// exactly_once) could not commit the transaction a commit request
	// closes, and aborted it: the outputs written since the last commit
	// are discarded, and every partition must go back to its committed
	// offset. The store has opened the next transaction. Never retried.
	ErrTransactionAborted = errors.New("the transaction was aborted; its outputs were discarded")
	// ErrTransactionFailed: a transactional store can no longer commit
	// anything (the producer was fenced by another instance with the
	// same transactional id, or failed for good, or a commit's outcome
	// is unknown). The run must stop; a restart recovers. Never retried.
	ErrTransactionFailed = errors.New("the transactional producer failed")
)

// TransactionStore is a CommitStore that commits offsets inside
// transactions (guarantee exactly_once). Commit commits the open
// transaction with the request's offsets and opens the next one; its
// errors wrap ErrTransactionAborted, ErrTransactionFailed or
// ErrStaleGeneration, and are never retried. Abort discards the open
// transaction's outputs and opens the next one; its error wraps
// ErrTransactionFailed.
type TransactionStore interface {
	CommitStore
	Abort(ctx context.Context) error
}

// Skipped computes ResetEvent.Skipped for a move from `from` to `to` given
// the log bounds at the time (see ResetEvent).
func Skipped(from, to, logStart, highWatermark int64) int64 {
	base := from
	if from < 0 || (highWatermark >= 0 && from > highWatermark) {
		base = logStart
	}
	if base < 0 || to <= base {
		return 0
	}
	return to - base
}
