package offsetstore

import (
	"errors"
	"fmt"
)

// ErrNegativeOffset: a negative number was given where an absolute
// offset is required (logical positions such as earliest or latest are
// StartRequests). It is returned wrapped with details; test with
// errors.Is.
var ErrNegativeOffset = errors.New("offset must be >= 0 (logical positions such as earliest or latest are start requests, not offsets)")

// ResetReason says why a partition's position was reset.
type ResetReason uint8

const (
	// ReasonNoCommittedOffset: the partition had no committed offset
	// and auto_offset_reset chose the start.
	ReasonNoCommittedOffset ResetReason = iota + 1
	// ReasonBelowLogStart: the position fell below the log start
	// (retention or DeleteRecords removed records not yet read); the
	// partition resumes at the log start.
	ReasonBelowLogStart
	// ReasonAboveHighWatermark: the position is above the high
	// watermark (the topic was deleted and recreated, or records were
	// lost and the partition's leader epoch could not tell where);
	// auto_offset_reset chose the new start. This is a data-loss event.
	ReasonAboveHighWatermark
	// ReasonSeek: the application called Seek.
	ReasonSeek
	// ReasonLogTruncation: the partition's log diverged below the
	// position. An unclean leader election made a replica that lacked
	// the last records leader, so the records the consumer read from the
	// old leader after the divergence point are gone, and new records
	// may take their offsets. Detected by checking the leader epoch of
	// the last record read (or committed) against the new leader's log
	// (OffsetForLeaderEpoch, KIP-320), after a leader change, an
	// OffsetOutOfRange answer, or at start from a committed offset that
	// carries its leader epoch. The partition resumes at the divergence
	// point (the end of that leader epoch on the new leader), whatever
	// auto_offset_reset says, so nothing written after it is skipped.
	// This is a data-loss event; To is below From.
	ReasonLogTruncation
	// ReasonTransactionAborted: with guarantee exactly_once, the
	// transaction holding the partition's outputs since its last commit
	// was aborted (a produce failed, the group rebalanced, a partition
	// stopped, a deadline passed): those outputs were discarded, so the
	// partition goes back to its committed offset (To, below From) and
	// its records are processed again. Nothing is lost or duplicated in
	// the output.
	ReasonTransactionAborted
	// ReasonTopicRecreated: the partition's topic was deleted and
	// created again (its topic id changed, or it disappeared from the
	// brokers' metadata and came back) while the group was subscribed
	// to it. Offsets committed for the deleted topic do not belong to
	// the new one, so auto_offset_reset chooses the start, as for a
	// partition without a committed offset; From is -1. Records the
	// deleted topic held and the processor had not read are gone with
	// it: not counted in Skipped.
	ReasonTopicRecreated
)

// String returns the reason's snake_case name, as used in logs and
// metrics.
func (r ResetReason) String() string {
	switch r {
	case ReasonNoCommittedOffset:
		return "no_committed_offset"
	case ReasonBelowLogStart:
		return "below_log_start"
	case ReasonAboveHighWatermark:
		return "above_high_watermark"
	case ReasonSeek:
		return "seek"
	case ReasonLogTruncation:
		return "log_truncation"
	case ReasonTransactionAborted:
		return "transaction_aborted"
	case ReasonTopicRecreated:
		return "topic_recreated"
	}
	return fmt.Sprintf("ResetReason(%d)", uint8(r))
}

// ResetEvent describes one reset of one partition. From is the offset the
// partition was at (or its committed offset), -1 if it had none; To is
// where it resumes. Skipped counts the offsets jumped over that the
// consumer will never process: To minus From when the partition moved
// forward from a valid position, To minus the log start when From was not
// a valid position (none committed, or above the high watermark), zero
// when it moved backwards.
type ResetEvent struct {
	Partition     TopicPartition
	Reason        ResetReason
	From          int64
	To            int64
	Skipped       int64
	LogStart      int64 // log start offset seen when resolving, -1 if not looked up
	HighWatermark int64 // high watermark seen when resolving, -1 if not looked up
	// DataLoss is true when records the group believed existed are
	// gone: the old position was above the high watermark
	// (ReasonAboveHighWatermark), or the log was truncated below it
	// (ReasonLogTruncation).
	DataLoss bool
	Epoch    Epoch
}

// ResetError stops a partition whose reset policy is none: it carries the
// partition, the reason a reset was needed, the offset the partition was
// at, and the log bounds, so an operator can choose a new start and Seek.
type ResetError struct {
	Partition     TopicPartition
	Reason        ResetReason
	From          int64 // -1 if the partition had no committed offset
	LogStart      int64
	HighWatermark int64
}

func (e *ResetError) Error() string {
	if e.From < 0 {
		return fmt.Sprintf("partition %s has no committed offset and auto_offset_reset is none (log is %d..%d): "+
			"set auto_offset_reset to earliest or latest, or seek the partition", e.Partition, e.LogStart, e.HighWatermark)
	}
	return fmt.Sprintf("partition %s: offset %d is %s (log is %d..%d) and auto_offset_reset is none: "+
		"the partition is stopped; check retention and whether the topic was recreated, then seek it or set auto_offset_reset",
		e.Partition, e.From, e.Reason, e.LogStart, e.HighWatermark)
}
