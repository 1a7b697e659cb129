//go:build unix

package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStallsIn(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(100, 0).Add(time.Duration(ms) * time.Millisecond) }
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// gaps: 0→100 (100ms), 100→1600 (1.5s), 1600→1700, 1700→4700 (3s), 4700→4800
	ts := []time.Time{at(0), at(100), at(1600), at(1700), at(4700), at(4800)}
	for _, tc := range []struct {
		name     string
		w        window
		total    time.Duration
		longest  time.Duration
		endedAt  time.Time
		noneSeen bool
	}{
		{name: "whole run", w: window{at(0), at(5000)}, total: ms(4500), longest: ms(3000), endedAt: at(4700)},
		{name: "gaps clipped to the window, the longest whole", w: window{at(1000), at(1650)}, total: ms(600), longest: ms(1500), endedAt: at(1600)},
		{name: "a window inside one gap", w: window{at(2000), at(3000)}, total: ms(1000), longest: ms(3000), endedAt: at(4700)},
		{name: "short gaps only", w: window{at(4700), at(5000)}, noneSeen: true},
		{name: "before every record", w: window{at(-1000), at(0)}, noneSeen: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := stallsIn(ts, time.Second, tc.w)
			if tc.noneSeen {
				if got != (windowStall{}) {
					t.Errorf("got %+v, want nothing", got)
				}
				return
			}
			if got.total != tc.total || got.longest != tc.longest || !got.endedAt.Equal(tc.endedAt) {
				t.Errorf("got total %v longest %v ended %v; want %v %v %v", got.total, got.longest, got.endedAt, tc.total, tc.longest, tc.endedAt)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	end := time.Unix(200, 0)
	ws := []windowStall{{total: time.Second, longest: time.Second, endedAt: end.Add(-time.Second)}, {}, {total: 3 * time.Second, longest: 2 * time.Second, endedAt: end}}
	total, p99, longest, ended := summarize(ws)
	if total != 4*time.Second || p99 != 3*time.Second || longest != 2*time.Second || !ended.Equal(end) {
		t.Errorf("summarize = %v %v %v %v", total, p99, longest, ended)
	}
	if total, _, _, _ := summarize(nil); total != 0 {
		t.Errorf("summarize(nil) total %v", total)
	}
}

func TestAssignmentChanges(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	in := []assignSample{
		{at(0), []int64{21, 21, 22}},
		{at(1), []int64{21, 21, 22}},
		{at(2), []int64{-1, 21, 22}},
		{at(3), []int64{-1, 32, 32}},
		{at(4), []int64{-1, 32, 32}},
		{at(5), []int64{0, 32, 32}},
	}
	got := assignmentChanges(in)
	var secs []int64
	for _, g := range got {
		secs = append(secs, g.at.Unix())
	}
	if !slices.Equal(secs, []int64{0, 2, 3, 5}) {
		t.Errorf("changes at %v, want [0 2 3 5]", secs)
	}
	if s := formatAssignment(in[2].n); s != "-/21/22" {
		t.Errorf("formatAssignment = %q", s)
	}
}

func TestLogTimes(t *testing.T) {
	ref := time.Date(2026, 12, 2, 1, 45, 0, 0, time.UTC)
	log := strings.Join([]string{
		"01:44:58.100\tINFO\tjoined the consumer group\t{\"generation\": 3}", // before notBefore: an earlier process's
		"01:45:01.250\tINFO\tstarting\t{\"brokers\": []}",
		"not a log line",
		"01:45:02.500\tINFO\tjoined the consumer group\t{\"generation\": 4}",
		"01:45:02.600\tINFO\tjoined the consumer group\t{\"generation\": 5}",
		"01:45:02.700\tINFO\tpartitions assigned\t{\"added\": 21}",
	}, "\n")
	got := logTimes(strings.NewReader(log), newPhaseMsgs, ref, ref)
	want := map[string]time.Time{
		"starting":                  ref.Add(1250 * time.Millisecond),
		"joined the consumer group": ref.Add(2500 * time.Millisecond),
		"partitions assigned":       ref.Add(2700 * time.Millisecond),
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if !got[k].Equal(v) {
			t.Errorf("%q at %v, want %v", k, got[k], v)
		}
	}
	// a clock time just after midnight belongs to the day after ref
	late := time.Date(2026, 12, 2, 23, 59, 59, 0, time.UTC)
	if at, ok := clockTime("00:00:01.000", late); !ok || !at.Equal(late.Add(2*time.Second)) {
		t.Errorf("clockTime across midnight = %v, %v", at, ok)
	}
}

// TestPrintRolling: the rolling section names the baseline, each
// restart's window, the cost, the phases and the assignment's changes.
func TestPrintRolling(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 45, 0, 0, time.UTC)
	s := func(d float64) time.Time { return t0.Add(time.Duration(d * float64(time.Second))) }
	r := &result{
		baseline: []windowStall{{total: time.Second, longest: time.Second}, {}},
		restarts: []restartRecord{{
			slot: 1, term: t0, exited: s(0.3), started: s(0.31), windowEnd: s(10),
			before: []int64{21, 21, 22}, after: []int64{21, 21, 22},
			changes:     []assignSample{{s(0.1), []int64{21, 21, 22}}, {s(0.35), []int64{21, -1, 22}}, {s(1.9), []int64{21, 21, 22}}},
			newPhases:   map[string]time.Time{"joined the consumer group": s(1.5)},
			oldPhases:   map[string]time.Time{"stopped": s(0.25)},
			windowTotal: 5 * time.Second, windowP99: 3 * time.Second, longest: 3 * time.Second, pauseEnd: s(3.1),
			firstPartitionsAtNewPID: s(1.9),
		}},
	}
	var b strings.Builder
	r.printRolling(&b, options{interval: 10 * time.Second, partitions: 2, rate: 2000})
	out := b.String()
	for _, want := range []string{
		"| baseline: the 10s before the first restart | 1s | 1s | 1s |",
		"| restart 1 (b): the 10s from its SIGTERM | 5s | 3s | 3s |",
		"cost of one restart (mean restart window − baseline): 4s",
		`exited +0.30s, started +0.31s; old "stopped" +0.25s; new "joined the consumer group" +1.50s; longest pause 3s ended +3.10s`,
		"assignment before 21/21/22, after 21/21/22 (10s later); changes: +0.10s 21/21/22 +0.35s 21/-/22 +1.90s 21/21/22",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
