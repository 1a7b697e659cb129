package produce

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/fencepost-dev/fencepost/stages"
)

// Kafka's record batch, format v2 (magic 2): a 61-byte header, then the
// records.
const (
	batchHeaderSize  = 61
	offLength        = 8  // int32 batchLength: the bytes after it
	offLeaderEpoch   = 12 // int32 partitionLeaderEpoch (the broker sets it)
	offMagic         = 16
	offCRC           = 17 // uint32 CRC-32C of everything after it
	offAttributes    = 21
	offLastDelta     = 23
	offFirstTS       = 27
	offMaxTS         = 35
	offProducerID    = 43
	offProducerEpoch = 51
	offBaseSequence  = 53
	offCount         = 57

	// AttrTransactional marks a batch written inside a transaction.
	attrTransactional = 0x10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sizePrefix is the room before the batch in an encoder's buffer for the
// int32 size a Produce request's record set starts with (kafka-go's
// RawRecordSet is sent as is, size included).
const sizePrefix = 4

// batchEncoder appends records to one v2 record batch in a buffer it
// reuses from batch to batch, after a 4-byte size prefix. It is not safe for concurrent use. Append
// does not allocate once the buffer has grown to the size of the largest
// batch encoded with it.
type batchEncoder struct {
	buf      []byte // size prefix, header, uncompressed records
	out      []byte // size prefix, header, compressed records
	frame    []byte // the finished batch with its prefix: buf or out
	codec    Compression
	count    int32
	firstTS  int64
	maxTS    int64
	attrs    int16
	finished bool
}

// reset starts a new batch; transactional sets the attribute that marks
// records of a transaction.
func (e *batchEncoder) reset(transactional bool) {
	if cap(e.buf) < sizePrefix+batchHeaderSize {
		e.buf = make([]byte, sizePrefix+batchHeaderSize, 16<<10)
	}
	e.buf = e.buf[:sizePrefix+batchHeaderSize]
	clear(e.buf)
	e.count = 0
	e.attrs = 0
	if transactional {
		e.attrs = attrTransactional
	}
	e.codec = CompressionNone
	e.finished = false
	e.frame = nil
}

// compressWith makes finish compress the records with codec (the batch
// started by reset).
func (e *batchEncoder) compressWith(codec Compression) { e.codec = codec }

// len is the size of the batch so far, in bytes.
func (e *batchEncoder) len() int { return len(e.buf) - sizePrefix }

// batch is the batch encoded (after finish), without the size prefix.
func (e *batchEncoder) batch() []byte { return e.frame[sizePrefix:] }

// recordSet is the batch with its size prefix: a Produce request's
// record set.
func (e *batchEncoder) recordSet() []byte { return e.frame }

// varintLen is the size of v as a zig-zag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// bytesLen is the encoded size of a length-prefixed field: -1 (null)
// for nil, so nil and empty stay distinct.
func bytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

// recordSize is the size of a record's body (after its length varint).
func recordSize(key, value []byte, headers []stages.Header, tsDelta int64, offDelta int32) int {
	n := 1 + varintLen(tsDelta) + varintLen(int64(offDelta)) + bytesLen(key) + bytesLen(value) + varintLen(int64(len(headers)))
	for i := range headers {
		n += varintLen(int64(len(headers[i].Key))) + len(headers[i].Key) + bytesLen(headers[i].Value)
	}
	return n
}

// encodedSize is what a record adds to a batch whose first timestamp is
// firstTS, at offset delta offDelta.
func encodedSize(r *stages.Record, ts, firstTS int64, offDelta int32) int {
	body := recordSize(r.Key, r.Value, r.Headers, ts-firstTS, offDelta)
	return varintLen(int64(body)) + body
}

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// append adds one record with timestamp ts (Unix milliseconds). A nil key,
// value or header value is written as null (length -1), an empty one as
// empty.
func (e *batchEncoder) append(key, value []byte, headers []stages.Header, ts int64) {
	first := ts
	if e.count > 0 {
		first = e.firstTS
	}
	e.appendSized(key, value, headers, ts, recordSize(key, value, headers, ts-first, e.count))
}

// appendSized is append with the record's body size already computed
// (recordSize, for timestamp delta ts - the batch's first timestamp, at
// offset delta e.count), so the caller that measured the record to fit
// it into the batch does not measure it twice.
func (e *batchEncoder) appendSized(key, value []byte, headers []stages.Header, ts int64, body int) {
	if e.count == 0 {
		e.firstTS, e.maxTS = ts, ts
	}
	e.maxTS = max(e.maxTS, ts)
	delta := ts - e.firstTS
	b := binary.AppendVarint(e.buf, int64(body))
	b = append(b, 0) // record attributes: unused
	b = binary.AppendVarint(b, delta)
	b = binary.AppendVarint(b, int64(e.count))
	b = appendBytes(b, key)
	b = appendBytes(b, value)
	b = binary.AppendVarint(b, int64(len(headers)))
	for i := range headers {
		b = binary.AppendVarint(b, int64(len(headers[i].Key)))
		b = append(b, headers[i].Key...)
		b = appendBytes(b, headers[i].Value)
	}
	e.buf = b
	e.count++
}

// finish writes the header for the records appended so far (and the
// size prefix) and returns the whole batch. The result is valid until the
// next reset; stamp may rewrite its producer fields in place.
func (e *batchEncoder) finish(producerID int64, producerEpoch int16, baseSequence int32) ([]byte, error) {
	e.frame = e.buf
	attrs := e.attrs
	if e.codec != CompressionNone && e.count > 0 {
		// room for the prefix and header (written below), then the
		// records compressed
		out := append(e.out[:0], e.buf[:sizePrefix+batchHeaderSize]...)
		out, err := compress(out, e.buf[sizePrefix+batchHeaderSize:], e.codec)
		if err != nil {
			return nil, fmt.Errorf("%s compression: %w", e.codec, err)
		}
		e.out, e.frame = out, out
		attrs |= int16(e.codec)
	}
	binary.BigEndian.PutUint32(e.frame, uint32(len(e.frame)-sizePrefix))
	b := e.frame[sizePrefix:]
	binary.BigEndian.PutUint64(b, 0) // base offset: the broker assigns it
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-offLeaderEpoch))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], math.MaxUint32) // -1
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(b[offLastDelta:], uint32(max(e.count-1, 0)))
	binary.BigEndian.PutUint64(b[offFirstTS:], uint64(e.firstTS))
	binary.BigEndian.PutUint64(b[offMaxTS:], uint64(e.maxTS))
	binary.BigEndian.PutUint32(b[offCount:], uint32(e.count))
	stamp(b, producerID, producerEpoch, baseSequence)
	e.finished = true
	return b, nil
}

// stamp rewrites the producer id, producer epoch and base sequence of an
// encoded batch and its CRC (a batch re-sent under a new producer
// identity).
func stamp(b []byte, producerID int64, producerEpoch int16, baseSequence int32) {
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(producerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(producerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(baseSequence))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}
