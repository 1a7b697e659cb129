//go:build unix

package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseCounted(t *testing.T) {
	for _, tc := range []struct {
		v         string
		id, count int64
		ok        bool
	}{
		{"id-000000042 7", 42, 7, true},
		{"id-000000000 1", 0, 1, true},
		{"id-000000042", 0, 0, false},
		{"id-000000042 0", 0, 0, false},
		{"id-000000042 x", 0, 0, false},
		{"x-000000042 7", 0, 0, false},
	} {
		id, n, ok := parseCounted([]byte(tc.v))
		if ok != tc.ok || (ok && (id != tc.id || n != tc.count)) {
			t.Errorf("parseCounted(%q) = %d, %d, %v", tc.v, id, n, ok)
		}
	}
	var sum int64
	for k := range 7 {
		sum += inputsOfKey(100, 7, k)
	}
	if sum != 100 || inputsOfKey(100, 7, 0) != 15 || inputsOfKey(100, 7, 6) != 14 {
		t.Errorf("inputsOfKey: sum %d, key 0 %d, key 6 %d", sum, inputsOfKey(100, 7, 0), inputsOfKey(100, 7, 6))
	}
}

// TestJudge: 3 keys, 10 records (key 0: 4, keys 1 and 2: 3 each); the
// changelog and the outputs say what each case has.
func TestJudge(t *testing.T) {
	const keys, produced = 3, 10
	key := func(k int) string { return string(keyValue(int64(k), keys)) }
	// outputs carrying counts 1..n once each, for every key
	exactOutputs := func() *keyTally {
		kt := newKeyTally(keys)
		for k := range keys {
			for n := int64(1); n <= inputsOfKey(produced, keys, k); n++ {
				kt.add(k, n)
			}
		}
		return kt
	}
	fold := func(counts ...int64) *folded {
		f := &folded{count: map[string]int64{}, partitions: map[string][]int32{}}
		for k, n := range counts {
			f.count[key(k)] = n
			f.partitions[key(k)] = []int32{int32(k)}
		}
		return f
	}
	for _, tc := range []struct {
		name      string
		f         *folded
		kt        *keyTally
		guarantee string
		want      string // exact under lost over extra badOutputs repeated skipped lastDiffers stray
		wrong     bool
	}{
		{name: "exact", f: fold(4, 3, 3), kt: exactOutputs(), guarantee: "exactly_once", want: "3 0 0 0 0 0 0 0 0 0"},
		{name: "a change lost", f: fold(3, 3, 3), kt: exactOutputs(), guarantee: "exactly_once", want: "2 1 1 0 0 0 0 0 1 0", wrong: true},
		{name: "a record counted twice", f: fold(5, 3, 3), kt: func() *keyTally { kt := exactOutputs(); kt.add(0, 5); return kt }(),
			guarantee: "exactly_once", want: "2 0 0 1 1 1 0 0 0 0", wrong: true},
		{name: "the same twice at least once", f: fold(5, 3, 3), kt: func() *keyTally { kt := exactOutputs(); kt.add(0, 5); return kt }(),
			guarantee: "at_least_once", want: "2 0 0 1 1 0 0 0 0 0"},
		{name: "a count repeated (state lost, then counted again)", f: fold(4, 3, 3), kt: func() *keyTally { kt := exactOutputs(); kt.add(1, 2); return kt }(),
			guarantee: "exactly_once", want: "3 0 0 0 0 1 1 0 0 0", wrong: true},
		{name: "a key missing at least once", f: fold(4, 3), kt: exactOutputs(), guarantee: "at_least_once", want: "2 1 3 0 0 0 0 0 1 0", wrong: true},
		{name: "a stray key", f: func() *folded { f := fold(4, 3, 3); f.count["key-00009"] = 1; return f }(), kt: exactOutputs(),
			guarantee: "at_least_once", want: "3 0 0 0 0 0 0 0 0 1", wrong: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &stateResult{keys: keys, folded: tc.f}
			s.judge(produced, tc.kt, tc.guarantee)
			got := strings.Join([]string{strconv.Itoa(s.exact), strconv.Itoa(s.under), strconv.FormatInt(s.lost, 10), strconv.Itoa(s.over),
				strconv.FormatInt(s.extra, 10), strconv.Itoa(s.badOutputs), strconv.FormatInt(s.repeated, 10), strconv.FormatInt(s.skipped, 10),
				strconv.Itoa(s.lastDiffers), strconv.Itoa(len(s.stray))}, " ")
			if got != tc.want || s.wrong(tc.guarantee) != tc.wrong || s.perKeyMin != 3 || s.perKeyMax != 4 {
				t.Errorf("got %s (wrong %v, per key %d to %d), want %s (wrong %v); %v %v %v",
					got, s.wrong(tc.guarantee), s.perKeyMin, s.perKeyMax, tc.want, tc.wrong, s.firstWrong, s.firstBadOutputs, s.stray)
			}
		})
	}
}

