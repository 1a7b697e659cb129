package fetch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"
	"unsafe"

	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// Record batches, Kafka's v2 format (magic 2): a 61-byte header, then the
// records, compressed as a whole when the attributes say so.
const (
	batchHeaderSize = 61
	batchLengthEnd  = 12 // baseOffset (8) and batchLength (4) precede the length's bytes
	crcStart        = 21 // the CRC covers attributes to the end

	attrCompression   = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is the error of record bytes that are not what Kafka's
// record format says (a bad length, CRC, varint or compressed payload).
var ErrCorrupt = errors.New("corrupt record batch")

// batchHeader is the part of a record batch's header the decoder uses.
type batchHeader struct {
	baseOffset      int64
	length          int // of the whole batch, header included
	magic           int8
	crc             uint32
	attributes      int16
	lastOffsetDelta int32
	firstTimestamp  int64
	maxTimestamp    int64
	producerID      int64
	numRecords      int32
}

// readHeader reads the header of the batch at the start of b. ok is
// false when b does not hold a whole batch (a response may end with a
// batch cut short: it is fetched again from its start next time).
func readHeader(b []byte) (h batchHeader, ok bool, err error) {
	if len(b) < batchLengthEnd+5 {
		return h, false, nil
	}
	h.baseOffset = int64(binary.BigEndian.Uint64(b))
	length := int32(binary.BigEndian.Uint32(b[8:]))
	h.magic = int8(b[16])
	if h.magic != 2 {
		return h, false, fmt.Errorf("%w: message format v%d (written by Kafka before 0.11, which Kafka 4 no longer serves): only v2 record batches are supported", ErrCorrupt, h.magic)
	}
	if length < batchHeaderSize-batchLengthEnd {
		return h, false, fmt.Errorf("%w: batch length %d at offset %d", ErrCorrupt, length, h.baseOffset)
	}
	h.length = batchLengthEnd + int(length)
	if len(b) < h.length {
		return h, false, nil
	}
	h.crc = binary.BigEndian.Uint32(b[17:])
	h.attributes = int16(binary.BigEndian.Uint16(b[21:]))
	h.lastOffsetDelta = int32(binary.BigEndian.Uint32(b[23:]))
	h.firstTimestamp = int64(binary.BigEndian.Uint64(b[27:]))
	h.maxTimestamp = int64(binary.BigEndian.Uint64(b[35:]))
	h.producerID = int64(binary.BigEndian.Uint64(b[43:]))
	h.numRecords = int32(binary.BigEndian.Uint32(b[57:]))
	if h.numRecords < 0 || h.lastOffsetDelta < 0 {
		return h, false, fmt.Errorf("%w: %d records, last offset delta %d at offset %d", ErrCorrupt, h.numRecords, h.lastOffsetDelta, h.baseOffset)
	}
	return h, true, nil
}

// nextOffset is the offset after the batch (compaction may have removed
// records from its end, not from its offset range).
func (h *batchHeader) nextOffset() int64 { return h.baseOffset + int64(h.lastOffsetDelta) + 1 }

// partitionDecoder decodes one partition's record batches of one fetch
// response into stages.Records that share the response's memory: keys,
// values, header keys and values point into the response buffer (or the
// buffer a compressed batch was decompressed into). Those buffers are
// never reused or written to, so the records stay valid for as long as
// anyone holds them (see stages.Record).
type partitionDecoder struct {
	tp     offsetstore.TopicPartition
	room   *room
	aborts *aborts
	codecs *codecs

	recs    []stages.Record
	headers []stages.Header // slab the records' headers are cut from
	next    int64
	payload int64 // the records' Size
	bytes   int64 // the records' footprint
	full    bool  // the room is used up
	// crcChecked: countChecked checked the CRC of the batch at hand.
	crcChecked bool
}

// countChecked returns how many records the leading uncompressed
// batches of raw can hold, at most what the room can keep, and the bytes
// of raw those batches take (their CRCs checked). It counts from each
// batch's bytes, after its CRC is checked, never from a header's claim
// alone; it stops at the first compressed, control, incomplete or
// corrupt batch (the decoding grows the records for those, and reports
// the corrupt one). Sizing the records once, instead of growing them
// batch by batch, copies no record: with many small batches per
// partition the copies were a quarter of the fetch path's CPU.
func countChecked(raw []byte, room *room) (n, checked int) {
	most := int(room.left/recordSize) + 1
	for b := raw; len(b) > 0 && n < most; {
		h, ok, err := readHeader(b)
		if err != nil || !ok || h.attributes&(attrCompression|attrControl) != 0 ||
			crc32.Checksum(b[crcStart:h.length], castagnoli) != h.crc {
			break
		}
		n += min(int(h.numRecords), (h.length-batchHeaderSize)/minRecordSize)
		checked += h.length
		b = b[h.length:]
	}
	return min(n, most), checked
}

// decodeRecords returns the records at or after at in raw (zero or more
// record batches, the last possibly cut short), the next offset to fetch,
// the records' payload (key, value and header bytes) and the memory they
// hold (footprint). Control batches (transaction markers), and with
// read_committed the batches of aborted transactions, are skipped but
// move next past them.
//
// It stops once the room is used up: the room counts each record's
// footprint (so records without key or value count too), and a record
// that does not fit is kept only when no record of the response was, so
// one huge record cannot stall the partition.
//
// A batch that is corrupt (see ErrCorrupt) ends the decoding: the records
// of the whole batches before it are returned with next at the corrupt
// batch, together with the error, so they are delivered and the fetch
// stops exactly at the bytes that are wrong.
func decodeRecords(tp offsetstore.TopicPartition, raw []byte, at int64, room *room, ab *aborts, cs *codecs) (recs []stages.Record, next, payload, bytes int64, err error) {
	d := partitionDecoder{tp: tp, room: room, aborts: ab, codecs: cs, next: at}
	n, checked := countChecked(raw, room)
	if n > 0 {
		d.recs = make([]stages.Record, 0, n)
	}
	for b := raw; len(b) > 0 && !d.full; {
		h, ok, err := readHeader(b)
		if err != nil {
			return d.recs, d.next, d.payload, d.bytes, err
		}
		if !ok {
			break
		}
		d.crcChecked = len(raw)-len(b)+h.length <= checked
		if err := d.batch(&h, b[:h.length]); err != nil {
			return d.recs, d.next, d.payload, d.bytes, err
		}
		b = b[h.length:]
	}
	return d.recs, d.next, d.payload, d.bytes, nil
}

// minRecordSize is the fewest bytes a record takes: seven one-byte
// fields (length, attributes, the two deltas, key and value lengths, the
// header count).
const minRecordSize = 7

// batch decodes one whole batch. On an error it leaves the decoder as it
// was before the batch: a corrupt batch delivers none of its records.
func (d *partitionDecoder) batch(h *batchHeader, b []byte) error {
	if !d.crcChecked && crc32.Checksum(b[crcStart:], castagnoli) != h.crc {
		return fmt.Errorf("%w: CRC mismatch in the batch at offset %d", ErrCorrupt, h.baseOffset)
	}
	if h.nextOffset() <= d.next {
		return nil // wholly before the position fetched
	}
	payload, err := d.codecs.decompress(h.attributes&attrCompression, b[batchHeaderSize:])
	if err != nil {
		return fmt.Errorf("%w: batch at offset %d: %w", ErrCorrupt, h.baseOffset, err)
	}
	switch {
	case h.attributes&attrControl != 0:
		d.aborts.reach(h.baseOffset)
		if controlType(payload) == controlAbort {
			d.aborts.end(h.producerID)
		}
		d.next = h.nextOffset()
		return nil
	case d.aborts.skip(h):
		d.next = h.nextOffset()
		return nil
	}
	// Sized now, after the CRC check, for what the bytes can hold and
	// the room can keep, never for what the header claims alone.
	first := len(d.recs)
	if n := min(int(h.numRecords), len(payload)/minRecordSize, int(d.room.left/recordSize)+1); n > len(d.recs[len(d.recs):cap(d.recs)]) {
		d.grow(n)
	}
	saved := *d
	savedRoom := *d.room
	fail := func(err error) error {
		clear(d.recs[first:])
		if n := len(saved.headers); n < len(d.headers) && cap(d.headers) == cap(saved.headers) {
			clear(d.headers[n:]) // the same slab: forget this batch's headers
		}
		// The records before the batch stay in the array they are in
		// now: one that grew during the batch holds them too, and the
		// one before it has this batch's records past first (the slots
		// the next record is decoded into must be zero).
		recs := d.recs[:first]
		*d = saved
		d.recs = recs
		*d.room = savedRoom
		return err
	}
	r := recordReader{b: payload}
	kept := int64(0)          // payload of this batch's records kept
	spanFrom, spanTo := -1, 0 // the bytes of payload the kept records take
	for i := int32(0); i < h.numRecords; i++ {
		from := r.i
		// decoded in place, into the next slot (zero: never used, or
		// cleared when its last record was not kept): no copy of the
		// record, and no bulk write barrier for one
		if len(d.recs) == cap(d.recs) {
			d.grow(1)
		}
		d.recs = d.recs[:len(d.recs)+1]
		rec := &d.recs[len(d.recs)-1]
		size, err := r.record(h, d.tp, &d.headers, rec)
		if err != nil {
			d.unslot()
			return fail(fmt.Errorf("%w: record %d of the batch at offset %d: %w", ErrCorrupt, i, h.baseOffset, err))
		}
		if rec.Offset < d.next {
			d.unslot()
			continue
		}
		fp := footprint(size, len(rec.Headers))
		if fp > d.room.left && d.room.kept {
			d.unslot()
			d.full = true
			break
		}
		d.room.left -= fp
		d.room.kept = true
		d.payload += size
		d.bytes += fp
		kept += size
		if spanFrom < 0 {
			spanFrom = from
		}
		spanTo = r.i
		d.next = rec.Offset + 1
	}
	if len(d.recs) > first {
		// the wire bytes the kept records came from (for the next
		// request's size, see Stream.wireMaxBytes): the whole batch, or
		// the part of it read when the room cut it short
		wire := int64(h.length)
		if d.full && len(payload) > 0 {
			wire = wire * int64(r.i) / int64(len(payload))
		}
		d.room.wire += wire
	}
	if !d.full {
		if r.left() > 0 {
			// Java refuses this too: the records past the count would
			// be dropped without a word.
			return fail(fmt.Errorf("%w: the batch at offset %d says it holds %d records, and has more bytes after them (%d)",
				ErrCorrupt, h.baseOffset, h.numRecords, r.left()))
		}
		d.next = max(d.next, h.nextOffset())
	}
	if h.attributes&attrCompression != 0 && len(d.recs) > first && 2*(spanTo-spanFrom) < len(payload) {
		// The records kept take less than half of the decompressed
		// batch (the room cut it short, or most of it is before the
		// position): copy them out, so they do not pin the rest.
		copyOut(d.recs[first:], kept)
	}
	return nil
}

// grow makes room for n more records. The capacity at least doubles (up
// to what the room can keep): growing by what each batch needs, or by
// append's quarter for a large slice, copied every record decoded so
// far again and again, a quarter of the fetch path's CPU at 64
// partitions of small batches.
func (d *partitionDecoder) grow(n int) {
	want := len(d.recs) + n
	c := max(want, min(2*cap(d.recs), len(d.recs)+int(d.room.left/recordSize)+1))
	recs := make([]stages.Record, len(d.recs), c)
	copy(recs, d.recs)
	d.recs = recs
}

// unslot gives back the last slot of d.recs, whose record is not kept:
// its headers come off the end of the slab, and the slot and the headers
// are cleared, so neither points into a batch for it and the slot is
// zero for the next record.
func (d *partitionDecoder) unslot() {
	rec := &d.recs[len(d.recs)-1]
	if n := len(rec.Headers); n > 0 {
		clear(rec.Headers)
		d.headers = d.headers[:len(d.headers)-n]
	}
	*rec = stages.Record{}
	d.recs = d.recs[:len(d.recs)-1]
}

// copyOut moves the keys, values and headers of recs (payload bytes in
// all) into one new buffer of their own.
func copyOut(recs []stages.Record, payload int64) {
	buf := make([]byte, 0, payload)
	take := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		start := len(buf)
		buf = append(buf, b...)
		return buf[start:len(buf):len(buf)]
	}
	for i := range recs {
		r := &recs[i]
		r.Key = take(r.Key)
		r.Value = take(r.Value)
		for j := range r.Headers { // the record's own part of the slab
			hd := &r.Headers[j]
			start := len(buf)
			buf = append(buf, hd.Key...)
			hd.Key = bytesString(buf[start:])
			hd.Value = take(hd.Value)
		}
	}
}

