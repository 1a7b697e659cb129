package resolve

import "github.com/fencepost-dev/fencepost/internal/engine/offsets"

// PartitionResult is the answer for one entry of a ResolveRequest: the log
// bounds of the partition and, for an AtTime request, the offset of the
// first record at or after the time.
type PartitionResult struct {
	Err           error // nil, or why the lookup failed (the coordinator retries)
	NotLeader     bool  // the lookup failed because of stale metadata
	LogStart      int64
	HighWatermark int64
	TimeOffset    int64 // AtTime requests only; -1 if no record is that recent
}

// Result answers one ResolveRequest: Partitions[i] is the answer for entry
// i of Request.
type Result struct {
	Request    offsets.ResolveRequest
	Partitions []PartitionResult
}
