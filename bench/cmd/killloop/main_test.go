//go:build unix

package main

import (
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
	tl := newTally(&phase)
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

// TestStalls: the gaps between records of one input partition reaching
// the output, from the moment the reader saw them, whether the reader or
// the producer learned of an id first.
func TestStalls(t *testing.T) {
	var phase atomic.Int64
	tl := newTally(&phase)
	at := time.Unix(100, 0)
	seen := func(id int64, ms int) {
		tl.mu.Lock()
		tl.firstSeen(id, at.Add(time.Duration(ms)*time.Millisecond))
		tl.mu.Unlock()
	}
	// partition 0: 0ms, 10ms, 900ms (a stall of 890ms), 910ms
	// partition 1: 0ms, 20ms
	tl.producedTo(0, 0)
	seen(0, 0)
	seen(1, 10) // seen before its partition is known
	tl.producedTo(1, 0)
	tl.producedTo(2, 1)
	seen(2, 0)
	tl.producedTo(3, 0)
	seen(3, 900)
	tl.producedTo(4, 1)
	seen(4, 20)
	tl.producedTo(5, 0)
	seen(5, 910)
	if !tl.everyPartitionSeen(2) || tl.everyPartitionSeen(3) {
		t.Fatal("everyPartitionSeen wrong")
	}
	per, longest := tl.stalls(2, 250*time.Millisecond) // a threshold below the 890ms gap
	if want := []time.Duration{890 * time.Millisecond, 0}; !slices.Equal(per, want) || longest != 890*time.Millisecond {
		t.Errorf("stalls = %v, longest %v; want %v, 890ms", per, longest, want)
	}
}

// The kill loop of the exactly-once guarantee, on the embedded broker: the
// processor binary as the worker, two instances, SIGKILLed in turn while
// records flow, and the broker (three nodes, data on disk) SIGKILLed and
// restarted once, which aborts the transactions open at the crash and
// bumps their producers' epochs; the output, read read_committed, holds
// every input record exactly once.
func TestKillLoopExactlyOnce(t *testing.T) {
	out := runLoop(t, "-kills", "3", "-interval", "2s", "-rate", "1000", "-partitions", "8", "-kill-broker",
		"-guarantee", "exactly_once", "-seed", "3")
	for _, want := range []string{"| missing ids | 0 |", "| duplicates (`out` records − unique ids) | 0 |", "| kills (SIGKILL) | 3 |",
		"| broker node killed (SIGKILL, once), down until it served again | the embedded broker"} {
		if !strings.Contains(out, want) {
			t.Errorf("killloop report lacks %q:\n%s", want, out)
		}
	}
}

// runLoop runs the kill loop with args and returns its report (logged),
// failing the test at once if it exits non-zero.
func runLoop(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr strings.Builder
	code := run(args, &stdout, &stderr)
	out := stdout.String()
	t.Logf("report:\n%s", out)
	if code != 0 {
		t.Fatalf("killloop exited %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr.String())
	}
	return out
}

// checkFigures asserts that each row of report named in want has its
// value.
func checkFigures(t *testing.T, report string, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got := figure(report, name); got != w {
			t.Errorf("%q = %q, want %q", name, got, w)
		}
	}
}

// figure returns the value of the report's row named name ("" if absent).
func figure(report, name string) string {
	for _, line := range strings.Split(report, "\n") {
		if v, ok := strings.CutPrefix(line, "| "+name+" | "); ok {
			return strings.TrimSuffix(v, " |")
		}
	}
	return ""
}

// The zombie test of the exactly-once guarantee, on the embedded broker:
// one of two instances is stopped with SIGSTOP for three session timeouts
// while records flow, so the group gives its partitions to the other,
// which processes their records again; then it is woken with SIGCONT, in
// the middle of a transaction holding outputs of records it no longer
// owns. Its transaction must abort (its partitions rewound with reason
// transaction_aborted, its offset commit refused if it got that far), and
// the output, read read_committed, holds every input record exactly once.
//
// The pause must catch a transaction open, which a loaded machine can
// make miss: a run whose woken instance had nothing in flight (no
// transaction aborted by anyone, no commit refused, nothing rewound) has
// nothing to show, and the next seed is tried, up to three; each run's
// safety figures are checked whatever.
func TestKillLoopZombieExactlyOnce(t *testing.T) {
	for seed := 5; seed < 8; seed++ {
		out := runLoop(t, "-mode", "zombie", "-kills", "1", "-interval", "2s", "-rate", "1000", "-guarantee", "exactly_once", "-seed", strconv.Itoa(seed))
		for name, want := range map[string]string{
			"missing ids": "0",
			"duplicates (`out` records − unique ids)": "0",
			"pauses (SIGSTOP for 3s, then SIGCONT)":   "1",
			// the premise: the group removed the paused instance
			"group members when the paused instance woke (per pause)": "1 of 2",
		} {
			if got := figure(out, name); got != want {
				t.Fatalf("seed %d: %q = %q, want %q; report:\n%s", seed, name, got, want, out)
			}
		}
		aborted := figure(out, "partitions a woken instance rewound, transaction aborted (all pauses)")
		if figure(out, "records of aborted transactions in `out` (read uncommitted, not committed)") == "0" &&
			figure(out, "commits of a woken instance refused (all pauses)") == "0" && aborted == "0" {
			t.Logf("seed %d: the pause caught no transaction open (nothing aborted, refused or rewound); next seed", seed)
			continue
		}
		// the zombie's own log: it aborted its transaction
		if got := figure(out, "pauses after which the woken instance aborted its transaction or had its commit refused"); got != "1 of 1" {
			t.Errorf("seed %d: the woken instance aborted or had refused %s pauses, want 1 of 1; report:\n%s", seed, got, out)
		}
		if aborted == "0" || aborted == "" {
			t.Errorf("seed %d: the woken instance's log shows no partition rewound by a transaction abort; report:\n%s", seed, out)
		}
		return
	}
	t.Fatal("in three runs the pause never caught a transaction open: the test shows nothing (is the machine overloaded, or do transactions no longer stay open between commits?)")
}

// The same pause at least once: the records the paused instance processed
// since its last commit are processed again by the member that took its
// partitions, so "out" holds duplicates (none lost), and the woken
// instance loses its partitions without committing: the contrast that
// shows the zombie test above has something to prevent.
func TestKillLoopZombieAtLeastOnce(t *testing.T) {
	out := runLoop(t, "-mode", "zombie", "-kills", "1", "-interval", "2s", "-rate", "1000", "-seed", "5")
	if got := figure(out, "missing ids"); got != "0" {
		t.Errorf("missing ids = %q, want 0; report:\n%s", got, out)
	}
	if got := figure(out, "duplicates (`out` records − unique ids)"); got == "0" || got == "" {
		t.Errorf("no duplicates after a pause at least once; report:\n%s", out)
	}
	if got := figure(out, "pauses after which the woken instance reported its partitions lost"); got != "1 of 1" {
		t.Errorf("the woken instance did not report its partitions lost (%q); report:\n%s", got, out)
	}
}
