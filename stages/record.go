package stages

import (
	"context"
	"time"
)

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is one Kafka record as a stage sees it.
//
// Records a stage receives belong to the pipeline: the stage must not
// modify them or their byte slices (build new records instead; sharing
// the unchanged byte slices of an input record is fine). The pipeline
// never reuses the memory of a record it handed out, so a stage may keep
// references after Process returns.
//
// The Key, Value and header values of fetched records are not copies:
// they point into the fetch response they arrived in (or into the
// decompressed batch), which the records of a batch share. That memory
// lives as long as anything refers to any part of it, so a stage that
// keeps a few bytes of a record for long (a cache, a dedup set) should
// copy them (bytes.Clone): holding one record's Key keeps its whole
// response, up to fetch_max_bytes, in memory.
//
// Null is not empty. A nil Key, Value or Header.Value is null (a record
// whose Value is nil is a tombstone: it deletes its key in a compacted
// topic); a non-nil slice of length 0 is empty. The pipeline hands them
// out as Kafka stored them and writes them as it gets them, and a stage
// must keep them apart too: bytes.Clone and sharing the slice do;
// []byte(string(b)) makes null empty, append([]byte(nil), b...) makes
// empty null.
type Record struct {
	Topic     string
	Partition int32
	// Offset is the offset of the source record this record is, or
	// derives from. A record a stage derives from an input keeps the
	// input's Offset (copying the Record does); the pipeline commits a
	// source offset only after every record carrying it finished every
	// stage, so a derived record must never carry a later offset than
	// its source. -1 (or any offset not in the batch) means unknown:
	// such a record holds back the commit of its whole batch.
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time
}

// Header returns the value of the last header named key, and whether one
// exists.
func (r *Record) Header(key string) ([]byte, bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return r.Headers[i].Value, true
		}
	}
	return nil, false
}

// Size is the record's payload size in bytes (key, value and headers).
// The pipeline's byte budget counts it plus the record's bookkeeping.
func (r *Record) Size() int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// Stage is one processing step of a pipeline.
//
// Process receives a batch of records of one partition, in offset order,
// and returns the records to hand to the next stage (the last stage's
// output is dropped). The contract:
//
//   - Ownership: in belongs to the pipeline and is read-only (see
//     [Record]). The returned slice belongs to the pipeline from then on;
//     it may share byte slices with in.
//   - Zero records returned with a nil error means every input record was
//     consumed: filtered out, or written somewhere by this stage.
//   - A nil error means every input record is finished, including any
//     side effect: a stage that writes elsewhere returns only after the
//     write was acknowledged. Only then can the source offsets be
//     committed.
//   - A non-nil error fails the batch. The pipeline then runs the stage
//     on each record alone to find the records that fail, retries them
//     with backoff, and sends the ones that still fail to the dead-letter
//     topic (or stops the partition, by policy). A stage that knows
//     which records failed returns a *[RecordErrors] and only those are
//     retried. A panic is treated as an error.
//   - ctx is cancelled when the pipeline must stop now (shutdown deadline
//     passed). Return ctx.Err(); unfinished records are redelivered after
//     restart, never sent to the dead-letter topic.
//   - Concurrency: Process is never called concurrently for the same
//     partition (or, with key ordering, for the same key), but it is
//     called concurrently for different partitions: a Stage must be safe
//     for concurrent use.
type Stage interface {
	Process(ctx context.Context, in []Record) ([]Record, error)
}

// StageFunc adapts a function to a Stage.
type StageFunc func(ctx context.Context, in []Record) ([]Record, error)

// Process calls f.
func (f StageFunc) Process(ctx context.Context, in []Record) ([]Record, error) { return f(ctx, in) }

// Closer is implemented by stages that hold resources (connections,
// writers). The pipeline calls Close once, after the last Process call
// returned.
type Closer interface {
	Close(ctx context.Context) error
}
