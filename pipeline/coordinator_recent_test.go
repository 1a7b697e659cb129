package pipeline

import (
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestRecentMarks: a commit's record time is that of the newest record
// of the remembered spans at or below the committed offset: exact when
// spans complete in order, the best remembered when they do not, none
// when every remembered span is above the offset.
func TestRecentMarks(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	// batch [from, to) whose record at offset o has time base+o seconds;
	// offset 3 holds no record (compacted)
	batch := func(from, to int64) *fetch.Batch {
		var recs []stages.Record
		for o := from; o < to; o++ {
			if o != 3 {
				recs = append(recs, stages.Record{Offset: o, Timestamp: base.Add(time.Duration(o) * time.Second)})
			}
		}
		return fetch.NewBatch(tp0, 1, 1, offsets.Span{Start: from, End: to}, recs, 1)
	}
	type mark struct{ from, to, done int64 }
	tests := []struct {
		name   string
		marks  []mark
		commit int64
		want   int64 // offset whose record time is reported, -1 none
	}{
		{"in order", []mark{{0, 10, 10}, {10, 20, 20}}, 20, 19},
		{"a partly finished batch: its last finished record", []mark{{0, 10, 6}}, 6, 5},
		{"the record below the commit is missing: the one before it", []mark{{0, 4, 4}}, 4, 2},
		{"out of order: the newest at or below the commit", []mark{{20, 30, 30}, {0, 10, 10}, {10, 20, 20}}, 20, 19},
		{"every span above the commit", []mark{{10, 20, 20}}, 10, -1},
		{"only the last four spans are kept", []mark{{0, 5, 5}, {10, 11, 11}, {11, 12, 12}, {12, 13, 13}, {13, 14, 14}}, 10, -1},
		{"nothing marked", nil, 10, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recentMarks
			for _, m := range tt.marks {
				r.note(batch(m.from, m.to), m.done)
			}
			got := r.newestBelow(tt.commit)
			want := time.Time{}
			if tt.want >= 0 {
				want = base.Add(time.Duration(tt.want) * time.Second)
			}
			if !got.Equal(want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}
