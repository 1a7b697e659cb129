//go:build unix

package main

import (
	"fmt"
	"maps"
	"testing"
)

// TestWindowReplay: the windows the aggregate must emit, from the
// records of each repartition partition in offset order (1s windows,
// 500ms grace unless a case says).
func TestWindowReplay(t *testing.T) {
	rec := func(user string, at, id int64) windowRecord { return windowRecord{user: user, at: at, id: id} }
	w := windowRule{size: 1000, grace: 500}
	for _, tc := range []struct {
		name   string
		rule   windowRule
		parts  map[int32][]windowRecord
		closed map[windowKey]windowAgg
		open   int
		late   int64
		stream map[int32]int64
	}{
		{
			name: "a window closes once stream time reaches its end plus grace; a record within grace counts; one after it is late",
			rule: w,
			parts: map[int32][]windowRecord{0: {
				rec("u1", 100, 0), rec("u1", 900, 1), rec("u2", 1200, 2),
				rec("u1", 1499, 3), // stream 1499: [0, 1000) is still open
				rec("u3", 300, 4),  // so this counts in it
				rec("u1", 1500, 5), // stream 1500: [0, 1000) closes, before this counts in [1000, 2000)
				rec("u2", 999, 6),  // late
			}},
			closed: map[windowKey]windowAgg{{"u1", 0}: {2, 1, 0, 1}, {"u3", 0}: {1, 4, 4, 4}},
			open:   2, // u1 and u2 in [1000, 2000)
			late:   1,
			stream: map[int32]int64{0: 1500},
		},
		{
			name: "out-of-order times: stream time never goes back, first and last are in offset order",
			rule: w,
			parts: map[int32][]windowRecord{0: {
				rec("u1", 5000, 0), rec("u1", 4600, 1), rec("u1", 4100, 2), // [4000, 5000) closes at 5500
				rec("u1", 5600, 3),
			}},
			closed: map[windowKey]windowAgg{{"u1", 4000}: {2, 3, 1, 2}},
			open:   1,
			stream: map[int32]int64{0: 5600},
		},
		{
			name: "each partition has its own stream time",
			rule: w,
			parts: map[int32][]windowRecord{
				0: {rec("u1", 100, 0), rec("u1", 3000, 1)},
				1: {rec("u2", 200, 2), rec("u2", 1400, 3)}, // 1400: [0, 1000) still open on partition 1
			},
			closed: map[windowKey]windowAgg{{"u1", 0}: {1, 0, 0, 0}},
			open:   3,
			stream: map[int32]int64{0: 3000, 1: 1400},
		},
		{
			name:   "no grace: the window closes at its end",
			rule:   windowRule{size: 1000},
			parts:  map[int32][]windowRecord{0: {rec("u1", 999, 0), rec("u1", 1000, 1), rec("u1", 999, 2)}},
			closed: map[windowKey]windowAgg{{"u1", 0}: {1, 0, 0, 0}},
			open:   1,
			late:   1,
			stream: map[int32]int64{0: 1000},
		},
		{
			name:   "a time beyond max_future is late and leaves stream time",
			rule:   windowRule{size: 1000, grace: 500, maxFuture: 10000},
			parts:  map[int32][]windowRecord{0: {rec("u1", 100, 0), rec("u1", 20000, 1), rec("u1", 1600, 2)}},
			closed: map[windowKey]windowAgg{{"u1", 0}: {1, 0, 0, 0}},
			open:   1,
			late:   1,
			stream: map[int32]int64{0: 1600},
		},
		{
			name:   "an empty partition has no stream time",
			rule:   w,
			parts:  map[int32][]windowRecord{0: nil},
			closed: map[windowKey]windowAgg{},
			stream: map[int32]int64{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rule.replay(tc.parts)
			var records int64
			for _, recs := range tc.parts {
				records += int64(len(recs))
			}
			if !maps.Equal(r.closed, tc.closed) || r.open != tc.open || r.late != tc.late || r.counted != records-tc.late || !maps.Equal(r.stream, tc.stream) {
				t.Errorf("replay = closed %v, open %d, counted %d, late %d, stream %v; want closed %v, open %d, counted %d, late %d, stream %v",
					r.closed, r.open, r.counted, r.late, r.stream, tc.closed, tc.open, records-tc.late, tc.late, tc.stream)
			}
		})
	}
	if got := (windowRule{size: 1000}).start(-1); got != -1000 {
		t.Errorf("start(-1) = %d, want -1000", got)
	}
}

