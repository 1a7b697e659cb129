package fetch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// testingT is what the helpers need of a test: *testing.T, *testing.F and
// *rapid.T are one.
type testingT interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// testBatch is a record batch to encode.
type testBatch struct {
	base     int64
	codec    int16
	attrs    int16 // besides the codec: transactional, control, log-append time
	producer int64
	first    int64 // first timestamp, ms
	records  []stages.Record
	// lastDelta, if above the records' last offset delta, is the batch's
	// last offset delta (records compacted away from its end)
	lastDelta int32
	xerial    bool // snappy in the Java client's framing
}

// encode writes the batch in Kafka's v2 format, as a broker returns it.
func (tb testBatch) encode(t testingT) []byte {
	t.Helper()
	var recs []byte
	last := tb.lastDelta
	for _, r := range tb.records {
		delta := int32(r.Offset - tb.base)
		last = max(last, delta)
		kr := kmsg.Record{TimestampDelta64: r.Timestamp.UnixMilli() - tb.first, OffsetDelta: delta, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // the body, after a 1-byte varint 0
		recs = kr.AppendTo(recs)
	}
	payload := compress(t, tb.codec, recs, tb.xerial)
	b := kmsg.RecordBatch{
		FirstOffset: tb.base, Magic: 2, Attributes: tb.attrs | tb.codec, LastOffsetDelta: last,
		FirstTimestamp: tb.first, MaxTimestamp: tb.first + 1000, ProducerID: tb.producer, ProducerEpoch: 0,
		FirstSequence: -1, NumRecords: int32(len(tb.records)), Records: payload,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-batchLengthEnd))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[crcStart:], castagnoli))
	return out
}

func compress(t testingT, codec int16, src []byte, xerial bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch codec {
	case 0:
		return src
	case 1:
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(src)
		_ = w.Close()
	case 2:
		if !xerial {
			return snappy.Encode(nil, src)
		}
		buf.Write(xerialMagic)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		for len(src) > 0 { // two blocks, to test the framing
			n := min(len(src), max(1, len(src)/2+1))
			block := snappy.Encode(nil, src[:n])
			_ = binary.Write(&buf, binary.BigEndian, uint32(len(block)))
			buf.Write(block)
			src = src[n:]
		}
	case 3:
		w := lz4.NewWriter(&buf)
		_, _ = w.Write(src)
		_ = w.Close()
	case 4:
		w, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		return w.EncodeAll(src, nil)
	}
	return buf.Bytes()
}

var tp = offsetstore.TopicPartition{Topic: "t", Partition: 3}

