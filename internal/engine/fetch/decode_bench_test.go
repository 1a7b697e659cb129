package fetch

import (
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

// BenchmarkDecodeRecords decodes a partition's response of 100-byte
// values without keys or headers (the consume benchmark's records), in
// batches of 1,000: one op is one response of 10,000 records.
func BenchmarkDecodeRecords(b *testing.B) {
	const batches, each = 10, 1000
	value := make([]byte, 100)
	var raw []byte
	for n := range batches {
		recs := make([]stages.Record, each)
		for i := range recs {
			recs[i] = stages.Record{Offset: int64(n*each + i), Value: value, Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))}
		}
		raw = append(raw, testBatch{base: int64(n * each), first: 1_700_000_000_000, records: recs}.encode(b)...)
	}
	cs := newCodecs()
	defer cs.close()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		got, _, _, _, err := decodeRecords(tp, raw, 0, &room{left: 1 << 30}, nil, cs)
		if err != nil || len(got) != batches*each {
			b.Fatalf("decoded %d records, err %v", len(got), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batches*each), "ns/record")
}