// TestRestores: the "state: restored" lines of instance logs, summed
// before the first restart, per restart window and per restarted
// process.
func TestRestores(t *testing.T) {
	ref := time.Date(2026, 12, 7, 21, 22, 0, 0, time.UTC)
	log := func(lines ...string) []restoreEvent {
		return readRestores(strings.NewReader(strings.Join(lines, "\n")), ref)
	}
	a1 := log(
		"21:22:00.969\tINFO\tstate: local store will be restored from its changelog\t{\"store\": \"counts\", \"partition\": 2, \"found\": \"empty\", \"detail\": \"\"}",
		"21:22:00.969\tINFO\tstate: restored\t{\"store\": \"counts\", \"partition\": 2, \"from\": 0, \"to\": 5, \"records\": 4, \"bytes\": 40, \"rebuilt\": false, \"took\": \"507.944µs\"}",
		"21:22:05.000\tINFO\tstate: restored\t{\"store\": \"counts\", \"partition\": 3, \"from\": 0, \"to\": 693, \"records\": 665, \"rebuilt\": true}",
		"not a log line",
	)
	a2 := log("21:22:03.500\tINFO\tstate: restored\t{\"store\": \"counts\", \"partition\": 0, \"from\": 10, \"to\": 30, \"records\": 20, \"rebuilt\": false, \"waited_for_open_transactions\": \"1.5s\"}")
	if len(a1) != 2 || a1[0].records != 4 || a1[0].partition != 2 || !a1[1].rebuilt || !a1[1].at.Equal(ref.Add(5*time.Second)) {
		t.Fatalf("readRestores = %+v", a1)
	}
	s := &stateResult{procs: []*procLog{{name: "instance-a1", restores: a1}, {name: "instance-a2", restores: a2}}}
	s.attribute([]time.Time{ref.Add(3 * time.Second), ref.Add(4 * time.Second)}, []int{1, -1})
	if s.total != (restoreFig{restores: 3, rebuilt: 1, records: 689, waits: 1, longestWait: 1500 * time.Millisecond}) || s.before.records != 4 ||
		!slices.Equal([]int64{s.perRestart[0].records, s.perRestart[1].records}, []int64{20, 665}) ||
		s.byRestarted[0].records != 20 || s.byRestarted[1].records != 0 || !s.restarted {
		t.Errorf("attributed: total %+v before %+v per restart %+v by restarted %+v", s.total, s.before, s.perRestart, s.byRestarted)
	}
	if got := s.total.String(); got != "689 records in 3 restores (1 rebuilt); 1 waited for open transactions, up to 1.5s" {
		t.Errorf("total = %q", got)
	}
}

// The kill loop with state, on the embedded broker: two instances count
// the records of 16 keys in a store, and are SIGKILLed in turn while
// records flow. At exactly_once each restart starts on an emptied state
// dir: a new transactional id, so the killed instance's transaction
// stays open on the changelog until the broker aborts it while its
// partitions move on, and every store restores all of its changelog.
// The changelog, read read_committed and folded, holds every key's count
// of records produced, and the outputs carry each key's counts 1..N once
// each. At at_least_once each instance restarts on the state dir its
// predecessor left, and no key is counted short.
func TestKillLoopState(t *testing.T) {
	for _, tc := range []struct {
		guarantee string
		args      []string
	}{
		{"exactly_once", []string{"-wipe-state"}},
		{"at_least_once", nil},
	} {
		t.Run(tc.guarantee, func(t *testing.T) {
			out := runLoop(t, append([]string{"-state", "-keys", "16", "-kills", "2", "-interval", "2s", "-rate", "1000", "-partitions", "4",
				"-guarantee", tc.guarantee, "-seed", "3"}, tc.args...)...)
			want := map[string]string{
				"missing ids": "0",
				"keys under-counted (records missing from their counts)": "0 (0)",
				"kills (SIGKILL)": "2",
			}
			if tc.guarantee == "exactly_once" {
				want["keys whose count in the changelog equals their records produced"] = "16 of 16"
				want["keys over-counted (records counted twice)"] = "0 (0)"
				want["keys whose outputs do not carry the counts 1..N once each"] = "0"
				want["duplicates (`out` records − unique ids)"] = "0"
			}
			checkFigures(t, out, want)
			// the restarts restored what their stores lacked
			if got := figure(out, "restored from the changelog, all instances (from their logs)"); got == "" || strings.HasPrefix(got, "0 records") {
				t.Errorf("no records restored (%q); report:\n%s", got, out)
			}
		})
	}
}