func rec(offset int64, key, value string, headers ...string) stages.Record {
	r := stages.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: offset, Timestamp: time.UnixMilli(1_700_000_000_000 + offset)}
	if key != "<nil>" {
		r.Key = []byte(key)
	}
	if value != "<nil>" {
		r.Value = []byte(value)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, stages.Header{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

func sameRecords(t testingT, got, want []stages.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Topic != w.Topic || g.Partition != w.Partition || g.Offset != w.Offset || !g.Timestamp.Equal(w.Timestamp) ||
			!sameBytes(g.Key, w.Key) || !sameBytes(g.Value, w.Value) || len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
		for j := range g.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !sameBytes(g.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d: got %+v, want %+v", i, j, g.Headers[j], w.Headers[j])
			}
		}
		if cap(g.Key) != len(g.Key) || cap(g.Value) != len(g.Value) {
			t.Fatalf("record %d: key or value has spare capacity (an append would write into the next field)", i)
		}
	}
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// TestDecodeRecords: the cases a broker's answer can hold.
func TestDecodeRecords(t *testing.T) {
	two := []stages.Record{rec(10, "a", "1", "h", "x"), rec(11, "<nil>", "<nil>")}
	tests := []struct {
		name    string
		batches []testBatch
		at      int64
		room    int64
		cut     int // bytes cut from the end of the response
		want    []stages.Record
		next    int64
		err     error
	}{
		{name: "one batch", batches: []testBatch{{base: 10, records: two}}, at: 10, want: two, next: 12},
		{name: "records before the position are skipped", batches: []testBatch{{base: 10, records: two}}, at: 11, want: two[1:], next: 12},
		{name: "a batch wholly before the position", batches: []testBatch{{base: 10, records: two}, {base: 12, records: []stages.Record{rec(12, "k", "v")}}},
			at: 12, want: []stages.Record{rec(12, "k", "v")}, next: 13},
		{name: "compaction removed the batch's last offsets", batches: []testBatch{{base: 10, records: two, lastDelta: 5}}, at: 10, want: two, next: 16},
		{name: "a batch cut short at the end is left for the next fetch",
			batches: []testBatch{{base: 10, records: two}, {base: 12, records: []stages.Record{rec(12, "k", "v")}}}, cut: 3, at: 10, want: two, next: 12},
		{name: "room for one record keeps one", batches: []testBatch{{base: 10, records: two}}, at: 10, room: 1, want: two[:1], next: 11},
		{name: "a control batch moves next past the marker",
			batches: []testBatch{{base: 10, records: two}, {base: 12, attrs: attrControl | attrTransactional, records: []stages.Record{controlRecord(12, 1)}}},
			at:      10, want: two, next: 13},
		{name: "log append time", batches: []testBatch{{base: 5, attrs: attrLogAppendTime, first: 7, records: []stages.Record{rec(5, "k", "v")}}},
			at: 5, want: []stages.Record{func() stages.Record { r := rec(5, "k", "v"); r.Timestamp = time.UnixMilli(1007); return r }()}, next: 6},
		{name: "empty response", at: 4, next: 4},
	}
	for codec := int16(0); codec <= 4; codec++ {
		for _, tt := range tests {
			t.Run(tt.name+"/codec"+string(rune('0'+codec)), func(t *testing.T) {
				var raw []byte
				for _, b := range tt.batches {
					if b.attrs&attrControl == 0 {
						b.codec = codec
					}
					if b.first == 0 && len(b.records) > 0 {
						b.first = b.records[0].Timestamp.UnixMilli()
					}
					raw = append(raw, b.encode(t)...)
				}
				raw = raw[:len(raw)-tt.cut]
				room := &room{left: 1 << 30}
				if tt.room > 0 {
					room.left = tt.room
				}
				cs := newCodecs()
				defer cs.close()
				got, next, _, size, err := decodeRecords(tp, raw, tt.at, room, nil, cs)
				if !errors.Is(err, tt.err) {
					t.Fatalf("err %v, want %v", err, tt.err)
				}
				sameRecords(t, got, tt.want)
				if next != tt.next {
					t.Fatalf("next %d, want %d", next, tt.next)
				}
				var want int64 // payload plus bookkeeping: the budget's unit
				for _, r := range tt.want {
					want += int64(r.Size()) + recordSize + int64(len(r.Headers))*headerSize
				}
				if size != want {
					t.Fatalf("memory %d, want %d", size, want)
				}
			})
		}
	}
}

// controlRecord is a transaction marker record (commit 1, abort 0).
func controlRecord(offset int64, typ int16) stages.Record {
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	return stages.Record{Offset: offset, Key: key, Value: []byte{0, 0, 0, 0, 0, 0}, Timestamp: time.UnixMilli(1_700_000_000_000 + offset)}
}

// TestDecodeRejectsCorruption: what is not a record batch fails with
// ErrCorrupt, never a panic or a silent skip.
func TestDecodeRejectsCorruption(t *testing.T) {
	good := testBatch{base: 0, first: 1_700_000_000_000, records: []stages.Record{rec(0, "k", "value")}}.encode(t)
	flip := func(i int) []byte { b := slices.Clone(good); b[i] ^= 0xff; return b }
	old := slices.Clone(good)
	old[16] = 1
	for name, raw := range map[string][]byte{
		"CRC mismatch":       flip(len(good) - 1),
		"bad crc field":      flip(17),
		"old message format": old,
		"negative length":    func() []byte { b := slices.Clone(good); binary.BigEndian.PutUint32(b[8:], 0xffffff00); return b }(),
	} {
		t.Run(name, func(t *testing.T) {
			cs := newCodecs()
			defer cs.close()
			_, _, _, _, err := decodeRecords(tp, raw, 0, &room{left: 1 << 20}, nil, cs)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestDecodeProperty: any records, in any number of batches with any
// codec, decode to exactly what was encoded.
func TestDecodeProperty(t *testing.T) {
	cs := newCodecs()
	defer cs.close()
	rapid.Check(t, func(rt *rapid.T) {
		var raw []byte
		var want []stages.Record
		offset := int64(rapid.IntRange(0, 1000).Draw(rt, "base"))
		for range rapid.IntRange(1, 4).Draw(rt, "batches") {
			tb := testBatch{base: offset, codec: int16(rapid.IntRange(0, 4).Draw(rt, "codec")), xerial: rapid.Bool().Draw(rt, "xerial"),
				first: 1_700_000_000_000}
			for range rapid.IntRange(1, 20).Draw(rt, "records") {
				// gaps (compaction) and timestamps far enough apart for
				// varints of one to four bytes
				offset += int64(rapid.SampledFrom([]int{1, 2, 3, 70, 9000}).Draw(rt, "gap"))
				r := stages.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: offset,
					Timestamp: time.UnixMilli(tb.first + int64(rapid.IntRange(-1000, 1000).Draw(rt, "ts"))*
						int64(rapid.SampledFrom([]int{1, 50, 3000}).Draw(rt, "ts scale")))}
				if rapid.Bool().Draw(rt, "has key") {
					r.Key = rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(rt, "key")
				}
				if rapid.IntRange(0, 9).Draw(rt, "value kind") > 0 {
					r.Value = rapid.SliceOfN(rapid.Byte(), 0, rapid.SampledFrom([]int{30, 300, 9000}).Draw(rt, "value max")).Draw(rt, "value")
				}
				for range rapid.IntRange(0, 3).Draw(rt, "headers") {
					r.Headers = append(r.Headers, stages.Header{Key: rapid.StringN(0, 10, -1).Draw(rt, "hkey"),
						Value: rapid.SliceOfN(rapid.Byte(), 0, 20).Draw(rt, "hvalue")})
				}
				tb.records = append(tb.records, r)
			}
			tb.base = tb.records[0].Offset
			raw = append(raw, tb.encode(rt)...)
			want = append(want, tb.records...)
			offset++
		}
		at := want[rapid.IntRange(0, len(want)-1).Draw(rt, "start")].Offset
		var from []stages.Record
		for _, r := range want {
			if r.Offset >= at {
				from = append(from, r)
			}
		}
		got, next, _, _, err := decodeRecords(tp, raw, at, &room{left: 1 << 30}, nil, cs)
		if err != nil {
			rt.Fatal(err)
		}
		sameRecords(rt, got, from)
		if next != want[len(want)-1].Offset+1 {
			rt.Fatalf("next %d, want %d", next, want[len(want)-1].Offset+1)
		}
	})
}

// FuzzZigzagMatchesVarint: the record decoder's varint reader (one and
// two bytes inline) reads what encoding/binary's Varint reads, at any
// index of any bytes, and fails where it fails.
func FuzzZigzagMatchesVarint(f *testing.F) {
	for _, v := range []int64{0, -1, 1, 63, -64, 64, 100, -8192, 8191, 8192, 1 << 40, math.MinInt64, math.MaxInt64} {
		f.Add(binary.AppendVarint([]byte{0xff}, v), 1)
	}
	f.Add([]byte{0x80, 0x80}, 0)
	f.Add([]byte{0x80, 0x00}, 0) // not minimal: binary.Varint reads it
	f.Fuzz(func(t *testing.T, b []byte, i int) {
		i = min(max(i, -1), len(b)+1)
		v, next := zigzag(b, i)
		if i < 0 || i >= len(b) {
			if next != -1 {
				t.Fatalf("zigzag(%x, %d) = %d, %d: want a failure", b, i, v, next)
			}
			return
		}
		want, n := binary.Varint(b[i:])
		if n <= 0 {
			if next != -1 {
				t.Fatalf("zigzag(%x, %d) = %d, %d: binary.Varint fails (%d)", b, i, v, next, n)
			}
			return
		}
		if v != want || next != i+n {
			t.Fatalf("zigzag(%x, %d) = %d, %d: want %d, %d", b, i, v, next, want, i+n)
		}
	})
}

// FuzzDecodeRecords: any bytes as a partition's record batches: no panic,
// and what decodes keeps the decoder's promises.
func FuzzDecodeRecords(f *testing.F) {
	recs := []stages.Record{rec(0, "key", "value", "h", "v"), rec(1, "<nil>", "<nil>"), rec(3, "", "x")}
	for codec := int16(0); codec <= 4; codec++ {
		f.Add(testBatch{base: 0, codec: codec, first: 1_700_000_000_000, records: recs}.encode(f), int64(0))
	}
	f.Add(testBatch{base: 0, codec: 2, xerial: true, first: 1_700_000_000_000, records: recs}.encode(f), int64(1))
	f.Add(testBatch{base: 7, attrs: attrControl | attrTransactional, records: []stages.Record{controlRecord(7, 0)}}.encode(f), int64(7))
	cs := newCodecs()
	defer cs.close()
	f.Fuzz(func(t *testing.T, raw []byte, at int64) {
		if at < 0 {
			at = -at
		}
		got, next, payload, size, err := decodeRecords(tp, raw, at, &room{left: 1 << 20}, nil, cs)
		// with an error too: the records of the batches before the
		// corrupt one keep every promise
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
		if next < at {
			t.Fatalf("next %d before the position %d", next, at)
		}
		var total, totalPayload int64
		for i, r := range got {
			if r.Offset < at || r.Offset >= next || (i > 0 && r.Offset <= got[i-1].Offset) {
				t.Fatalf("record %d at offset %d (position %d, next %d, previous %v)", i, r.Offset, at, next, got[max(i-1, 0)].Offset)
			}
			total += footprint(int64(r.Size()), len(r.Headers))
			totalPayload += int64(r.Size())
		}
		if totalPayload != payload {
			t.Fatalf("payload %d, records hold %d", payload, totalPayload)
		}
		if total != size {
			t.Fatalf("size %d, records hold %d (payload and bookkeeping)", size, total)
		}
	})
}

// FuzzDecodePayload: any bytes as the (compressed) records of a batch
// whose header and CRC are right, so the fuzzer reaches past the CRC
// check into decompression and record parsing.
func FuzzDecodePayload(f *testing.F) {
	recs := []stages.Record{rec(0, "key", "value", "h", "v"), rec(1, "<nil>", "<nil>"), rec(2, "", "x")}
	for codec := int16(0); codec <= 4; codec++ {
		b := testBatch{base: 0, codec: codec, first: 1_700_000_000_000, records: recs}.encode(f)
		f.Add(b[batchHeaderSize:], uint8(codec), uint16(3), false)
	}
	cs := newCodecs()
	defer cs.close()
	f.Fuzz(func(t *testing.T, payload []byte, codec uint8, n uint16, control bool) {
		b := kmsg.RecordBatch{Magic: 2, Attributes: int16(codec % 8), LastOffsetDelta: int32(n), NumRecords: int32(n), Records: payload}
		if control {
			b.Attributes |= attrControl | attrTransactional
		}
		raw := b.AppendTo(nil)
		binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-batchLengthEnd))
		binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[crcStart:], castagnoli))
		got, next, _, _, err := decodeRecords(tp, raw, 0, &room{left: 1 << 20}, nil, cs)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			if len(got) > 0 || next != 0 {
				t.Fatalf("a corrupt batch delivered %d records, next %d", len(got), next)
			}
			return
		}
		if len(got) > int(n) || next != int64(n)+1 && len(got) > 0 && next <= got[len(got)-1].Offset {
			t.Fatalf("%d records of %d, next %d", len(got), n, next)
		}
	})
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeAllocatesAfterCheck: what the decoder
// allocates for records is sized after a batch's CRC is checked, for what
// its bytes can hold and the room can keep, never from a header's claim.
func TestDecodeAllocatesAfterCheck(t *testing.T) {
	header := func(codec int16, count int32, crcOK bool) []byte {
		hb := kmsg.RecordBatch{Magic: 2, Attributes: codec, NumRecords: count}
		b := hb.AppendTo(nil)
		binary.BigEndian.PutUint32(b[8:], uint32(len(b)-batchLengthEnd))
		if crcOK {
			binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[crcStart:], castagnoli))
		}
		return b
	}
	empty := make([]stages.Record, 10_000)
	for i := range empty {
		empty[i] = stages.Record{Offset: int64(i), Timestamp: time.UnixMilli(1_700_000_000_000)}
	}
	many := testBatch{base: 0, first: 1_700_000_000_000, records: empty}.encode(t)
	tests := []struct {
		name    string
		raw     []byte
		room    int64
		corrupt bool
		kept    int
	}{
		// 8 batch headers of 61 bytes claiming 2^30 zstd records each,
		// CRC wrong: sized from the headers, 64 MiB would be allocated
		{name: "488 bytes of corrupt zstd headers", raw: bytes.Repeat(header(4, 1<<30, false), 8), room: 1 << 30, corrupt: true},
		{name: "a count the bytes cannot hold", raw: header(0, 1<<30, true), room: 1 << 30, corrupt: true},
		{name: "a count the room cannot keep", raw: many, room: 10 * recordSize, kept: 10},
	}
	cs := newCodecs()
	defer cs.close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []stages.Record
			var err error
			n := allocated(func() {
				got, _, _, _, err = decodeRecords(tp, tt.raw, 0, &room{left: tt.room}, nil, cs)
			})
			if errors.Is(err, ErrCorrupt) != tt.corrupt {
				t.Fatalf("err %v, corrupt %v", err, tt.corrupt)
			}
			if len(got) != tt.kept {
				t.Fatalf("kept %d records, want %d", len(got), tt.kept)
			}
			if n > 64<<10 {
				t.Fatalf("allocated %d bytes for %d bytes of input", n, len(tt.raw))
			}
		})
	}
}

