//go:build unix

package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// -window: what the aggregate must emit, from what it read. Under
// exactly_once the aggregate processes the repartition topic's committed
// records once each, in offset order per partition, so replaying that
// order with the stage's rule for windows gives every window it must
// emit, with its fields.

// windowRecord is a record of the repartition topic as the aggregate
// sees it: its group key (the user of its value), its event time (the
// record timestamp) and the id it carries.
type windowRecord struct {
	user string
	at   int64 // event time, epoch milliseconds
	id   int64
}

// windowKey names a window of the aggregate: a user and the window's
// start (epoch milliseconds).
type windowKey struct {
	user  string
	start int64
}

func (k windowKey) String() string { return fmt.Sprintf("%s@%d", k.user, k.start) }

// windowAgg is what a window holds: the loop's fields n (count()),
// id_sum (sum(json.id)), first_id and last_id (first(json.id) and
// last(json.id), in offset order).
type windowAgg struct{ n, idSum, first, last int64 }

func (a *windowAgg) add(id int64) {
	if a.n == 0 {
		a.first = id
	}
	a.n++
	a.idSum += id
	a.last = id
}

func (a windowAgg) String() string {
	return fmt.Sprintf("n %d, id_sum %d, ids %d..%d", a.n, a.idSum, a.first, a.last)
}

// windowRule is the aggregate's tumbling window, in milliseconds: size,
// grace, and max_future (0: no limit).
type windowRule struct{ size, grace, maxFuture int64 }

// start is the start of the window holding event time t.
func (w windowRule) start(t int64) int64 {
	s := t / w.size * w.size
	if t < 0 && t%w.size != 0 {
		s -= w.size
	}
	return s
}

// closedBy reports whether the window starting at start has closed once
// stream time reached stream: its end plus grace is not after it.
func (w windowRule) closedBy(start, stream int64) bool { return start+w.size+w.grace <= stream }

// replayed is what the aggregate makes of the repartition topic.
type replayed struct {
	// closed are the windows closed by the final stream time of their
	// partition: the ones it must emit. (A user on two partitions would
	// have its windows of one overwrite those of the other; the
	// repartition check counts such users.)
	closed map[windowKey]windowAgg
	// open are the windows counted but not closed at the end
	open int
	// counted are the records counted in a window, late the ones
	// dropped: every window they fall in had closed (or the time was
	// more than max_future ahead)
	counted, late int64
	// stream is each partition's final stream time
	stream map[int32]int64
}

// replay runs the aggregate's rule over each partition's records, in
// offset order: stream time (the highest event time seen on the
// partition) advances with the record first, unless the record is more
// than max_future ahead of it (late); then every window with end + grace
// at or before stream time closes; then the record counts in its window
// if that window has not closed, and is late otherwise.
func (w windowRule) replay(parts map[int32][]windowRecord) *replayed {
	r := &replayed{closed: map[windowKey]windowAgg{}, stream: map[int32]int64{}}
	for p, recs := range parts {
		open := map[windowKey]*windowAgg{}
		var stream int64
		known := false
		for _, rec := range recs {
			if w.maxFuture > 0 && known && rec.at > stream+w.maxFuture {
				r.late++
				continue
			}
			if !known || rec.at > stream {
				known, stream = true, rec.at
				for k, a := range open {
					if w.closedBy(k.start, stream) {
						r.closed[k] = *a
						delete(open, k)
					}
				}
			}
			s := w.start(rec.at)
			if w.closedBy(s, stream) {
				r.late++
				continue
			}
			k := windowKey{rec.user, s}
			a := open[k]
			if a == nil {
				a = &windowAgg{}
				open[k] = a
			}
			a.add(rec.id)
			r.counted++
		}
		if known {
			r.stream[p] = stream
		}
		r.open += len(open)
	}
	return r
}

// windowJudged compares the windows emitted with the windows expected.
type windowJudged struct {
	expected int
	// exact: emitted once, with every field as expected
	exact int
	// missing: expected, never emitted; repeated: emitted more than
	// once (copies: the emissions past the first)
	missing, repeated int
	copies            int64
	// under, over: an emission with a count below, above the expected
	// one; otherRecords: an emission with the expected count whose
	// id_sum, first_id or last_id differ (other records counted)
	under, over, otherRecords int
	// unexpected: emitted, but not a window expected
	unexpected int
	firstWrong []string
}

