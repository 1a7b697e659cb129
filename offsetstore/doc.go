// Package offsetstore is the offset model of the processor: where a
// partition wants to start (a [StartRequest]), where it is (a [Position]),
// the immutable batches the pipeline stages exchange ([ResolveRequest],
// [FetchRequest], [CommitRequest]), the per-partition commit [Watermark], and
// the [CommitStore] that persists committed offsets.
//
// The model exists to make one class of bug impossible: a reset that
// deletes state another in-flight step is still using. A [StartRequest]
// and a [Position] are different types, so code that needs an offset
// cannot be handed "earliest" by mistake, and a Position always holds a
// real, non-negative offset. Every Position and every batch is tagged
// with the group [Generation] and the partition [Epoch] it belongs to; a
// result tagged with an epoch or generation that is no longer current is
// dropped by its receiver, never applied.
//
// Batches are immutable: their fields are unexported, constructors copy
// their inputs and accessors return copies, so a batch can be sent on a
// channel and read by any goroutine without locks.
//
// Who it is for: applications use [TopicPartition], the [StartRequest]s
// of Seek ([Exact], [Earliest], [Latest], [AtTime]) and what OnReset and a
// stopped partition report ([ResetEvent], [ResetReason], [ResetError],
// with [ResetPolicy] for auto_offset_reset). The rest (positions, batches,
// the watermark, the CommitStore, generations and epochs) is the
// engine's: the pipeline and its steps exchange it, it is documented for
// readers of the engine, and it may change.
package offsetstore
