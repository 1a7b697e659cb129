package produce

import (
	"bytes"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/stages"
)

// encodeBatch encodes records into one batch.
func encodeBatch(records []stages.Record, txn bool, pid int64, producerEpoch int16, seq int32) []byte {
	return encodeCompressed(records, txn, pid, producerEpoch, seq, CompressionNone)
}

func encodeCompressed(records []stages.Record, txn bool, pid int64, producerEpoch int16, seq int32, codec Compression) []byte {
	var e batchEncoder
	e.reset(txn)
	e.compressWith(codec)
	for i := range records {
		e.append(records[i].Key, records[i].Value, records[i].Headers, records[i].Timestamp.UnixMilli())
	}
	b, err := e.finish(pid, producerEpoch, seq)
	if err != nil {
		panic(err)
	}
	return bytes.Clone(b)
}

// sameRecords fails unless got holds want's keys, values, headers and
// timestamps, with nil and empty kept apart.
func sameRecords(t testingT, got, want []stages.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("decoded %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !sameBytes(g.Key, w.Key) || !sameBytes(g.Value, w.Value) {
			t.Fatalf("record %d: key %q (nil %v) value %q (nil %v), want key %q (nil %v) value %q (nil %v)", i,
				g.Key, g.Key == nil, g.Value, g.Value == nil, w.Key, w.Key == nil, w.Value, w.Value == nil)
		}
		if !g.Timestamp.Equal(w.Timestamp) {
			t.Fatalf("record %d: timestamp %v, want %v", i, g.Timestamp, w.Timestamp)
		}
		if len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !sameBytes(g.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d: %q=%q (nil %v), want %q=%q (nil %v)", i, j, g.Headers[j].Key, g.Headers[j].Value,
					g.Headers[j].Value == nil, w.Headers[j].Key, w.Headers[j].Value, w.Headers[j].Value == nil)
			}
		}
	}
}

type testingT interface {
	Helper()
	Fatalf(format string, args ...any)
}

// sameBytes is bytes.Equal that also tells nil from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func TestEncodeDecodes(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_123)
	tests := []struct {
		name    string
		records []stages.Record
		txn     bool
	}{
		{"one plain record", []stages.Record{{Key: []byte("k"), Value: []byte("v"), Timestamp: t0}}, false},
		{"null key and value", []stages.Record{{Timestamp: t0}}, false},
		{"empty key and value", []stages.Record{{Key: []byte{}, Value: []byte{}, Timestamp: t0}}, false},
		{"null, empty and set mixed", []stages.Record{
			{Key: nil, Value: []byte{}, Timestamp: t0},
			{Key: []byte{}, Value: nil, Timestamp: t0},
			{Key: []byte("a"), Value: []byte("b"), Timestamp: t0},
		}, true},
		{"headers with null and empty values", []stages.Record{{Key: []byte("k"), Value: []byte("v"), Timestamp: t0,
			Headers: []stages.Header{{Key: "a", Value: []byte("1")}, {Key: "", Value: nil}, {Key: "e", Value: []byte{}}, {Key: "a", Value: []byte("2")}}}}, false},
		{"timestamps going back and forth", []stages.Record{
			{Value: []byte("1"), Timestamp: t0},
			{Value: []byte("2"), Timestamp: t0.Add(-time.Hour)},
			{Value: []byte("3"), Timestamp: t0.Add(24 * time.Hour)},
			{Value: []byte("4"), Timestamp: time.UnixMilli(0)},
		}, false},
		{"large value (multi-byte varints)", []stages.Record{{Key: bytes.Repeat([]byte("k"), 300), Value: bytes.Repeat([]byte("v"), 70000), Timestamp: t0}}, true},
	}
	codecs := []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}
	for _, tt := range tests {
		for _, codec := range codecs {
			t.Run(tt.name+"/"+codec.String(), func(t *testing.T) { checkEncoded(t, tt.records, tt.txn, codec) })
		}
	}
}

// checkEncoded encodes records and checks them with the fetch decoder
// and every header field with franz-go's kmsg.
func checkEncoded(t *testing.T, records []stages.Record, txn bool, codec Compression) {
	t.Helper()
	raw := encodeCompressed(records, txn, 42, 7, 1000, codec)
	got, err := fetch.Decode("t", 3, raw)
	if err != nil {
		t.Fatalf("fetch decoder: %v", err)
	}
	sameRecords(t, got, records)
	for i, r := range got {
		if r.Offset != int64(i) || r.Topic != "t" || r.Partition != 3 {
			t.Fatalf("record %d at %s/%d@%d", i, r.Topic, r.Partition, r.Offset)
		}
	}
	// the header, read by franz-go's kmsg
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		t.Fatalf("kmsg: %v", err)
	}
	wantAttrs := int16(codec)
	if txn {
		wantAttrs |= 0x10
	}
	maxTS := records[0].Timestamp.UnixMilli()
	for _, r := range records {
		maxTS = max(maxTS, r.Timestamp.UnixMilli())
	}
	switch {
	case b.Magic != 2, b.FirstOffset != 0, b.PartitionLeaderEpoch != -1:
		t.Fatalf("magic %d, first offset %d, leader epoch %d", b.Magic, b.FirstOffset, b.PartitionLeaderEpoch)
	case int(b.Length) != len(raw)-12:
		t.Fatalf("length %d for %d bytes", b.Length, len(raw))
	case b.CRC != int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))):
		t.Fatal("CRC mismatch")
	case b.Attributes != wantAttrs:
		t.Fatalf("attributes %#x, want %#x", b.Attributes, wantAttrs)
	case b.ProducerID != 42 || b.ProducerEpoch != 7 || b.FirstSequence != 1000:
		t.Fatalf("producer %d epoch %d sequence %d", b.ProducerID, b.ProducerEpoch, b.FirstSequence)
	case b.NumRecords != int32(len(records)) || b.LastOffsetDelta != int32(len(records)-1):
		t.Fatalf("%d records, last delta %d", b.NumRecords, b.LastOffsetDelta)
	case b.FirstTimestamp != records[0].Timestamp.UnixMilli() || b.MaxTimestamp != maxTS:
		t.Fatalf("timestamps first %d max %d, want %d %d", b.FirstTimestamp, b.MaxTimestamp, records[0].Timestamp.UnixMilli(), maxTS)
	}
}

