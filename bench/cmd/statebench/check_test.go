//go:build unix

package main

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/partitioner"
)

func streamsWindow(user string, start, count int64) (key, value []byte) {
	key = binary.BigEndian.AppendUint64([]byte(user), uint64(start))
	return key, binary.BigEndian.AppendUint64(nil, uint64(count))
}

func TestDecodeWindow(t *testing.T) {
	sk, sv := streamsWindow("u000007", 1796083200000, 31)
	for _, c := range []struct {
		name, engine string
		key, value   string
		want         winKey
		count        int64
		err          string
	}{
		{"fencepost", "fencepost", "u000007", `{"key":"u000007","count":31,"window_start":"2026-12-01T00:00:00.000Z","window_end":"2026-12-01T00:01:00.000Z"}`,
			winKey{"u000007", 1796083200000}, 31, ""},
		{"streams", "streams", string(sk), string(sv), winKey{"u000007", 1796083200000}, 31, ""},
		{"fencepost, key differs", "fencepost", "u000008", `{"key":"u000007","count":1,"window_start":"2026-12-01T00:00:00Z","window_end":"2026-12-01T00:01:00Z"}`,
			winKey{}, 0, "not the record key"},
		{"fencepost, wrong size", "fencepost", "u000007", `{"key":"u000007","count":1,"window_start":"2026-12-01T00:00:00Z","window_end":"2026-12-01T00:02:00Z"}`,
			winKey{}, 0, "lasts"},
		{"fencepost, no count", "fencepost", "u000007", `{"key":"u000007","window_start":"2026-12-01T00:00:00Z","window_end":"2026-12-01T00:01:00Z"}`,
			winKey{}, 0, `no "count"`},
		{"fencepost, not JSON", "fencepost", "u000007", `7`, winKey{}, 0, "not a window"},
		{"streams, short value", "streams", string(sk), "\x00\x01", winKey{}, 0, "8-byte count"},
		{"streams, short key", "streams", "abc", string(sv), winKey{}, 0, "8-byte count"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, n, err := decodeWindow(c.engine, 60_000, []byte(c.key), []byte(c.value))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil || w != c.want || n != c.count {
				t.Fatalf("got %v %d %v, want %v %d", w, n, err, c.want, c.count)
			}
		})
	}
}

// TestWindowCheck: the check counts each kind of difference, and two
// engines' outputs of the same windows have the same digest.
func TestWindowCheck(t *testing.T) {
	want := map[winKey]int64{{"a", 0}: 3, {"a", 60_000}: 1, {"b", 0}: 2, {"c", 0}: 5}
	type out struct {
		user         string
		start, count int64
	}
	for _, c := range []struct {
		name                          string
		outs                          []out
		exact                         bool
		records, dups, missing, wrong int
	}{
		{"exact", []out{{"a", 0, 3}, {"a", 60_000, 1}, {"b", 0, 2}, {"c", 0, 5}}, true, 4, 0, 0, 0},
		{"a window missing", []out{{"a", 0, 3}, {"a", 60_000, 1}, {"b", 0, 2}}, false, 3, 0, 1, 0},
		{"a count wrong", []out{{"a", 0, 3}, {"a", 60_000, 1}, {"b", 0, 1}, {"c", 0, 5}}, false, 4, 0, 0, 1},
		{"a window twice", []out{{"a", 0, 3}, {"a", 0, 3}, {"a", 60_000, 1}, {"b", 0, 2}, {"c", 0, 5}}, false, 5, 1, 0, 0},
		{"an extra window", []out{{"a", 0, 3}, {"a", 60_000, 1}, {"b", 0, 2}, {"c", 0, 5}, {"d", 0, 1}}, false, 5, 0, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var digests []uint64
			for _, engine := range []string{"fencepost", "streams"} {
				wc := newWindowCheck(engine, 60_000)
				for _, o := range c.outs {
					if engine == "streams" {
						wc.add(streamsWindow(o.user, o.start, o.count))
						continue
					}
					v := `{"key":"` + o.user + `","count":` + strconv.FormatInt(o.count, 10) + `,"window_start":"` + msTime(o.start) + `","window_end":"` + msTime(o.start+60_000) + `"}`
					wc.add([]byte(o.user), []byte(v))
				}
				r := wc.finish(want)
				if r.exact() != c.exact || r.records != c.records || r.duplicates != c.dups || r.missing != c.missing || r.wrong != c.wrong {
					t.Fatalf("%s: got %+v", engine, r)
				}
				if !c.exact && r.example == "" {
					t.Fatalf("%s: no example of the problem", engine)
				}
				digests = append(digests, r.digest)
			}
			if digests[0] != digests[1] {
				t.Fatalf("the same windows have digests %x and %x", digests[0], digests[1])
			}
		})
	}
}