// controlType is the type of the control record of a control batch's
// payload (its key: version int16, type int16); -1 if unreadable.
func controlType(payload []byte) int16 {
	_, i := zigzag(payload, 0) // length
	if i >= 0 {
		i = min(i+1, len(payload)) // attributes
	}
	_, i = zigzag(payload, i) // timestamp delta
	_, i = zigzag(payload, i) // offset delta
	key, i := lengthPrefixed(payload, i)
	if i < 0 || len(key) < 4 {
		return -1
	}
	return int16(binary.BigEndian.Uint16(key[2:]))
}

// recordReader reads the records of a batch's (decompressed) payload.
// It moves an index, not the slice: advancing writes no pointer, so a
// reader behind a pointer costs no write barrier while the collector
// runs (about 7% of the fetch path's CPU when it resliced).
type recordReader struct {
	b []byte // the bytes to read, never resliced while reading
	i int    // the next byte to read
}

var errShort = errors.New("record runs past the end of its batch")

// left is how many bytes are still to read.
func (r *recordReader) left() int { return len(r.b) - r.i }

// record reads one record into rec, a zero Record; size is its payload
// (key, value, headers) as stages.Record.Size counts it. On an error rec
// may hold some fields (never headers).
//
// It reads the record's fields with zigzag on a local slice and index
// (the hot loop of the fetch path: about a third of its CPU before).
func (r *recordReader) record(h *batchHeader, tp offsetstore.TopicPartition, slab *[]stages.Header, rec *stages.Record) (size int64, err error) {
	length, i := zigzag(r.b, r.i)
	if i < 0 || length < 0 || length > int64(len(r.b)-i) {
		return 0, errShort
	}
	b := r.b[:i+int(length)] // the record's bytes end here
	r.i = len(b)
	i++ // attributes: unused
	tsDelta, i := zigzag(b, i)
	offDelta, i := zigzag(b, i)
	key, i := lengthPrefixed(b, i)
	value, i := lengthPrefixed(b, i)
	nh, i := zigzag(b, i)
	if i < 0 || nh < 0 || nh > int64(len(b)-i) {
		return 0, errShort
	}
	ts := h.firstTimestamp + tsDelta
	if h.attributes&attrLogAppendTime != 0 {
		ts = h.maxTimestamp
	}
	rec.Topic, rec.Partition, rec.Offset = tp.Topic, tp.Partition, h.baseOffset+offDelta
	rec.Key, rec.Value, rec.Timestamp = key, value, time.UnixMilli(ts)
	size = int64(len(key) + len(value))
	if nh > 0 {
		if cap(*slab)-len(*slab) < int(nh) {
			*slab = make([]stages.Header, 0, max(int(nh), 256))
		}
		start := len(*slab)
		for range nh {
			var hk, hv []byte
			hk, i = lengthPrefixed(b, i)
			hv, i = lengthPrefixed(b, i)
			if i < 0 {
				clear((*slab)[start:])
				*slab = (*slab)[:start]
				return 0, errShort
			}
			*slab = append(*slab, stages.Header{Key: bytesString(hk), Value: hv})
			size += int64(len(hk) + len(hv))
		}
		rec.Headers = (*slab)[start:len(*slab):len(*slab)]
	}
	return size, nil
}

