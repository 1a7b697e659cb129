package process

import (
	"context"
	"strconv"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

// Headers added to a record sent to the dead-letter sink.
const (
	HeaderStage           = "fencepost.error.stage"
	HeaderError           = "fencepost.error.message"
	HeaderSourceTopic     = "fencepost.source.topic"
	HeaderSourcePartition = "fencepost.source.partition"
	HeaderSourceOffset    = "fencepost.source.offset"
)

// DeadLetterSink receives records that failed a stage after their
// retries. Send returns nil only once every record is durably written
// (for a Kafka topic: acknowledged); until then the partition waits and
// Send is retried, so no record is lost.
type DeadLetterSink interface {
	Send(ctx context.Context, records []stages.Record) error
}

// FailurePolicy says what happens to a record a stage keeps rejecting.
type FailurePolicy struct {
	// Retries is how many times a failing record is retried alone
	// before it is dead-lettered (or stops its partition).
	Retries int
	// Backoff is the wait before the first retry; it doubles up to
	// MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Stop halts the record's partition instead of dead-lettering: its
	// offsets before the record are committed, nothing after it is
	// processed until a Seek.
	Stop bool
	// Sink receives dead letters. With Stop false and a nil Sink, a
	// failing record is logged and dropped (counted as skipped).
	Sink DeadLetterSink
}

// deadLetter returns r with the error headers added.
func deadLetter(r stages.Record, stage string, err error) stages.Record {
	h := make([]stages.Header, 0, len(r.Headers)+5)
	h = append(h, r.Headers...)
	h = append(h,
		stages.Header{Key: HeaderStage, Value: []byte(stage)},
		stages.Header{Key: HeaderError, Value: []byte(err.Error())},
		stages.Header{Key: HeaderSourceTopic, Value: []byte(r.Topic)},
		stages.Header{Key: HeaderSourcePartition, Value: []byte(strconv.FormatInt(int64(r.Partition), 10))},
		stages.Header{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
	)
	r.Headers = h
	return r
}