// TestJoinCheck: every event of a table user once, with its row, is
// exact; the check finds what is missing, repeated or wrong.
func TestJoinCheck(t *testing.T) {
	sp := eventsSpec{records: 400, users: 20, partitions: 4, rate: 10, start: defaultStart}
	joined := func(i int) (key, value []byte) {
		k, v, _, _ := sp.event(i)
		_, r := row(sp.user(i))
		return k, append(append(v[:len(v)-1:len(v)-1], `,"profile":`...), append(r, '}')...)
	}
	var mine []int // the events of the table's users
	other := -1    // an event of a user not in the table
	for i := range sp.records {
		if sp.user(i) < sp.users {
			mine = append(mine, i)
		} else if other < 0 {
			other = i
		}
	}
	if len(mine) == 0 || other < 0 || len(mine) != sp.expectedJoined() {
		t.Fatalf("the spec gives %d joined events (expected %d), other %d: change it", len(mine), sp.expectedJoined(), other)
	}
	for _, c := range []struct {
		name                 string
		feed                 func(add func(k, v []byte))
		exact                bool
		dups, missing, wrong int
	}{
		{"exact", func(add func(k, v []byte)) {
			for _, i := range mine {
				add(joined(i))
			}
		}, true, 0, 0, 0},
		{"one missing, one twice", func(add func(k, v []byte)) {
			for _, i := range mine[1:] {
				add(joined(i))
			}
			add(joined(mine[2]))
		}, false, 1, 1, 0},
		{"an event of a user not in the table", func(add func(k, v []byte)) {
			for _, i := range mine {
				add(joined(i))
			}
			add(joined(other))
		}, false, 0, 0, 1},
		{"a wrong row", func(add func(k, v []byte)) {
			for _, i := range mine[1:] {
				add(joined(i))
			}
			k, v := joined(mine[0])
			add(k, []byte(strings.Replace(string(v), `"tier":"`, `"tier":"x`, 1)))
		}, false, 0, 1, 1},
		{"not JSON", func(add func(k, v []byte)) {
			for _, i := range mine {
				add(joined(i))
			}
			add([]byte("u000001"), []byte("{"))
		}, false, 0, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			jc := newJoinCheck(sp)
			c.feed(jc.add)
			r := jc.finish()
			if r.exact() != c.exact || r.duplicates != c.dups || r.missing != c.missing || r.wrong != c.wrong {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

// TestExpectedWindows: a record counts unless its window had closed on
// its partition's stream time (this record's own time included), and
// the closing record of each partition goes to that partition and past
// every window.
func TestExpectedWindows(t *testing.T) {
	sp := eventsSpec{records: 6000, users: 5, partitions: 2, rate: 100, start: defaultStart, lateEvery: 50, lateBy: 65_000, jitter: 5_000}
	got, late := sp.expectedWindows(60_000, 10_000)
	// the same by brute force: every record of a partition before it
	type ev struct {
		key string
		ts  int64
		p   int32
	}
	evs := make([]ev, sp.records)
	for i := range evs {
		k, _, ts, p := sp.event(i)
		evs[i] = ev{string(k), ts, p}
	}
	var wantLate int
	want := map[winKey]int64{}
	for i, e := range evs {
		k, ts, p := e.key, e.ts, e.p
		stream := ts
		for _, o := range evs[:i] {
			if o.p == p {
				stream = max(stream, o.ts)
			}
		}
		start := ts - ts%60_000
		if start+70_000 <= stream {
			wantLate++
			continue
		}
		want[winKey{k, start}]++
	}
	if late != wantLate || len(got) != len(want) {
		t.Fatalf("late %d, want %d; %d windows, want %d", late, wantLate, len(got), len(want))
	}
	for w, n := range want {
		if got[w] != n {
			t.Fatalf("window %v: %d, want %d", w, got[w], n)
		}
	}
	if late == 0 || late == sp.records/sp.lateEvery {
		t.Fatalf("%d late of %d lagging records: the test wants some lagging records late and some not", late, sp.records/sp.lateEvery)
	}
	for p := range sp.partitions {
		k, _, ts := sp.closer(p)
		if int(partitioner.Murmur2(k, sp.partitions)) != p || ts < sp.time(sp.records-1)+70_000 {
			t.Fatalf("closer of partition %d: key %q (partition %d), time %d", p, k, partitioner.Murmur2(k, sp.partitions), ts)
		}
	}
}

// TestEventTimes: event time advances at the rate, each event at most
// the jitter (and a lagging one the lag too) behind its place, and every
// table row is older than every event (Kafka Streams loads the table
// first only so).
func TestEventTimes(t *testing.T) {
	sp := eventsSpec{records: 10_000, users: 50, partitions: 4, rate: 1000, start: defaultStart, lateEvery: 97, lateBy: 65_000, jitter: 5_000}
	lagging := 0
	for i := range sp.records {
		place := sp.start + int64(i)
		ts := sp.time(i)
		if ts > place || ts < place-sp.jitter-sp.lateBy || ts <= sp.tableTime() {
			t.Fatalf("event %d at %d: place %d, table rows at %d", i, ts, place, sp.tableTime())
		}
		if ts < place-sp.jitter {
			lagging++
		}
		if k, v, ts2, p := sp.event(i); ts2 != ts || p != partitioner.Murmur2(k, sp.partitions) || !strings.Contains(string(v), `"ts":`+strconv.FormatInt(ts, 10)) {
			t.Fatalf("event %d: %q %q %d, partition %d", i, k, v, ts2, p)
		}
	}
	if lagging != sp.records/sp.lateEvery {
		t.Fatalf("%d lagging events, want %d", lagging, sp.records/sp.lateEvery)
	}
}
