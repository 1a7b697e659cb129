package fetch

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// headerOnly is a v2 batch of offsets [base, base+n) written in leader
// epoch leaderEpoch, with its length field right and records of filler
// bytes.
func headerOnly(base int64, n int32, leaderEpoch int32, magic int8) []byte {
	b := kmsg.RecordBatch{FirstOffset: base, PartitionLeaderEpoch: leaderEpoch, Magic: magic, LastOffsetDelta: n - 1, NumRecords: n,
		Records: make([]byte, 8)}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	return raw
}

// TestLastLeaderEpoch: the leader epoch of the batch holding the last
// offset consumed (next-1), not of batches after it, of a batch cut
// short, or of a pre-v2 batch.
func TestLastLeaderEpoch(t *testing.T) {
	var raw []byte
	raw = append(raw, headerOnly(0, 3, 4, 2)...) // 0..2, leader epoch 4
	raw = append(raw, headerOnly(3, 2, 7, 2)...) // 3..4, leader epoch 7
	raw = append(raw, headerOnly(5, 1, 9, 2)...) // 5, leader epoch 9
	cut := append(append([]byte(nil), raw...), headerOnly(6, 1, 11, 2)[:20]...)
	for _, tt := range []struct {
		name string
		raw  []byte
		next int64
		want int32
	}{
		{"inside the first batch", raw, 2, 4},
		{"end of the first batch", raw, 3, 4},
		{"second batch", raw, 4, 7},
		{"all", raw, 6, 9},
		{"a batch cut short is not read", cut, 7, 9},
		{"nothing consumed", raw, 0, -1},
		{"empty", nil, 5, -1},
		{"old magic says nothing", headerOnly(0, 1, 3, 1), 1, -1},
	} {
		if got := lastLeaderEpoch(tt.raw, tt.next); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}
