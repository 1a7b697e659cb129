package produce

import (
	"errors"
	"fmt"
)

// ErrProducerFenced is returned (wrapped) once another producer with the
// same transactional id has initialized: this one's producer epoch is
// stale and every later call fails. The caller must stop using the
// producer (its work now belongs to the other instance); a new Producer
// may be built to take the transactional id back.
var ErrProducerFenced = errors.New("producer fenced: another producer initialized the same transactional id")

// ErrNotInTransaction is returned by Produce, SendOffsets and Commit of a
// transactional producer when no transaction is open (Begin was not
// called, or the transaction is being committed or aborted).
var ErrNotInTransaction = errors.New("no transaction open: call Begin first")

// ErrTransactionInProgress is returned by Begin while a transaction is
// open: commit or abort it first.
var ErrTransactionInProgress = errors.New("a transaction is already open: commit or abort it first")

// ErrNotTransactional is returned by the transaction methods of a
// producer built without a transactional id.
var ErrNotTransactional = errors.New("producer has no transactional id")

// ErrStaleMember is wrapped in an AbortableError when the group
// coordinator refuses a transaction's offsets because the member's
// generation, member id or instance id is no longer current (a rebalance
// moved on): abort, rejoin the group, and start again from the committed
// offsets.
var ErrStaleMember = errors.New("consumer group member is stale (rebalanced or fenced)")

// AbortableError fails the current transaction: the caller must call
// Abort, then may Begin again and redo the transaction's work (from the
// committed offsets). Nothing of the aborted transaction becomes visible.
type AbortableError struct {
	Err error
}

func (e *AbortableError) Error() string {
	return fmt.Sprintf("transaction must be aborted: %v", e.Err)
}

func (e *AbortableError) Unwrap() error { return e.Err }

// FatalError is an error no retry or abort fixes (no permission for the
// transactional id, a transaction timeout the broker refuses, a broker
// that does not support transactions): the producer is unusable and the
// error names what to check.
type FatalError struct {
	Err error
}

func (e *FatalError) Error() string { return fmt.Sprintf("producer failed: %v", e.Err) }

func (e *FatalError) Unwrap() error { return e.Err }

// SinkError is a failure of the whole destination topic rather than of
// some records: the topic does not exist, or the client may not write to
// it. It is not marked stages.Permanent (dead-lettering every record
// would not help): Produce marks it stages.Unavailable, so the process
// chain holds the partition and retries until the topic can be written.
type SinkError struct {
	Topic string
	Err   error
}

func (e *SinkError) Error() string {
	return fmt.Sprintf("cannot write to topic %q: %v (check that the topic exists and that this client may write to it)", e.Topic, e.Err)
}

func (e *SinkError) Unwrap() error { return e.Err }

// RecordTooLargeError is a record that does not fit in one batch of the
// topic's limit (Config.MaxBatchBytes, or the topic's max.message.bytes).
// It is marked stages.Permanent when returned.
type RecordTooLargeError struct {
	Topic string
	Size  int
	Limit int

	from      limitSource
	lookupErr error
}

func (e *RecordTooLargeError) Error() string {
	msg := fmt.Sprintf("record too large: %d bytes encoded for topic %q, over the batch limit of %d bytes", e.Size, e.Topic, e.Limit)
	switch e.from {
	case limitConfig:
		msg += " (kafka.max_batch_bytes; raise it, up to the topic's max.message.bytes, for larger records)"
	case limitTopic:
		msg += " (the topic's max.message.bytes: raise it, and the brokers' message.max.bytes, for larger records)"
	case limitDefault:
		msg += fmt.Sprintf(" (Kafka's default max.message.bytes: the topic's own could not be read: %v; set kafka.max_batch_bytes to the topic's max.message.bytes)", e.lookupErr)
	}
	return msg
}