// judgeWindows compares the emissions read from "out", per window, with
// the windows expected.
func judgeWindows(expected map[windowKey]windowAgg, emitted map[windowKey][]windowAgg) windowJudged {
	j := windowJudged{expected: len(expected)}
	wrong := func(format string, a ...any) {
		if len(j.firstWrong) < 8 {
			j.firstWrong = append(j.firstWrong, fmt.Sprintf(format, a...))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(expected), compareWindows) {
		want := expected[k]
		got := emitted[k]
		if len(got) == 0 {
			j.missing++
			wrong("%v: never emitted (expected %v)", k, want)
			continue
		}
		if len(got) > 1 {
			j.repeated++
			j.copies += int64(len(got) - 1)
		}
		var under, over, other bool
		for _, g := range got {
			switch {
			case g.n < want.n:
				under = true
			case g.n > want.n:
				over = true
			case g != want:
				other = true
			}
		}
		if under {
			j.under++
		}
		if over {
			j.over++
		}
		if other {
			j.otherRecords++
		}
		if len(got) == 1 && got[0] == want {
			j.exact++
		} else {
			wrong("%v: emitted %s, expected %v", k, emissionsText(got), want)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(emitted), compareWindows) {
		if _, ok := expected[k]; !ok {
			j.unexpected++
			wrong("%v: emitted %s, not expected", k, emissionsText(emitted[k]))
		}
	}
	return j
}

func compareWindows(a, b windowKey) int {
	if c := strings.Compare(a.user, b.user); c != 0 {
		return c
	}
	return int(min(max(a.start-b.start, -1), 1))
}

func emissionsText(es []windowAgg) string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.String()
	}
	return strings.Join(s, " and ")
}

// wrong reports whether the emissions fail the guarantee: at
// exactly_once anything but every window expected emitted once, exact,
// and nothing else; at at_least_once a window missing or an emission
// counting fewer records than expected.
func (j windowJudged) wrong(guarantee string) bool {
	if guarantee == "exactly_once" {
		return j.exact != j.expected || j.unexpected > 0
	}
	return j.missing > 0 || j.under > 0
}

// inputRecords is what "in" holds of each id produced: its copies (one,
// unless the input has duplicates of its own: a producer retry the
// broker did not deduplicate) and their timestamp.
type inputRecords struct {
	copies []uint32
	at     []int64 // -1: no copy
}

func newInputRecords(produced int64) *inputRecords {
	in := &inputRecords{copies: make([]uint32, produced), at: make([]int64, produced)}
	for i := range in.at {
		in.at[i] = -1
	}
	return in
}

// add notes a copy of id in "in" with timestamp at (an id never
// produced is left out).
func (in *inputRecords) add(id, at int64) {
	if id >= 0 && id < int64(len(in.copies)) {
		in.copies[id]++
		in.at[id] = at
	}
}

// duplicated and absent count the ids "in" holds more than once, and not
// at all.
func (in *inputRecords) duplicated() (dup, absent int64) {
	for _, n := range in.copies {
		switch {
		case n > 1:
			dup++
		case n == 0:
			absent++
		}
	}
	return dup, absent
}

// repartitionFig is the repartition topic checked against "in": the
// records it holds must be the input records, each with its input's
// timestamp (the event time), keyed and placed by their user.
type repartitionFig struct {
	records int64 // data records read
	// missing: input records it lacks; repeated: ids it holds more
	// often than "in" (copies: the records too many)
	missing, repeated, copies int64
	// timeDiffers: records whose timestamp is not their input's;
	// splitUsers: users on more than one partition
	timeDiffers int64
	splitUsers  int
	first       []string
}

// checkRepartition compares the repartition topic's records (per
// partition) with the input records: each once (as often as "in" holds
// its id), with its timestamp.
func checkRepartition(in *inputRecords, parts map[int32][]windowRecord) repartitionFig {
	var f repartitionFig
	note := func(format string, a ...any) {
		if len(f.first) < 5 {
			f.first = append(f.first, fmt.Sprintf(format, a...))
		}
	}
	seen := make([]uint32, len(in.copies))
	userParts := map[string][]int32{}
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		for _, r := range parts[p] {
			f.records++
			if ps := userParts[r.user]; !slices.Contains(ps, p) {
				userParts[r.user] = append(ps, p)
			}
			if r.id < 0 || r.id >= int64(len(seen)) {
				continue // (the reader counts ids never produced as strays)
			}
			seen[r.id]++
			if at := in.at[r.id]; at >= 0 && at != r.at {
				f.timeDiffers++
				note("id %d: timestamp %d in the repartition topic, %d in %q", r.id, r.at, at, inputT)
			}
		}
	}
	for id, n := range seen {
		switch want := in.copies[id]; {
		case n < want:
			f.missing += int64(want - n)
			note("id %d is %d times in %q, %d in the repartition topic", id, want, inputT, n)
		case n > want:
			f.repeated++
			f.copies += int64(n - want)
			note("id %d is %d times in %q, %d in the repartition topic", id, want, inputT, n)
		}
	}
	for _, u := range slices.Sorted(maps.Keys(userParts)) {
		if ps := userParts[u]; len(ps) > 1 {
			f.splitUsers++
			note("user %s is on partitions %v", u, ps)
		}
	}
	return f
}
