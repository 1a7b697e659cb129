package kafkatest

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// RecordBatch encodes values as one uncompressed v2 record batch whose
// records have offsets base, base+1, ..., as a broker returns it in a
// fetch response (for tests that answer fetches themselves).
func RecordBatch(base int64, values ...[]byte) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: v}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // the body, after a one-byte length
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{FirstOffset: base, Magic: 2, LastOffsetDelta: int32(max(len(values)-1, 0)),
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(values)), Records: recs}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))                                          // length: after base offset and itself
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli))) // from attributes on
	return out
}
