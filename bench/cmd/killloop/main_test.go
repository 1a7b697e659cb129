//go:build unix

package main

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

func TestParseID(t *testing.T) {
	for _, n := range []int64{0, 7, 123456789, 1234567890} {
		if got, ok := parseID(idValue(n)); !ok || got != n {
			t.Errorf("parseID(%q) = %d, %v", idValue(n), got, ok)
		}
	}
	for _, v := range []string{"", "id-", "id--1", "x-000000001", "id-12a"} {
		if _, ok := parseID([]byte(v)); ok {
			t.Errorf("parseID(%q) accepted", v)
		}
	}
}

// TestCount: ids 0..5 produced; 2 and 4 never reach "out", 1 arrives
// three times and 3 twice, and one record is not an id.
func TestCount(t *testing.T) {
	var phase atomic.Int64
	tl := &tally{pos: map[int32]int64{}, byPhase: map[int64]int64{}, phase: &phase}
	tl.count = []uint32{1, 3, 0, 2, 0, 1}
	tl.records = 1 + 3 + 2 + 1 + 1
	tl.unknown = 1
	tl.byPhase[1], tl.byPhase[2] = 2, 1
	m := &measurement{o: options{kills: 2}}
	res := &result{produced: 6}
	m.count(tl, res)
	if res.unique != 4 || res.missing != 2 || !slices.Equal(res.firstMissing, []int64{2, 4}) || res.dups != 3 ||
		res.unknown != 1 || !slices.Equal(res.perKill, []int64{2, 1}) {
		t.Errorf("got %+v", res)
	}
	var b strings.Builder
	res.print(&b, m.o, []string{"-kills", "2"})
	if !strings.Contains(b.String(), "| missing ids | 2 |") {
		t.Errorf("report:\n%s", b.String())
	}
}