// TestStampRewritesProducerFields: a batch re-stamped for a new identity
// decodes the same and carries the new fields and a valid CRC.
func TestStampRewritesProducerFields(t *testing.T) {
	recs := []stages.Record{{Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(5)}}
	raw := encodeBatch(recs, false, 1, 0, 5)
	stamp(raw, 99, 3, 0)
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if b.ProducerID != 99 || b.ProducerEpoch != 3 || b.FirstSequence != 0 {
		t.Fatalf("producer %d epoch %d sequence %d", b.ProducerID, b.ProducerEpoch, b.FirstSequence)
	}
	got, err := fetch.Decode("t", 0, raw) // checks the CRC
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, recs)
}

func genBytes() *rapid.Generator[[]byte] {
	return rapid.Custom(func(t *rapid.T) []byte {
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		return rapid.SliceOfN(rapid.Byte(), 1, 400).Draw(t, "bytes")
	})
}

// TestEncodeDecodesProperty: any records, encoded by us, decode with the
// fetch path's decoder to the same records.
func TestEncodeDecodesProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := rapid.Int64Range(0, 1<<42).Draw(t, "base")
		n := rapid.IntRange(1, 40).Draw(t, "n")
		recs := make([]stages.Record, n)
		for i := range recs {
			recs[i] = stages.Record{
				Key:       genBytes().Draw(t, "key"),
				Value:     genBytes().Draw(t, "value"),
				Timestamp: time.UnixMilli(base + rapid.Int64Range(-1<<33, 1<<33).Draw(t, "ts")),
			}
			for range rapid.IntRange(0, 3).Draw(t, "headers") {
				recs[i].Headers = append(recs[i].Headers, stages.Header{Key: rapid.String().Draw(t, "hkey"), Value: genBytes().Draw(t, "hvalue")})
			}
		}
		codec := Compression(rapid.IntRange(0, 4).Draw(t, "codec"))
		raw := encodeCompressed(recs, rapid.Bool().Draw(t, "txn"), rapid.Int64Range(-1, 1<<40).Draw(t, "pid"), 0, 0, codec)
		got, err := fetch.Decode("t", 0, raw)
		if err != nil {
			t.Fatalf("fetch decoder: %v", err)
		}
		sameRecords(t, got, recs)
		// the size the producer plans with is the size written
		var e batchEncoder
		e.reset(false)
		first := recs[0].Timestamp.UnixMilli()
		for i := range recs {
			want := e.len() + encodedSize(&recs[i], recs[i].Timestamp.UnixMilli(), first, int32(i))
			e.append(recs[i].Key, recs[i].Value, recs[i].Headers, recs[i].Timestamp.UnixMilli())
			if e.len() != want {
				t.Fatalf("record %d: planned %d bytes, wrote %d", i, want, e.len())
			}
		}
	})
}

// TestEncodeDoesNotAllocate: appending to a grown encoder allocates
// nothing, and neither does finishing the batch uncompressed or with
// snappy or zstd.
func TestEncodeDoesNotAllocate(t *testing.T) {
	key, value := []byte("user-12345"), bytes.Repeat([]byte("x"), 200)
	hdrs := []stages.Header{{Key: "source", Value: []byte("orders")}}
	for _, codec := range []Compression{CompressionNone, CompressionSnappy, CompressionZstd} {
		var e batchEncoder
		run := func() {
			e.reset(true)
			e.compressWith(codec)
			for range 500 {
				e.append(key, value, hdrs, 1)
			}
			if _, err := e.finish(1, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		run()
		if allocs := testing.AllocsPerRun(20, run); allocs != 0 {
			t.Errorf("%s: %v allocations per batch of 500 records", codec, allocs)
		}
	}
}

// BenchmarkEncode is the cost of encoding one record (a 10-byte key, a
// 200-byte value, one header) into a batch of 500, CRC and compression
// included.
func BenchmarkEncode(b *testing.B) {
	key, value := []byte("user-12345"), bytes.Repeat([]byte("x"), 200)
	hdrs := []stages.Header{{Key: "source", Value: []byte("orders")}}
	for _, codec := range []Compression{CompressionNone, CompressionLZ4, CompressionZstd} {
		b.Run(codec.String(), func(b *testing.B) {
			var e batchEncoder
			e.reset(true)
			e.compressWith(codec)
			b.ReportAllocs()
			b.SetBytes(int64(len(key) + len(value)))
			n := 0
			for b.Loop() {
				if n == 500 {
					if _, err := e.finish(1, 0, 0); err != nil {
						b.Fatal(err)
					}
					e.reset(true)
					e.compressWith(codec)
					n = 0
				}
				e.append(key, value, hdrs, int64(n))
				n++
			}
		})
	}
}

func TestNextSequenceWraps(t *testing.T) {
	tests := []struct {
		seq  int32
		n    int
		want int32
	}{
		{0, 5, 5},
		{1<<31 - 1, 1, 0},
		{1<<31 - 3, 5, 2},
	}
	for _, tt := range tests {
		if got := nextSequence(tt.seq, tt.n); got != tt.want {
			t.Errorf("nextSequence(%d, %d) = %d, want %d", tt.seq, tt.n, got, tt.want)
		}
	}
}