// zigzag reads the zigzag varint at b[i:] and returns it with the index
// after it, or -1 for i if there is none (i may already be -1: the
// failure of an earlier field carries through to the one check). A
// one-byte varint (most of a record's: small deltas, short lengths) is
// read inline; the rest by zigzagLong.
func zigzag(b []byte, i int) (int64, int) {
	if uint(i) < uint(len(b)) {
		if c := b[i]; c < 0x80 {
			return int64(c>>1) ^ -int64(c&1), i + 1
		}
	}
	return zigzagLong(b, i)
}

func zigzagLong(b []byte, i int) (int64, int) {
	if uint(i) >= uint(len(b)) {
		return 0, -1
	}
	if i+1 < len(b) && b[i+1] < 0x80 { // two bytes: lengths and deltas under 8192
		u := uint64(b[i]&0x7f) | uint64(b[i+1])<<7
		return int64(u>>1) ^ -int64(u&1), i + 2
	}
	v, n := binary.Varint(b[i:])
	if n <= 0 {
		return 0, -1
	}
	return v, i + n
}

// lengthPrefixed reads a length-prefixed field at b[i:] (nil for length
// -1), capped so that an append never writes into the next field, and
// the index after it; -1 as zigzag.
func lengthPrefixed(b []byte, i int) ([]byte, int) {
	n, i := zigzag(b, i)
	if i < 0 || n < -1 || n > int64(len(b)-i) {
		return nil, -1
	}
	if n == -1 {
		return nil, i
	}
	end := i + int(n)
	return b[i:end:end], end
}

// bytesString is b as a string without a copy: b is never written to
// (it is part of a response buffer, see partitionDecoder).
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// Decode returns the records of raw (whole v2 record batches, compressed
// or not, as a fetch response holds them) for topic and partition, as the
// fetch path decodes them: control batches skipped, no transaction
// filtering (read_uncommitted). It exists so that code writing batches
// (the producer) can check itself against the decoder that reads them.
func Decode(topic string, partition int32, raw []byte) ([]stages.Record, error) {
	cs := newCodecs()
	defer cs.close()
	tp := offsetstore.TopicPartition{Topic: topic, Partition: partition}
	recs, _, _, _, err := decodeRecords(tp, raw, 0, &room{left: math.MaxInt64}, nil, cs)
	return recs, err
}
