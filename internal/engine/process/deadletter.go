package process

import (
	"context"
	"strconv"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

// maxEnvelopeKey is the largest key a truncated dead letter keeps.
const maxEnvelopeKey = 1024

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
	// offsets before the record are committed (once the records before
	// it finished every stage), nothing after it is processed until a
	// Seek.
	Stop bool
	// Sink receives dead letters. Its Produce returns nil only once the
	// records are durably written (for a Kafka topic: acknowledged);
	// until then the partition waits and Produce is retried, so no
	// record is lost, unless the error is permanent (stages.Permanent:
	// the sink will never take this record, e.g. it is too large): then
	// a truncated dead letter goes in its place (no value, the error and
	// source headers, stages.HeaderTruncated and HeaderSourceSize), and
	// if the sink refuses that too, the partition stops. With Stop false
	// and a nil Sink, a failing record is logged and dropped.
	Sink stages.Producer
}

// deadLetter writes the dead letter of r, which failed stage for good:
// the source record r derives from, as consumed (key, value, headers,
// timestamp; not what earlier stages made of it), with the stage, its
// error and the source coordinates added as headers. A source record
// already dead-lettered in this run (another record derived from it
// failed) is not written again. A record whose source is unknown (a
// stage did not keep its Offset) is dead-lettered as the stage saw it.
//
// It retries until the sink acknowledges or ctx ends: a dead letter is
// never lost. A record the sink refuses for good is replaced by a
// truncated dead letter; if that is refused for good too, deadLetter
// returns an *UndeliverableError.
func (c *Chain) deadLetter(ctx context.Context, run *runState, stage string, r stages.Record, cause error) error {
	src, known := run.source(r)
	if !known {
		src = r
	}
	fields := []any{"stage", stage, "topic", src.Topic, "partition", src.Partition, "offset", src.Offset}
	if known {
		if _, done := run.dead[src.Offset]; done {
			c.Log.Warn("record failed; its source record is in the dead-letter sink already", append(fields, "error", cause)...)
			return nil
		}
	}
	c.Log.Warn("record failed; sending its source record to the dead-letter sink", append(fields, "error", cause)...)
	if c.Policy.Sink == nil {
		c.Log.Error("record dropped: no dead-letter topic is configured (set dead_letter.topic, or policy stop)", fields...)
		c.deadLettered(run, known, src, stage, cause)
		return nil
	}
	err := c.send(ctx, deadLetter(src, stage, cause))
	if err != nil && ctx.Err() == nil {
		c.Log.Warn("the dead-letter sink refused the record for good; sending a truncated dead letter instead",
			append(fields, "size", src.Size(), "error", err)...)
		if err = c.send(ctx, envelope(src, stage, cause, err)); err != nil && ctx.Err() == nil {
			return &stages.UndeliverableError{Stage: stage, Cause: cause, Refused: err}
		}
	}
	if err != nil {
		return aborted(ctx)
	}
	c.deadLettered(run, known, src, stage, cause)
	return nil
}

// deadLettered notes that src is in the dead-letter sink (or dropped, with
// none).
func (c *Chain) deadLettered(run *runState, known bool, src stages.Record, stage string, cause error) {
	if known {
		if run.dead == nil {
			run.dead = map[int64]struct{}{}
		}
		run.dead[src.Offset] = struct{}{}
	}
	if c.OnDeadLetter != nil {
		c.OnDeadLetter(src, stage, cause)
	}
}

// DeadLetterStage is the name under which waits for the dead-letter sink
// are reported (Chain.OnUnavailable).
const DeadLetterStage = "dead_letter"

// send writes one dead letter, retrying every error that is not
// permanent with backoff (Policy.Backoff doubling up to
// MaxUnavailableBackoff) until ctx ends: the partition waits, and the
// wait is reported to OnUnavailable. It returns nil once acknowledged,
// the error if it is permanent, or ctx's error. An error marked
// unavailable is the sink's, never the record's, even if it wraps a
// permanent one (a transaction over because of some batch's refusal):
// it is waited out.
func (c *Chain) send(ctx context.Context, dl stages.Record) error {
	var w *unavailableWait
	defer func() {
		if w != nil {
			w.end()
		}
	}()
	for {
		err := c.Policy.Sink.Produce(ctx, []stages.Record{dl})
		if err == nil || (stages.IsPermanent(err) && !stages.IsUnavailable(err)) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if w == nil {
			w = c.startWait(DeadLetterStage, err)
		} else {
			w.failed(err)
		}
		if !w.sleep(ctx) {
			return ctx.Err()
		}
	}
}

// deadLetter returns r with the error headers added. r's headers are
// not modified: the dead letter gets a slice of its own.
func deadLetter(r stages.Record, stage string, err error) stages.Record {
	h := make([]stages.Header, 0, len(r.Headers)+5)
	h = append(h, r.Headers...)
	h = append(h, errorHeaders(r, stage, err)...)
	r.Headers = h
	return r
}

// envelope is the truncated dead letter standing for r: its key (if
// small), no value, none of its headers; the error and source headers,
// its size, and why the sink refused the whole record.
func envelope(r stages.Record, stage string, cause, refused error) stages.Record {
	env := stages.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}
	if len(r.Key) <= maxEnvelopeKey {
		env.Key = r.Key
	}
	env.Headers = append(errorHeaders(r, stage, cause),
		stages.Header{Key: stages.HeaderTruncated, Value: []byte("true")},
		stages.Header{Key: stages.HeaderSourceSize, Value: []byte(strconv.Itoa(r.Size()))},
		stages.Header{Key: stages.HeaderRefused, Value: []byte(truncate(refused.Error(), 1024))},
	)
	return env
}

func errorHeaders(r stages.Record, stage string, err error) []stages.Header {
	return []stages.Header{
		{Key: stages.HeaderErrorStage, Value: []byte(stage)},
		{Key: stages.HeaderErrorMessage, Value: []byte(truncate(err.Error(), 4096))},
		{Key: stages.HeaderSourceTopic, Value: []byte(r.Topic)},
		{Key: stages.HeaderSourcePartition, Value: []byte(strconv.FormatInt(int64(r.Partition), 10))},
		{Key: stages.HeaderSourceOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