// TestJudgeWindows: three windows expected; each case emits them with
// one thing wrong, or none.
func TestJudgeWindows(t *testing.T) {
	a, b, c := windowKey{"a", 0}, windowKey{"b", 0}, windowKey{"c", 1000}
	expected := map[windowKey]windowAgg{a: {2, 1, 0, 1}, b: {1, 4, 4, 4}, c: {3, 15, 4, 6}}
	emit := func(change func(map[windowKey][]windowAgg)) map[windowKey][]windowAgg {
		e := map[windowKey][]windowAgg{}
		for k, v := range expected {
			e[k] = []windowAgg{v}
		}
		change(e)
		return e
	}
	for _, tc := range []struct {
		name    string
		emitted map[windowKey][]windowAgg
		want    string // exact missing repeated copies under over otherRecords unexpected
		wrongEO bool
		wrongAL bool
	}{
		{"exact", emit(func(map[windowKey][]windowAgg) {}), "3 0 0 0 0 0 0 0", false, false},
		{"a window missing", emit(func(e map[windowKey][]windowAgg) { delete(e, b) }), "2 1 0 0 0 0 0 0", true, true},
		{"a window twice, exact", emit(func(e map[windowKey][]windowAgg) { e[a] = append(e[a], e[a][0]) }), "2 0 1 1 0 0 0 0", true, false},
		{"a window under-counted", emit(func(e map[windowKey][]windowAgg) { e[c] = []windowAgg{{2, 9, 4, 5}} }), "2 0 0 0 1 0 0 0", true, true},
		{"a window twice, once under-counted", emit(func(e map[windowKey][]windowAgg) { e[c] = append(e[c], windowAgg{2, 9, 4, 5}) }), "2 0 1 1 1 0 0 0", true, true},
		{"a window twice, once over-counted", emit(func(e map[windowKey][]windowAgg) { e[a] = append(e[a], windowAgg{3, 3, 0, 2}) }), "2 0 1 1 0 1 0 0", true, false},
		{"the count of other records", emit(func(e map[windowKey][]windowAgg) { e[a] = []windowAgg{{2, 5, 2, 3}} }), "2 0 0 0 0 0 1 0", true, false},
		{"a window not expected", emit(func(e map[windowKey][]windowAgg) { e[windowKey{"d", 0}] = []windowAgg{{1, 7, 7, 7}} }), "3 0 0 0 0 0 0 1", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := judgeWindows(expected, tc.emitted)
			got := fmt.Sprint(j.exact, j.missing, j.repeated, j.copies, j.under, j.over, j.otherRecords, j.unexpected)
			if got != tc.want || j.expected != 3 || j.wrong("exactly_once") != tc.wrongEO || j.wrong("at_least_once") != tc.wrongAL {
				t.Errorf("got %s (wrong at exactly_once %v, at least once %v), want %s (%v, %v); %v",
					got, j.wrong("exactly_once"), j.wrong("at_least_once"), tc.want, tc.wrongEO, tc.wrongAL, j.firstWrong)
			}
			if (got == "3 0 0 0 0 0 0 0") != (len(j.firstWrong) == 0) {
				t.Errorf("firstWrong = %v", j.firstWrong)
			}
		})
	}
}

// TestCheckRepartition: five ids produced, "in" holds id 4 twice; in
// the repartition topic id 3 is missing, ids 0 and 2 are there twice,
// id 4 once, id 1 with another timestamp, and user u1 is on both
// partitions.
func TestCheckRepartition(t *testing.T) {
	rec := func(user string, at, id int64) windowRecord { return windowRecord{user: user, at: at, id: id} }
	input := func(ats ...int64) *inputRecords {
		in := newInputRecords(int64(len(ats)))
		for id, at := range ats {
			in.add(int64(id), at)
		}
		return in
	}
	in := input(10, 20, 30, 40, 50)
	in.add(4, 50)
	in.add(7, 70) // never produced: left out
	if dup, absent := in.duplicated(); dup != 1 || absent != 0 {
		t.Errorf("duplicated() = %d, %d; want 1, 0", dup, absent)
	}
	f := checkRepartition(in, map[int32][]windowRecord{
		0: {rec("u1", 10, 0), rec("u1", 21, 1), rec("u3", 50, 4)},
		1: {rec("u2", 30, 2), rec("u2", 30, 2), rec("u1", 10, 0)},
	})
	// missing: id 3, and one of id 4's two records
	if got := fmt.Sprint(f.records, f.missing, f.repeated, f.copies, f.timeDiffers, f.splitUsers); got != "6 2 2 2 1 1" || len(f.first) != 5 {
		t.Errorf("records missing repeated copies timeDiffers splitUsers = %s, want 6 2 2 2 1 1; %v", got, f.first)
	}
	f = checkRepartition(input(10, 20), map[int32][]windowRecord{0: {rec("u1", 10, 0)}, 1: {rec("u2", 20, 1)}})
	if got := fmt.Sprint(f.records, f.missing, f.repeated, f.copies, f.timeDiffers, f.splitUsers); got != "2 0 0 0 0 0" || len(f.first) != 0 {
		t.Errorf("a clean topic: %s, %v", got, f.first)
	}
	empty := newInputRecords(3)
	empty.add(1, 5)
	if dup, absent := empty.duplicated(); dup != 0 || absent != 2 {
		t.Errorf("duplicated() of an input lacking ids 0 and 2 = %d, %d", dup, absent)
	}
}
