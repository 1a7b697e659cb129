package pipeline

import (
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
)

// recentMarks remembers, for the last few spans marked processed on a
// partition, where each ended and the timestamp of its last record, so
// that a commit can report the time of the newest record it covers
// (CommittedOffset.RecordTime) without keeping a time per record. With
// ordering by partition, spans complete in order and the newest one at
// or below the committed offset is exact; with ordering by key they may
// complete out of order, and a commit whose offset is below every span
// remembered reports no time.
type recentMarks struct {
	ends  [4]int64
	times [4]int64 // unix nanoseconds; 0: unknown
	next  uint8
}

// note remembers a span of bt marked up to end.
func (r *recentMarks) note(bt *fetch.Batch, end int64) {
	n := bt.RecordsBelow(end)
	if n == 0 {
		return
	}
	ts := bt.Records()[n-1].Timestamp
	if ts.IsZero() {
		return
	}
	i := r.next % uint8(len(r.ends))
	r.ends[i], r.times[i] = end, ts.UnixNano()
	r.next++
}

// leaderEpochMarks remembers the leader epoch of the record just below
// the end of the last few spans marked processed, so a commit can carry
// the leader epoch of the last record it covers (OffsetCommit v7+). Only
// an exact match counts: a commit at an offset no remembered span ends
// at carries no leader epoch (-1), since an older one would make the
// next owner's check (OffsetForLeaderEpoch) report a divergence that is not
// there.
type leaderEpochMarks struct {
	ends         [4]int64
	leaderEpochs [4]int32 // plus one (0: empty)
	next         uint8
}

// note remembers that the record at end-1 has leader epoch leaderEpoch
// (>= 0).
func (m *leaderEpochMarks) note(end int64, leaderEpoch int32) {
	if leaderEpoch < 0 {
		return
	}
	i := m.next % uint8(len(m.ends))
	m.ends[i], m.leaderEpochs[i] = end, leaderEpoch+1
	m.next++
}

// at returns the leader epoch of the record at off-1, -1 if unknown: of
// the newest note for it, if there are several.
func (m *leaderEpochMarks) at(off int64) int32 {
	n := uint8(len(m.ends))
	for k := uint8(1); k <= n; k++ {
		i := (m.next - k) % n
		if m.leaderEpochs[i] != 0 && m.ends[i] == off {
			return m.leaderEpochs[i] - 1
		}
	}
	return -1
}

// forget drops every note: the offsets they name belong to a log that no
// longer exists (a data-loss reset restarted the watermark).
func (m *leaderEpochMarks) forget() { *m = leaderEpochMarks{} }

// newestBelow returns the record time of the remembered span with the
// highest end at or below off, zero if none.
func (r *recentMarks) newestBelow(off int64) time.Time {
	best, at := int64(-1), int64(0)
	for i, end := range r.ends {
		if r.times[i] != 0 && end <= off && end > best {
			best, at = end, r.times[i]
		}
	}
	if at == 0 {
		return time.Time{}
	}
	return time.Unix(0, at)
}
