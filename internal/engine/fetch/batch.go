package fetch

import (
	"cmp"
	"slices"
	"unsafe"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// Batch is the records one fetch returned for one partition: the unit the
// coordinator hands to processing and processing reports done. It is
// immutable once built.
//
// Its span tiles the partition's offsets: it starts at the position that
// was fetched and ends at the next offset to fetch, so offsets without a
// record (compacted, transaction markers) are covered too.
type Batch struct {
	tp      offsetstore.TopicPartition
	gen     offsets.Generation
	epoch   offsetstore.Epoch
	span    offsets.Span
	records []stages.Record
	bytes   int64
}

// NewBatch builds a batch. records must be in offset order within span;
// the batch takes ownership of the slice. bytes is the memory the
// records hold (their footprint), counted against the byte budget.
func NewBatch(tp offsetstore.TopicPartition, gen offsets.Generation, epoch offsetstore.Epoch,
	span offsets.Span, records []stages.Record, bytes int64) *Batch {
	return &Batch{tp: tp, gen: gen, epoch: epoch, span: span, records: records, bytes: bytes}
}

// Partition is the batch's partition.
func (b *Batch) Partition() offsetstore.TopicPartition { return b.tp }

// Generation is the generation the batch was fetched in.
func (b *Batch) Generation() offsets.Generation { return b.gen }

// Epoch is the partition epoch the batch was fetched in.
func (b *Batch) Epoch() offsetstore.Epoch { return b.epoch }

// Span is the range of offsets the batch covers.
func (b *Batch) Span() offsets.Span { return b.span }

// Records returns the batch's records. They are read-only (see
// stages.Record).
func (b *Batch) Records() []stages.Record { return b.records }

// RecordsBelow returns how many of the batch's records have an offset
// below off (they are in offset order): the records a completion with
// FinishedBelow off finished.
func (b *Batch) RecordsBelow(off int64) int {
	n, _ := slices.BinarySearchFunc(b.records, off, func(r stages.Record, off int64) int { return cmp.Compare(r.Offset, off) })
	return n
}

// Bytes is the memory the batch's records hold (the sum of their
// footprint), counted against the byte budget.
func (b *Batch) Bytes() int64 { return b.bytes }

// recordSize and headerSize are the in-memory sizes of the values a
// decoded record takes besides its payload bytes.
const (
	recordSize = int64(unsafe.Sizeof(stages.Record{}))
	headerSize = int64(unsafe.Sizeof(stages.Header{}))
)

// footprint is the memory a fetched record holds while it is in the
// pipeline: its payload (key, value, header keys and values: payload
// bytes) plus its Record value and one Header value per header. This,
// not the payload alone, is what the byte budget (buffer_bytes) counts,
// so the budget bounds the heap: for records of 200 bytes the
// bookkeeping adds about two thirds.
func footprint(payload int64, headers int) int64 {
	return payload + recordSize + int64(headers)*headerSize
}