// TestDecodeCopiesRecordsOutOfACutBatch: records kept
// from a compressed batch that the room cuts short (or whose head is
// before the position) are copied out of it, so they do not pin the whole
// decompressed batch (20 fetches keeping one record each of a batch that
// decompresses to 2 MiB would hold 40 MiB).
func TestDecodeCopiesRecordsOutOfACutBatch(t *testing.T) {
	value := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 32<<10) }
	var recs []stages.Record
	for i := range 64 {
		r := rec(int64(i), "k", "<nil>", "h", "v")
		r.Value = value(i)
		recs = append(recs, r)
	}
	raw := testBatch{base: 0, codec: 4, first: recs[0].Timestamp.UnixMilli(), records: recs}.encode(t)
	cs := newCodecs()
	defer cs.close()
	for _, tt := range []struct {
		name string
		at   int64
		room int64
		want []stages.Record
	}{
		{name: "cut short by the room", at: 0, room: 1, want: recs[:1]},
		{name: "most of it before the position", at: 60, room: 1 << 30, want: recs[60:]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var held [][]stages.Record
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for range 20 {
				got, _, _, _, err := decodeRecords(tp, raw, tt.at, &room{left: tt.room}, nil, cs)
				if err != nil {
					t.Fatal(err)
				}
				sameRecords(t, got, tt.want)
				held = append(held, got)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			if grown > 8<<20 {
				t.Fatalf("20 decodes keeping %d records each hold %d MiB", len(tt.want), grown>>20)
			}
			runtime.KeepAlive(held)
		})
	}
}

