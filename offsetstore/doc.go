// Package offsetstore is the offset model applications see: the
// partition a thing is about ([TopicPartition]), where a partition is
// asked to start ([StartRequest]: [Exact], [Earliest], [Latest],
// [AtTime], [Committed], [ByPolicy]), the reset policy for a partition
// without a valid committed offset ([ResetPolicy], auto_offset_reset),
// and what a reset reports ([ResetEvent] with its [ResetReason], and the
// [ResetError] that stops a partition under policy none).
//
// The model exists to make one class of bug impossible: a reset that
// deletes state another in-flight step is still using. "Where I want to
// start" is a StartRequest and never an offset; "where I am" is a real,
// non-negative offset that only the pipeline's coordinator holds. A
// reset replaces a partition's position with a request and a new
// [Epoch], and every result of an older epoch is dropped, never applied.
//
// The engine's half of the model (positions, the requests the
// coordinator sends its steps, the commit watermark, the commit store) is
// internal to the pipeline; see docs/architecture.md.
package offsetstore
