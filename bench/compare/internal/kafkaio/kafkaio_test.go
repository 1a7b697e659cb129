package kafkaio

import (
	"slices"
	"testing"
)

func TestOpenTransactions(t *testing.T) {
	tests := []struct {
		name        string
		stable, end Offsets
		want        []int32
	}{
		{"empty topic", Offsets{0: 0, 1: 0}, Offsets{0: 0, 1: 0}, nil},
		{"no transactions", Offsets{0: 5, 1: 7}, Offsets{0: 5, 1: 7}, nil},
		{"one open", Offsets{0: 5, 1: 3}, Offsets{0: 5, 1: 7}, []int32{1}},
		{"open ones in order", Offsets{0: 0, 1: 7, 2: 1, 3: 2}, Offsets{0: 4, 1: 7, 2: 9, 3: 2}, []int32{0, 2}},
		{"a partition missing from stable counts as open", Offsets{0: 5}, Offsets{0: 5, 1: 1}, []int32{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := OpenTransactions(tc.stable, tc.end); !slices.Equal(got, tc.want) {
				t.Errorf("OpenTransactions(%v, %v) = %v, want %v", tc.stable, tc.end, got, tc.want)
			}
		})
	}
}

// seen is one record a read got: its partition, offset and whether it
// is a control record (a transaction marker).
type seen struct {
	p       int32
	off     int64
	control bool
}

func TestReadProgressEndsOnTransactionalTopics(t *testing.T) {
	tests := []struct {
		name     string
		end      Offsets
		records  []seen
		wantData []int64 // offsets handed on, in order
		wantDone bool
	}{
		{
			name:     "no transactions: the last record reaches the end",
			end:      Offsets{0: 3},
			records:  []seen{{0, 0, false}, {0, 1, false}, {0, 2, false}},
			wantData: []int64{0, 1, 2}, wantDone: true,
		},
		{
			// Two committed transactions of two records: markers at 2 and 5.
			name:     "committed transactions: the markers count, only data is handed on",
			end:      Offsets{0: 6},
			records:  []seen{{0, 0, false}, {0, 1, false}, {0, 2, true}, {0, 3, false}, {0, 4, false}, {0, 5, true}},
			wantData: []int64{0, 1, 3, 4}, wantDone: true,
		},
		{
			// What a default consumer returns of the same topic: no
			// markers, so it never learns that offset 5 was the last.
			name:     "without the markers the read would never end",
			end:      Offsets{0: 6},
			records:  []seen{{0, 0, false}, {0, 1, false}, {0, 3, false}, {0, 4, false}},
			wantData: []int64{0, 1, 3, 4}, wantDone: false,
		},
		{
			// read_committed: an aborted transaction's records (3, 4) are
			// never returned, its abort marker (5) is.
			name:     "aborted last transaction: its marker ends the read",
			end:      Offsets{0: 6},
			records:  []seen{{0, 0, false}, {0, 1, false}, {0, 2, true}, {0, 5, true}},
			wantData: []int64{0, 1}, wantDone: true,
		},
		{
			name:     "every partition must reach its end; an empty one needs nothing",
			end:      Offsets{0: 2, 1: 3, 2: 0},
			records:  []seen{{0, 0, false}, {0, 1, true}, {1, 0, false}, {1, 1, false}},
			wantData: []int64{0, 0, 1}, wantDone: false,
		},
		{
			name:     "records past the end offsets read at the start are not handed on",
			end:      Offsets{0: 2},
			records:  []seen{{0, 0, false}, {0, 1, true}, {0, 2, false}, {0, 3, true}},
			wantData: []int64{0}, wantDone: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rp := newReadProgress(tc.end)
			var data []int64
			for _, r := range tc.records {
				if rp.see(r.p, r.off, r.control) {
					data = append(data, r.off)
				}
			}
			if !slices.Equal(data, tc.wantData) {
				t.Errorf("handed on offsets %v, want %v", data, tc.wantData)
			}
			if got := rp.done(); got != tc.wantDone {
				t.Errorf("done() = %v after %v, want %v (end %v)", got, rp.next, tc.wantDone, tc.end)
			}
		})
	}
}