// TestDecodeRoomCountsFootprint: the room counts what a
// kept record holds (its Record and Header values too), so records
// without key or value are limited like any other.
func TestDecodeRoomCountsFootprint(t *testing.T) {
	mk := func(n int, headers ...string) []stages.Record {
		out := make([]stages.Record, n)
		for i := range out {
			out[i] = rec(int64(i), "<nil>", "<nil>", headers...)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		recs []stages.Record
		room int64
		kept int
	}{
		{name: "no key, no value", recs: mk(100), room: 10 * recordSize, kept: 10},
		{name: "empty headers", recs: mk(100, "", ""), room: 10 * (recordSize + headerSize), kept: 10},
		{name: "room for less than one keeps one", recs: mk(100), room: 1, kept: 1},
	} {
		for _, codec := range []int16{0, 4} {
			t.Run(fmt.Sprintf("%s/codec%d", tt.name, codec), func(t *testing.T) {
				raw := testBatch{base: 0, codec: codec, first: tt.recs[0].Timestamp.UnixMilli(), records: tt.recs}.encode(t)
				cs := newCodecs()
				defer cs.close()
				got, next, _, size, err := decodeRecords(tp, raw, 0, &room{left: tt.room}, nil, cs)
				if err != nil {
					t.Fatal(err)
				}
				sameRecords(t, got, tt.recs[:tt.kept])
				if next != int64(tt.kept) {
					t.Fatalf("next %d, want %d", next, tt.kept)
				}
				if size > max(tt.room, size/int64(tt.kept)) {
					t.Fatalf("kept %d bytes in a room of %d", size, tt.room)
				}
			})
		}
	}
}

// withCount is a batch whose header claims count records (CRC fixed).
func withCount(t testingT, tb testBatch, count int32) []byte {
	b := tb.encode(t)
	binary.BigEndian.PutUint32(b[57:], uint32(count))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[crcStart:], castagnoli))
	return b
}

