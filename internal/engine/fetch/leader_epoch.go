package fetch

import "encoding/binary"

// Offsets of the v2 record batch header fields the leader-epoch scan reads.
const (
	hdrLength      = 8  // int32 batchLength: the bytes of the batch after it
	hdrLengthEnd   = 12 // where batchLength's bytes start
	hdrLeaderEpoch = 12 // int32 partitionLeaderEpoch
	hdrMagic       = 16 // int8 magic
	hdrEnd         = 17 // enough header to read the three
)

// lastLeaderEpoch returns the partition leader epoch of the last record
// batch in raw that starts below next (the batch holding offset next-1,
// the last offset a fetch consumed), or -1 if there is none. It reads
// only headers, stops at a batch cut short, and never fails: the records
// themselves are checked by decodeRecords.
func lastLeaderEpoch(raw []byte, next int64) int32 {
	leaderEpoch := int32(-1)
	for len(raw) >= hdrEnd {
		base := int64(binary.BigEndian.Uint64(raw))
		n := int64(int32(binary.BigEndian.Uint32(raw[hdrLength:])))
		if n <= 0 || hdrLengthEnd+n > int64(len(raw)) || base >= next {
			break
		}
		if raw[hdrMagic] == 2 {
			leaderEpoch = int32(binary.BigEndian.Uint32(raw[hdrLeaderEpoch:]))
		}
		raw = raw[hdrLengthEnd+n:]
	}
	return leaderEpoch
}
