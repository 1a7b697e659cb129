package process

import (
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages/fetch"
)

// Fence tells processing that a partition's epochs up to Epoch are over
// (reset, seek, revoke): queued batches of those epochs are dropped, and
// a batch already running finishes.
type Fence struct {
	Partition offsetstore.TopicPartition
	Epoch     offsetstore.Epoch
}

// Message is what the coordinator sends to processing: fences first, then
// batches. Both slices are owned by the receiver.
type Message struct {
	Fences  []Fence
	Batches []*fetch.Batch
}

// Completion reports one batch handed to processing: finished (its span
// is processed), dropped (fenced before it ran), or stopped (a record
// failed and the dead-letter policy is stop: Err says why and the
// partition must stop before Failed).
type Completion struct {
	Batch   *fetch.Batch
	Dropped bool
	Err     error // non-nil: the partition stops; offsets before Failed are done
	Failed  int64 // with Err: the offset of the record that failed
}

// Report is a group of completions sent to the coordinator at once.
type Report struct {
	Completions []Completion
}