// TestDecodeRefusesCountMismatch: a batch whose record
// count disagrees with its records is corrupt (Java refuses it too); a
// count lower than the records must not silently drop the rest.
func TestDecodeRefusesCountMismatch(t *testing.T) {
	three := []stages.Record{rec(0, "a", "1"), rec(1, "b", "2"), rec(2, "c", "3")}
	for _, tt := range []struct {
		name  string
		count int32
		ok    bool
	}{
		{name: "count below the records", count: 2},
		{name: "count above the records", count: 4},
		{name: "count zero", count: 0},
		{name: "count right", count: 3, ok: true},
	} {
		for _, codec := range []int16{0, 1, 4} {
			t.Run(fmt.Sprintf("%s/codec%d", tt.name, codec), func(t *testing.T) {
				raw := withCount(t, testBatch{base: 0, codec: codec, first: three[0].Timestamp.UnixMilli(), records: three}, tt.count)
				cs := newCodecs()
				defer cs.close()
				got, next, _, _, err := decodeRecords(tp, raw, 0, &room{left: 1 << 20}, nil, cs)
				if tt.ok {
					if err != nil {
						t.Fatal(err)
					}
					sameRecords(t, got, three)
					return
				}
				if !errors.Is(err, ErrCorrupt) || len(got) != 0 || next != 0 {
					t.Fatalf("err %v, %d records, next %d: want ErrCorrupt, nothing kept, next 0", err, len(got), next)
				}
			})
		}
	}
}

