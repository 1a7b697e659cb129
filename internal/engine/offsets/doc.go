// Package offsets is the engine's half of the offset model: where a
// partition is ([Position], an absolute offset >= 0 tagged with its
// partition epoch and group [Generation]), the immutable requests the
// coordinator sends its steps ([ResolveRequest], [FetchRequest],
// [CommitRequest]), the per-partition commit [Watermark], and the
// [CommitStore] that persists committed offsets. Applications see the
// other half, package offsetstore (start requests, resets).
//
// Requests are immutable: their fields are unexported, constructors copy
// their inputs and accessors return copies, so a request can be sent on
// a channel and read by any goroutine without locks. Every position and
// request carries the generation and epoch it belongs to; a result of an
// epoch or generation that is no longer current is dropped by its
// receiver, never applied.
package offsets
