package process

import (
	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// Fence tells processing that a partition's epochs up to Epoch are over
// (a revoke, a reset): queued batches of those epochs are dropped (and
// batches of them that arrive later), and a unit already running
// finishes.
//
// With Cancel, a running unit of the partition whose batches' epochs are
// all <= Epoch has its context canceled too: its stage calls, its waits
// for an unavailable destination and its dead-letter writes end, and its
// batches are reported as a context end is (none of their records
// finished, Err nil), whatever the chain returns for it (a stage may
// ignore its context, or fail or finish just before the cancel): never
// finished, never a stop of the partition. That is how an aborted
// transaction's processing is called off (exactly-once): what it wrote
// is discarded with the transaction, and its records are processed again
// from the committed offset. A stage that ignores its context still
// holds its unit until it returns. A unit of a later epoch is not
// touched.
type Fence struct {
	Partition offsetstore.TopicPartition
	Epoch     offsetstore.Epoch
	Cancel    bool
}

// Message is what the coordinator sends to processing: fences first, then
// batches. Both slices are owned by the receiver.
type Message struct {
	Fences  []Fence
	Batches []*fetch.Batch
}

// Completion reports what became of one batch handed to processing.
//
// Every record of the batch below FinishedBelow finished every stage
// (its outputs acknowledged, or it was dead-lettered); no record from
// FinishedBelow on is known to have. FinishedBelow is the batch's
// Span().End when the whole batch finished and Span().Start when nothing
// of it did. A record's offset here is its source offset: records a
// stage derived from it carry it (see stages.Record.Offset).
//
// Err is nil when the batch finished, or when its unfinished records
// were dropped (a fence, a canceled unit, a stop of its partition caused
// by another batch, shutdown). Err is non-nil when a record of this batch failed
// under the stop policy (or could not be written anywhere): it says why,
// and the partition must stop at FinishedBelow.
type Completion struct {
	Batch         *fetch.Batch
	FinishedBelow int64
	Err           error
}

// Finished reports whether every record of the batch finished.
func (c Completion) Finished() bool { return c.Batch != nil && c.FinishedBelow >= c.Batch.Span().End }

// Report is a group of completions sent to the coordinator at once.
type Report struct {
	Completions []Completion
}