// TestDecodeDeliversGoodBatchesBeforeCorrupt: the records
// of the whole batches before a corrupt one are returned with the error
// and next at the corrupt batch; none of the corrupt batch's records, nor
// anything after it.
func TestDecodeDeliversGoodBatchesBeforeCorrupt(t *testing.T) {
	first := int64(1_700_000_000_000)
	good := append(testBatch{base: 0, first: first, records: []stages.Record{rec(0, "a", "1"), rec(1, "b", "2")}}.encode(t),
		testBatch{base: 2, first: first, records: []stages.Record{rec(2, "c", "3")}}.encode(t)...)
	bad := testBatch{base: 3, first: first, records: []stages.Record{rec(3, "d", "4"), rec(4, "e", "5")}}.encode(t)
	after := testBatch{base: 5, first: first, records: []stages.Record{rec(5, "f", "6")}}.encode(t)
	corruptions := []struct {
		name  string
		batch []byte
		says  string
	}{
		{name: "CRC mismatch", batch: func() []byte { b := slices.Clone(bad); b[len(b)-1] ^= 0xff; return b }(), says: "CRC mismatch in the batch at offset 3"},
		{name: "old message format", batch: func() []byte { b := slices.Clone(bad); b[16] = 1; return b }(), says: "message format v1"},
		{name: "record runs past its batch", batch: withCount(t, testBatch{base: 3, first: first, records: []stages.Record{rec(3, "d", "4")}}, 2),
			says: "record 1 of the batch at offset 3"},
		{name: "count below the records", batch: withCount(t, testBatch{base: 3, first: first, records: []stages.Record{rec(3, "d", "4"), rec(4, "e", "5")}}, 1),
			says: "the batch at offset 3 says it holds 1 records"},
	}
	cs := newCodecs()
	defer cs.close()
	for _, c := range corruptions {
		t.Run(c.name, func(t *testing.T) {
			raw := slices.Concat(good, c.batch, after)
			got, next, _, size, err := decodeRecords(tp, raw, 0, &room{left: 1 << 20}, nil, cs)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("err %v: want ErrCorrupt saying %q", err, c.says)
			}
			sameRecords(t, got, []stages.Record{rec(0, "a", "1"), rec(1, "b", "2"), rec(2, "c", "3")})
			if next != 3 {
				t.Fatalf("next %d, want 3 (the corrupt batch)", next)
			}
			var want int64
			for _, r := range got {
				want += footprint(int64(r.Size()), len(r.Headers))
			}
			if size != want {
				t.Fatalf("size %d, the records hold %d", size, want)
			}
			// fetched again from the corrupt batch: nothing, the same error
			got, next, _, _, err = decodeRecords(tp, raw[len(good):], 3, &room{left: 1 << 20}, nil, cs)
			if !errors.Is(err, ErrCorrupt) || len(got) != 0 || next != 3 {
				t.Fatalf("from the corrupt batch: err %v, %d records, next %d", err, len(got), next)
			}
		})
	}
}

