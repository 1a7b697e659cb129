package fetch

import (
	"fmt"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// Outcome classifies one partition's answer in a fetch response.
type Outcome uint8

const (
	// OK: the partition answered without error; Batch holds its
	// records, if any.
	OK Outcome = iota
	// OffsetOutOfRange: the position is outside the log; LogStart and
	// HighWatermark say where the log is (-1 if the broker did not say).
	OffsetOutOfRange
	// NotLeader: the broker does not lead the partition (not leader,
	// unknown topic or partition), or our leader epoch is older than its
	// own (FENCED_LEADER_EPOCH): refresh metadata and route the partition
	// again (see kafkawire.StaleMetadata).
	NotLeader
	// Retriable: a transient error (network, timeout, broker busy, a
	// broker behind our metadata: UNKNOWN_LEADER_EPOCH): back off and
	// fetch again.
	Retriable
	// Fatal: an error that retrying will not fix (authorization, TLS
	// trust): the partition keeps retrying with a long backoff and the
	// error is logged with a hint.
	Fatal
	// Corrupt: the record batch at Next is corrupt (Err wraps ErrCorrupt
	// and says which batch and what is wrong). Batch holds the records
	// of the whole batches before it, if any, and Next is where they
	// end: they are delivered, and the corrupt bytes are not skipped.
	// Fetching them again may help once (a fault in transit); the
	// coordinator stops the partition when they stay corrupt.
	Corrupt
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case OffsetOutOfRange:
		return "offset_out_of_range"
	case NotLeader:
		return "not_leader"
	case Retriable:
		return "retriable"
	case Fatal:
		return "fatal"
	case Corrupt:
		return "corrupt"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// PartitionResult is the answer for one entry of a FetchRequest.
type PartitionResult struct {
	Outcome       Outcome
	Err           error // the broker or client error behind a non-OK outcome
	LogStart      int64 // -1 if unknown
	HighWatermark int64 // -1 if unknown
	// LastStable is the last stable offset (the high watermark under
	// read_uncommitted); -1 if unknown.
	LastStable int64
	// Next is the next offset to fetch: the end of Batch's span, or the
	// fetched position when nothing new arrived. It is greater than the
	// position without a Batch when the fetch only skipped offsets that
	// hold no records (transaction markers).
	Next int64
	// LastLeaderEpoch is the partition leader epoch of the record batch
	// holding offset Next-1 (the last offset this fetch consumed), -1
	// when the fetch consumed nothing or the batch did not say. The
	// coordinator keeps it to validate its position after a leader
	// change (KIP-320).
	LastLeaderEpoch int32
	Batch           *Batch // nil when the partition returned no records
	// Bytes is Batch's memory (Batch.Bytes()), repeated here so
	// the coordinator accounts the byte budget without touching the
	// batch.
	Bytes int64
	// Payload is the key, value and header bytes of Batch's records,
	// what the fetch brought (for metrics).
	Payload int64
}

// Result answers one FetchRequest: Partitions[i] is the answer for entry i
// of Request.
type Result struct {
	Request    offsets.FetchRequest
	Partitions []PartitionResult
}

// Leaders is a metadata snapshot: which broker leads each partition of the
// consumed topics. A partition with no leader maps to -1.
type Leaders struct {
	Leaders map[offsetstore.TopicPartition]int32
	// LeaderEpochs is each partition's leader epoch (KIP-320), -1 when the
	// partition has no leader or the broker did not say (Metadata below
	// v7).
	LeaderEpochs map[offsetstore.TopicPartition]int32
	Err          error // the refresh failed; Leaders is empty
}
