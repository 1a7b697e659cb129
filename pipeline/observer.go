package pipeline

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"

	kafka "github.com/segmentio/kafka-go"

	"github.com/fencepost-dev/fencepost/offsetstore"
)

// Observer receives measurements of a running pipeline, for metrics (the
// processor binary exports them to Prometheus). Resets and stopped
// partitions are reported to OnReset and OnPartitionStopped.
//
// Its methods are called from the pipeline's goroutines, concurrently;
// they must be safe for concurrent use and return quickly: a slow
// observer slows the step that calls it. The values passed belong to the
// observer.
type Observer interface {
	// StageDone: a stage finished its part of a unit of records (a
	// batch, or a key group of one).
	StageDone(StageDone)
	// FetchDone: a fetch request to a broker was answered.
	FetchDone(FetchDone)
	// CommitDone: an offset commit was answered.
	CommitDone(CommitDone)
	// OffsetsCommitted: the offsets of an acknowledged commit, for the
	// partitions this member still owns.
	OffsetsCommitted([]CommittedOffset)
	// Rebalanced: this member got or gave back partitions.
	Rebalanced(Rebalance)
}

// WithObserver sends the pipeline's measurements to o (see Observer).
func WithObserver(o Observer) Option { return func(p *Pipeline) { p.obs = o } }

// StageDone is what one stage did with one unit of records.
type StageDone struct {
	Stage string
	// Records went in, Out came out (to the next stage). Dropped are
	// records no output derives from (by source offset) that did not
	// fail: what a filter drops. Failed failed for good, after the
	// retries; DeadLettered are those written to the dead-letter topic.
	Records, Out, Dropped, Failed, DeadLettered int
	// Duration is the stage's time on the unit, retries and dead
	// letters included.
	Duration time.Duration
}

// FetchDone is one fetch request's answer.
type FetchDone struct {
	Broker int32 // the broker's node id
	// Partitions were asked for; Records and Bytes (record payload)
	// came back.
	Partitions, Records int
	Bytes               int64
	// Errors is how many partitions were answered with an error (not
	// leader, offset out of range, a broker or network error); Err is
	// the first. Both are zero when Aborted.
	Errors int
	Err    error
	// Aborted: the fetch was cancelled (its partitions were being
	// revoked); what it returned is dropped.
	Aborted bool
	// Latency is from sending the request to its answer; an idle
	// partition's fetch waits up to consumer.fetch_max_wait for data.
	Latency time.Duration
}

// CommitDone is one offset commit's answer.
type CommitDone struct {
	Partitions int
	// Latency is from sending the commit to its answer, retries of
	// transient errors included.
	Latency time.Duration
	Err     error // nil: acknowledged
	// Abort: with guarantee exactly_once, this was the abort of a
	// transaction (Partitions is 0; nothing was committed, and Err nil
	// means the abort went through).
	Abort bool
}

// Reason names why a commit failed, from a small set fit for a metric
// label: "" (it did not), "fenced" (the group generation ended: a
// rebalance), "transaction_aborted" (exactly_once: the transaction could
// not commit and was aborted), "transaction_failed" (the transactional
// producer failed for good), "timeout" (no answer in time), the Kafka
// error's name ("group_coordinator_not_available", ...), or "other".
func (d CommitDone) Reason() string {
	var ke kafka.Error
	switch err := d.Err; {
	case err == nil:
		return ""
	case errors.Is(err, offsets.ErrTransactionAborted):
		return "transaction_aborted"
	case errors.Is(err, offsets.ErrTransactionFailed):
		return "transaction_failed"
	case errors.Is(err, offsets.ErrGenerationEnded), errors.Is(err, offsets.ErrStaleGeneration):
		return "fenced"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &ke):
		return strings.ToLower(strings.ReplaceAll(ke.Title(), " ", "_"))
	}
	return "other"
}

// CommittedOffset is one partition's offset in an acknowledged commit.
type CommittedOffset struct {
	Partition offsetstore.TopicPartition
	Offset    int64
	// RecordTime is the timestamp of the newest record the commit
	// covers (the record below Offset, when it was among the last
	// batches processed), zero when unknown. Now minus RecordTime is
	// the record's age at commit: how far behind its producer the
	// pipeline's committed progress is.
	RecordTime time.Time
}

// Rebalance reports the start or the end of a group generation for this
// member; a graceful stop ends the last generation too.
type Rebalance struct {
	Generation int32
	// Ended is false at the start, when the generation assigned
	// Partitions to this member; true at the end, when they were
	// revoked (drained and committed, or their deadline passed).
	Ended      bool
	Partitions int
	// Paused is, at the start, how long this member fetched nothing
	// before it: since the previous generation's revoke began (or since
	// Run started, for the first).
	Paused time.Duration
}
