package stages

// Headers the pipeline adds to a record it writes to the dead-letter
// topic: which stage rejected it and why, and where it came from.
const (
	HeaderErrorStage      = "fencepost.error.stage"
	HeaderErrorMessage    = "fencepost.error.message"
	HeaderSourceTopic     = "fencepost.source.topic"
	HeaderSourcePartition = "fencepost.source.partition"
	HeaderSourceOffset    = "fencepost.source.offset"
	// HeaderTruncated is set ("true") on a dead letter that carries no
	// value and none of the record's own headers, because the
	// dead-letter topic refused the whole record for good (too large,
	// for example).
	HeaderTruncated = "fencepost.dead_letter.truncated"
	// HeaderSourceSize is the size in bytes (key, value and headers) of
	// the record a truncated dead letter stands for.
	HeaderSourceSize = "fencepost.source.size"
	// HeaderRefused is why the dead-letter topic refused the whole
	// record.
	HeaderRefused = "fencepost.dead_letter.refused"
)
