//go:build unix

package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// TestWindowValues: the loop's input values, and the outputs of the
// aggregate it accepts as windows.
func TestWindowValues(t *testing.T) {
	k, v := windowInput(16)(42)
	if id, user, ok := parseInput(v); string(k) != "id-000000042" || !ok || id != 42 || user != "u-00010" {
		t.Errorf("windowInput(16)(42) = %s %s: parsed %d %q %v", k, v, id, user, ok)
	}
	for _, bad := range []string{`{"user":"u-1"}`, `{"id":1}`, `{"id":-1,"user":"u-1"}`, `id-000000001`} {
		if _, _, ok := parseInput([]byte(bad)); ok {
			t.Errorf("parseInput(%s) accepted", bad)
		}
	}
	const good = `{"key":"u-00003","n":3,"id_sum":57,"first_id":3,"last_id":35,"window_start":"2026-12-07T21:22:03.000Z","window_end":"2026-12-07T21:22:04.000Z"}`
	k2, a, err := parseWindowOutput([]byte("u-00003"), []byte(good), 1000)
	if err != nil || k2.user != "u-00003" || k2.start%1000 != 0 || a != (windowAgg{3, 57, 3, 35}) {
		t.Errorf("parseWindowOutput(good) = %v %v %v", k2, a, err)
	}
	for name, tc := range map[string]struct{ key, value string }{
		"another record key": {"u-00004", good},
		"a field missing":    {"u-00003", strings.Replace(good, `"id_sum":57,`, "", 1)},
		"a field unknown":    {"u-00003", strings.Replace(good, `"n":3`, `"n":3,"x":1`, 1)},
		"another size":       {"u-00003", strings.Replace(good, "04.000Z", "05.000Z", 1)},
		"not aligned":        {"u-00003", strings.ReplaceAll(good, ".000Z", ".500Z")},
		"not JSON":           {"u-00003", "id-000000001"},
	} {
		if _, _, err := parseWindowOutput([]byte(tc.key), []byte(tc.value), 1000); err == nil {
			t.Errorf("%s: parseWindowOutput accepted %s", name, tc.value)
		}
	}
}

// The kill loop of windows on the embedded broker: two instances count
// the records of 16 users in tumbling windows of 1s (grace 500ms),
// emitted on close; the records are keyed by id, so they go through the
// repartition topic. Two SIGKILLs while records flow. At exactly_once
// each restart starts on an emptied state dir (its stores restore all of
// their changelog; the killed instance's transactions stay open until
// the broker aborts them), and every window the replay of the
// repartition topic closes is in "out" once, with its exact count, sum
// of ids, first and last id, and no other window is. At at_least_once
// (each instance on the state dir its predecessor left) no window is
// missing or counted short.
func TestKillLoopWindows(t *testing.T) {
	for _, tc := range []struct {
		guarantee string
		args      []string
	}{
		{"exactly_once", []string{"-wipe-state"}},
		{"at_least_once", nil},
	} {
		t.Run(tc.guarantee, func(t *testing.T) {
			out := runLoop(t, append([]string{"-window", "-keys", "16", "-kills", "2", "-interval", "2s", "-rate", "1000", "-partitions", "4",
				"-guarantee", tc.guarantee, "-seed", "3"}, tc.args...)...)
			checkWindowReport(t, out, tc.guarantee, 2, 16)
		})
	}
}

// checkWindowReport asserts the figures of a -window report: nothing
// missing or counted short, the repartition topic the input, and at
// exactly_once every window expected emitted once, exact; and that the
// run closed windows, at least one per user.
func checkWindowReport(t *testing.T, out, guarantee string, kills, users int) {
	t.Helper()
	want := map[string]string{
		"windows missing":       "0",
		"windows under-counted": "0",
		"input records missing from the repartition topic":             "0",
		"repartition records whose timestamp is not their input's":     "0",
		"users on more than one repartition partition":                 "0",
		"records that are not the loop's (`in` / repartition / `out`)": "0 / 0 / 0",
		"kills (SIGKILL)": strconv.Itoa(kills),
	}
	expected, err := strconv.Atoi(figure(out, "windows expected (closed by their partition's final stream time)"))
	if err != nil || expected < users {
		t.Errorf("windows expected: %q, want at least one per user (%v)", figure(out, "windows expected (closed by their partition's final stream time)"), err)
	}
	if guarantee == "exactly_once" {
		want["windows emitted once with the exact count"] = fmt.Sprintf("%d of %d", expected, expected)
		want["windows emitted more than once (copies)"] = "0 (0)"
		want["windows over-counted"] = "0"
		want["windows with the expected count of other records (id_sum, first_id or last_id)"] = "0"
		want["windows emitted but not expected"] = "0"
		want["ids in the repartition topic more often than in `in` (records too many)"] = "0 (0)"
	}
	for name, w := range want {
		if got := figure(out, name); got != w {
			t.Errorf("%q = %q, want %q", name, got, w)
		}
	}
}