// TestDecodeSizesRecordsOnce: a partition of many small uncompressed
// batches is decoded into one slice sized once, from the batches whose
// CRCs are checked, not grown by each batch's count (append's quarter
// once large), which would copy the records decoded so far again at
// every batch.
func TestDecodeSizesRecordsOnce(t *testing.T) {
	const batches, each = 1000, 10
	var raw []byte
	for b := range batches {
		recs := make([]stages.Record, each)
		for i := range recs {
			recs[i] = stages.Record{Offset: int64(b*each + i), Value: []byte("v"), Timestamp: time.UnixMilli(1_700_000_000_000)}
		}
		raw = append(raw, testBatch{base: int64(b * each), first: 1_700_000_000_000, records: recs}.encode(t)...)
	}
	cs := newCodecs()
	defer cs.close()
	var got []stages.Record
	var err error
	n := allocated(func() {
		got, _, _, _, err = decodeRecords(tp, raw, 0, &room{left: 1 << 30}, nil, cs)
	})
	if err != nil || len(got) != batches*each {
		t.Fatalf("decoded %d records, err %v; want %d", len(got), err, batches*each)
	}
	final := uint64(batches*each) * uint64(recordSize)
	t.Logf("allocated %.1f times the records' slice", float64(n)/float64(final))
	if n > final+final/4 {
		t.Fatalf("allocated %d bytes (%.1f times the %d of the records' slice), want at most 1.25 times", n, float64(n)/float64(final), final)
	}
}
