package resolve

import "github.com/fencepost-dev/fencepost/internal/engine/offsets"

// PartitionResult is the answer for one entry of a ResolveRequest: the log
// bounds of the partition and, for an AtTime request, the offset of the
// first record at or after the time.
type PartitionResult struct {
	Err       error // nil, or why the lookup failed (the coordinator retries)
	NotLeader bool  // the lookup failed because of stale metadata
	LogStart  int64
	// HighWatermark is the end of the log the consumer may read: the high
	// watermark, or under read_committed the last stable offset.
	HighWatermark int64
	TimeOffset    int64 // AtTime requests only; -1 if no record is that recent
	// EndLeaderEpoch and LeaderEpochEndOffset answer an entry's
	// ValidateLeaderEpoch: the largest leader epoch at or below it that
	// the leader's log holds, and the offset where that leader epoch ends
	// (the first offset of the next leader epoch, or the leader's log end
	// if it is the current one). -1 when not asked, or when the leader
	// knows no such leader epoch (it is older than the log start).
	EndLeaderEpoch       int32
	LeaderEpochEndOffset int64
}

// Result answers one ResolveRequest: Partitions[i] is the answer for entry
// i of Request.
type Result struct {
	Request    offsets.ResolveRequest
	Partitions []PartitionResult
}
