package builtin_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// The property tests below run random records through aggregate and
// dedupe with stagetest (the pipeline's own chain, failure isolation and
// store code), in several Runs over one stagetest.State, with crashes
// between Runs and a replay check, and compare every record that comes
// out, and every dead letter, with a reference written as plainly as
// possible: a window is the list of its records, its fields are
// computed from that list when it is emitted, and lateness, closing and
// merging are decided by looking at every window.

// mEvent is one generated record.
type mEvent struct {
	partition int32
	offset    int64
	user      string // "" for none (the record fails: no key)
	t         int64  // event time, ms
	badTime   bool   // ts is not a time (the record fails)
	rfc       bool   // ts written as RFC 3339
	p         any    // nil, int, float64, or "x" (not a number: the record fails if counted)
	id        any    // nil, int or string
}

func (e mEvent) record(keyFromValue bool) stages.Record {
	v := map[string]any{"id": e.id}
	if e.user != "" && keyFromValue {
		v["user"] = e.user
	}
	switch {
	case e.badTime:
		v["ts"] = "yesterday"
	case e.rfc:
		v["ts"] = time.UnixMilli(e.t).UTC().Format(time.RFC3339Nano)
	default:
		v["ts"] = e.t
	}
	b, _ := json.Marshal(v)
	// a float written as such, so that the stage reads a float64
	var p string
	switch x := e.p.(type) {
	case nil:
		p = "null"
	case int:
		p = strconv.Itoa(x)
	case float64:
		p = strconv.FormatFloat(x, 'f', 2, 64)
	case string:
		p = strconv.Quote(x)
	}
	b = append(b[:len(b)-1], `,"p":`+p+`}`...)
	r := stages.Record{Topic: "in", Partition: e.partition, Offset: e.offset, Value: b, Timestamp: time.UnixMilli(e.t)}
	if e.user != "" && !keyFromValue {
		r.Key = []byte(e.user)
	}
	return r
}

// mConfig is one aggregate configuration.
type mConfig struct {
	kind                      string // "", tumbling, hopping, session
	size, advance, gap, grace int64
	onClose, lateDL           bool
	maxFuture                 int64
	keyFromValue, timeFromTS  bool
}

func (c mConfig) options() stages.Options {
	o := stages.Options{
		"fields": map[string]string{"n": "count()", "s": "sum(json.p)", "mn": "min(json.p)", "mx": "max(json.p)",
			"a": "avg(json.p)", "f": "first(json.id)", "l": "last(json.id)"},
		"max_future": time.Duration(c.maxFuture) * time.Millisecond,
		"store":      "agg",
	}
	if c.keyFromValue {
		o["key"], o["repartition"] = "json.user", false
	}
	if c.kind != "" {
		w := map[string]string{"type": c.kind, "grace": fmt.Sprintf("%dms", c.grace)}
		switch c.kind {
		case "tumbling":
			w["size"] = fmt.Sprintf("%dms", c.size)
		case "hopping":
			w["size"], w["advance"] = fmt.Sprintf("%dms", c.size), fmt.Sprintf("%dms", c.advance)
		case "session":
			w["gap"] = fmt.Sprintf("%dms", c.gap)
		}
		o["window"] = w
		if c.timeFromTS {
			o["time"] = "json.ts"
		}
		o["emit"] = map[bool]string{true: "on_close", false: "on_update"}[c.onClose]
		o["late"] = map[bool]string{true: "dead_letter", false: "drop"}[c.lateDL]
	}
	return o
}

// mWindow is a window of the reference: its records.
type mWindow struct {
	key        string
	start, end int64 // time window: [start, end); session: first and last record's times
	recs       []mEvent
}

// mAgg is the reference aggregate of one partition.
type mAgg struct {
	c      mConfig
	known  bool
	stream int64
	open   []*mWindow
}

func (m *mAgg) clone() *mAgg {
	n := *m
	n.open = nil
	for _, w := range m.open {
		c := *w
		c.recs = slices.Clone(w.recs)
		n.open = append(n.open, &c)
	}
	return &n
}

func (m *mAgg) closeTime(w *mWindow) int64 {
	if m.c.kind == "session" {
		return w.end + m.c.gap + m.c.grace + 1
	}
	return w.end + m.c.grace
}

// mOutcome is what the reference expects of one record.
type mOutcome struct {
	out  []string // "key|value" of each output, in order
	fail string   // a substring of the dead letter's error, "" if it does not fail
}

// step processes e; it returns the outcome and the state after it (the
// state is unchanged when the record fails).
func (m *mAgg) step(e mEvent) (mOutcome, *mAgg) {
	if e.user == "" {
		return mOutcome{fail: "key"}, m
	}
	if m.c.kind == "" {
		if e.p == "x" {
			return mOutcome{fail: "needs numbers"}, m
		}
		n := m.clone()
		var w *mWindow
		for _, x := range n.open {
			if x.key == e.user {
				w = x
			}
		}
		if w == nil {
			w = &mWindow{key: e.user}
			n.open = append(n.open, w)
		}
		w.recs = append(w.recs, e)
		return mOutcome{out: []string{n.value(w)}}, n
	}
	if e.badTime {
		return mOutcome{fail: "event time"}, m
	}
	late := func(n *mAgg) (mOutcome, *mAgg) {
		if m.c.lateDL {
			return mOutcome{fail: "late record"}, m
		}
		return mOutcome{}, n
	}
	if m.c.maxFuture > 0 && m.known && e.t > m.stream+m.c.maxFuture {
		return late(m)
	}
	n := m.clone()
	if !n.known || e.t > n.stream {
		n.known, n.stream = true, e.t
	}
	var o mOutcome
	// windows close, in the order of their close time, start and key
	var closing []*mWindow
	for _, w := range n.open {
		if n.closeTime(w) <= n.stream {
			closing = append(closing, w)
		}
	}
	slices.SortFunc(closing, func(a, b *mWindow) int {
		return cmp.Or(cmp.Compare(n.closeTime(a), n.closeTime(b)), cmp.Compare(a.start, b.start), strings.Compare(a.key, b.key))
	})
	for _, w := range closing {
		if n.c.onClose {
			o.out = append(o.out, n.value(w))
		}
		n.open = slices.DeleteFunc(n.open, func(x *mWindow) bool { return x == w })
	}
	if n.c.kind == "session" {
		merged := &mWindow{key: e.user, start: e.t, end: e.t}
		var parts []*mWindow
		for _, w := range n.open {
			if w.key == e.user && w.start-n.c.gap <= e.t && e.t <= w.end+n.c.gap {
				parts = append(parts, w)
				merged.start, merged.end = min(merged.start, w.start), max(merged.end, w.end)
				merged.recs = append(merged.recs, w.recs...)
			}
		}
		if n.closeTime(merged) <= n.stream {
			return late(n)
		}
		if e.p == "x" {
			return mOutcome{fail: "needs numbers"}, m
		}
		merged.recs = append(merged.recs, e)
		n.open = slices.DeleteFunc(n.open, func(x *mWindow) bool { return slices.Contains(parts, x) })
		n.open = append(n.open, merged)
		if !n.c.onClose {
			o.out = append(o.out, n.value(merged))
		}
		return o, n
	}
	advance := n.c.advance
	if n.c.kind == "tumbling" {
		advance = n.c.size
	}
	var starts []int64
	for s := int64(math.Floor(float64(e.t)/float64(advance))) * advance; s > e.t-n.c.size; s -= advance {
		starts = append(starts, s)
	}
	slices.Sort(starts)
	counted := false
	for _, s := range starts {
		if s+n.c.size+n.c.grace <= n.stream {
			continue
		}
		counted = true
		if e.p == "x" {
			return mOutcome{fail: "needs numbers"}, m
		}
		var w *mWindow
		for _, x := range n.open {
			if x.key == e.user && x.start == s {
				w = x
			}
		}
		if w == nil {
			w = &mWindow{key: e.user, start: s, end: s + n.c.size}
			n.open = append(n.open, w)
		}
		w.recs = append(w.recs, e)
		if !n.c.onClose {
			o.out = append(o.out, n.value(w))
		}
	}
	if !counted {
		return late(n)
	}
	return o, n
}

// value is the output the reference expects for w: "key|value".
func (m *mAgg) value(w *mWindow) string {
	recs := slices.Clone(w.recs)
	slices.SortFunc(recs, func(a, b mEvent) int { return cmp.Compare(a.offset, b.offset) })
	var nums []any
	var first, last any
	for _, r := range recs {
		if r.p != nil {
			nums = append(nums, r.p)
		}
		if r.id != nil {
			if first == nil {
				first = r.id
			}
			last = r.id
		}
	}
	enc := func(v any) string {
		if v == nil {
			return "null"
		}
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	// sum: an int while every value is; min and max: of equal values the int
	var sum, mn, mx any
	for _, v := range nums {
		switch {
		case sum == nil:
			sum, mn, mx = v, v, v
			continue
		case isInt(sum) && isInt(v):
			sum = sum.(int) + v.(int)
		default:
			sum = asFloat(sum) + asFloat(v)
		}
		if asFloat(v) < asFloat(mn) || asFloat(v) == asFloat(mn) && isInt(v) {
			mn = v
		}
		if asFloat(v) > asFloat(mx) || asFloat(v) == asFloat(mx) && isInt(v) {
			mx = v
		}
	}
	var avg any
	if sum != nil {
		avg = asFloat(sum) / float64(len(nums))
	}
	// fields sorted by name: a f l mn mx n s
	v := fmt.Sprintf(`{"key":%s,"a":%s,"f":%s,"l":%s,"mn":%s,"mx":%s,"n":%d,"s":%s`,
		enc(w.key), enc(avg), enc(first), enc(last), enc(mn), enc(mx), len(recs), enc(sum))
	if m.c.kind != "" {
		ts := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }
		v += fmt.Sprintf(`,"window_start":%q,"window_end":%q`, ts(w.start), ts(w.end))
	}
	return w.key + "|" + v + "}"
}

func isInt(v any) bool { _, ok := v.(int); return ok }

func asFloat(v any) float64 {
	if i, ok := v.(int); ok {
		return float64(i)
	}
	return v.(float64)
}

// drawEvents draws records over partitions 0 and 1, in offset order per
// partition, with event times that mostly advance and sometimes jump
// back (within grace, or beyond) or far ahead.
func drawEvents(t *rapid.T, kind string, dedupe bool) []mEvent {
	n := rapid.IntRange(1, 60).Draw(t, "records")
	users := rapid.IntRange(1, 4).Draw(t, "users")
	const base = 1_767_225_600_000 // 2026-01-01
	clock := [2]int64{base, base}
	next := [2]int64{}
	var out []mEvent
	for range n {
		p := rapid.Int32Range(0, 1).Draw(t, "partition")
		e := mEvent{partition: p, offset: next[p]}
		next[p] += rapid.Int64Range(1, 2).Draw(t, "offset gap")
		if rapid.IntRange(0, 30).Draw(t, "no user") > 0 {
			e.user = "u" + strconv.Itoa(rapid.IntRange(0, users-1).Draw(t, "user"))
		}
		clock[p] += rapid.Int64Range(0, 12).Draw(t, "tick")
		e.t = clock[p]
		switch rapid.IntRange(0, 9).Draw(t, "time kind") {
		case 0, 1:
			e.t -= rapid.Int64Range(1, 60).Draw(t, "back") // late, or within grace
		case 2:
			e.t += rapid.Int64Range(40, 300).Draw(t, "ahead") // beyond max_future, or a jump
		case 3:
			e.badTime = kind != "" && rapid.IntRange(0, 3).Draw(t, "bad time") == 0
		}
		e.rfc = rapid.Bool().Draw(t, "rfc3339")
		if !dedupe {
			switch rapid.IntRange(0, 9).Draw(t, "p kind") {
			case 0:
			case 1, 2, 3:
				e.p = rapid.IntRange(-50, 50).Draw(t, "int p")
			case 4:
				e.p = "x"
			default:
				e.p = float64(rapid.IntRange(-200, 200).Draw(t, "quarters")) / 4
			}
			switch rapid.IntRange(0, 3).Draw(t, "id kind") {
			case 0:
			case 1:
				e.id = fmt.Sprintf("o-%d", e.offset)
			default:
				e.id = int(e.offset)
			}
		}
		out = append(out, e)
	}
	return out
}

// piece is one Run of runInPieces: its events and its result.
type piece struct {
	events []mEvent
	res    stagetest.Result
}

// runInPieces runs the records through the stage in 1 to 4 Runs over one
// State, crashing between some, one of them checked for replay, and
// returns each Run and the State after the last.
func runInPieces(t *rapid.T, st stages.Stage, events []mEvent, keyFromValue bool) ([]piece, *stagetest.State) {
	state := stagetest.NewState()
	cuts := rapid.SliceOfN(rapid.IntRange(0, len(events)), 0, 3).Draw(t, "cuts")
	cuts = append(cuts, 0, len(events))
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	replay := rapid.IntRange(0, len(cuts)-2).Draw(t, "replayed run")
	var out []piece
	for i := 0; i+1 < len(cuts); i++ {
		evs := events[cuts[i]:cuts[i+1]]
		var recs []stages.Record
		for _, e := range evs {
			recs = append(recs, e.record(keyFromValue))
		}
		rn := stagetest.Runner{State: state, BatchSize: rapid.IntRange(0, 6).Draw(t, "batch size")}
		if i > 0 && rapid.Bool().Draw(t, "crash") {
			state.Crash()
		}
		named := stagetest.NamedStage{Name: "stage", Stage: st}
		var res stagetest.Result
		if i == replay {
			res = rn.CheckReplay(t, state, recs, named)
		} else {
			res = rn.Run(t, recs, named)
		}
		if len(res.Stopped) > 0 || len(res.Mutated) > 0 {
			t.Fatalf("run %d: stopped %v, mutated %v", i, res.Stopped, res.Mutated)
		}
		out = append(out, piece{evs, res})
	}
	if t.Failed() {
		t.FailNow()
	}
	return out, state
}

// compareRun checks a Run's outputs and dead letters against the
// reference's outcomes of its events (listed by partition, as
// stagetest.Result lists them).
func compareRun(t *rapid.T, i int, p piece, outcome map[[2]int64]mOutcome) {
	var want, wantDead []string
	for part := int32(0); part <= 1; part++ {
		for _, e := range p.events {
			if e.partition != part {
				continue
			}
			o := outcome[[2]int64{int64(e.partition), e.offset}]
			for _, v := range o.out {
				want = append(want, fmt.Sprintf("%d@%d %s", part, e.offset, v))
			}
			if o.fail != "" {
				wantDead = append(wantDead, fmt.Sprintf("%d@%d %s", part, e.offset, o.fail))
			}
		}
	}
	var got []string
	for _, r := range p.res.Outputs {
		got = append(got, fmt.Sprintf("%d@%d %s|%s", r.Partition, r.Offset, r.Key, r.Value))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("run %d outputs:\n%s\nwant:\n%s", i, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(p.res.DeadLetters) != len(wantDead) {
		var dl []string
		for _, r := range p.res.DeadLetters {
			dl = append(dl, fmt.Sprintf("%d@%d %s", r.Partition, r.Offset, header(r, stages.HeaderErrorMessage)))
		}
		t.Fatalf("run %d dead letters:\n%s\nwant:\n%s", i, strings.Join(dl, "\n"), strings.Join(wantDead, "\n"))
	}
	for j, r := range p.res.DeadLetters {
		got := fmt.Sprintf("%d@%d ", r.Partition, r.Offset)
		msg := header(r, stages.HeaderErrorMessage)
		if !strings.HasPrefix(wantDead[j], got) || !strings.Contains(msg, strings.TrimPrefix(wantDead[j], got)) {
			t.Fatalf("run %d dead letter %d: %s%s, want %s", i, j, got, msg, wantDead[j])
		}
	}
}

func TestAggregateModel(t *testing.T) {
	for _, kind := range []string{"", "tumbling", "hopping", "session"} {
		t.Run("window="+kind, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				c := mConfig{kind: kind,
					onClose:      kind != "" && rapid.Bool().Draw(t, "on_close"),
					lateDL:       rapid.Bool().Draw(t, "late dead_letter"),
					maxFuture:    rapid.SampledFrom([]int64{0, 30, 100}).Draw(t, "max_future"),
					keyFromValue: rapid.Bool().Draw(t, "key from value"),
					timeFromTS:   rapid.Bool().Draw(t, "time from json.ts"),
					grace:        rapid.SampledFrom([]int64{0, 5, 20}).Draw(t, "grace"),
				}
				switch kind {
				case "tumbling":
					c.size = rapid.Int64Range(1, 40).Draw(t, "size")
				case "hopping":
					c.size = rapid.Int64Range(2, 40).Draw(t, "size")
					c.advance = rapid.Int64Range(1, c.size).Draw(t, "advance")
				case "session":
					c.gap = rapid.Int64Range(1, 25).Draw(t, "gap")
				}
				if kind == "" {
					c.lateDL, c.maxFuture, c.timeFromTS = false, 0, false
				}
				events := drawEvents(t, kind, false)
				if !c.timeFromTS { // the record timestamp: always a time
					for i := range events {
						events[i].badTime = false
					}
				}
				st, err := stagetest.Build("aggregate", c.options(), stagetest.Env(nil, nil))
				if err != nil {
					t.Fatal(err)
				}
				outcome := map[[2]int64]mOutcome{}
				models := [2]*mAgg{{c: c}, {c: c}}
				for _, e := range events {
					o, next := models[e.partition].step(e)
					outcome[[2]int64{int64(e.partition), e.offset}] = o
					models[e.partition] = next
				}
				pieces, state := runInPieces(t, st, events, c.keyFromValue)
				for i, p := range pieces {
					compareRun(t, i, p, outcome)
				}
				// closed windows have left the store: it holds the open ones
				for part, m := range models {
					count := map[byte]int{}
					for k := range state.Contents("agg", int32(part)) {
						count[k[0]]++
					}
					keys := map[string]bool{}
					for _, w := range m.open {
						keys[w.key] = true
					}
					var want map[byte]int
					switch kind {
					case "":
						want = map[byte]int{'a': len(m.open)}
					case "session":
						// an entry per session, and those of sessions merged
						// into an earlier one until they fall due
						want = map[byte]int{'s': len(keys), 'x': max(count['x'], len(m.open))}
					default: // a window is its index entry
						want = map[byte]int{'x': len(m.open)}
					}
					if len(count) > 0 || len(m.open) > 0 {
						want['m'] = 1
					}
					for b := range want {
						if want[b] == 0 {
							delete(want, b)
						}
					}
					if fmt.Sprint(count) != fmt.Sprint(want) {
						t.Fatalf("partition %d: the store holds %v entries by prefix, want %v (open windows %d)", part, count, want, len(m.open))
					}
				}
			})
		})
	}
}

// mDedupe is the reference dedupe of one partition.
type mDedupe struct {
	within int64
	known  bool
	stream int64
	seen   map[string]int64
}

func (m *mDedupe) step(e mEvent) (pass bool, fail string) {
	if e.user == "" {
		return false, "key"
	}
	if e.badTime {
		return false, "event time"
	}
	if !m.known || e.t > m.stream {
		m.known, m.stream = true, e.t
	}
	for k, t0 := range m.seen {
		if t0+m.within <= m.stream {
			delete(m.seen, k)
		}
	}
	if t0, ok := m.seen[e.user]; ok {
		if e.t-t0 < m.within && t0-e.t < m.within {
			return false, ""
		}
		return true, ""
	}
	if e.t+m.within > m.stream {
		m.seen[e.user] = e.t
	}
	return true, ""
}

func TestDedupeModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		within := rapid.Int64Range(1, 60).Draw(t, "within")
		keyFromValue := rapid.Bool().Draw(t, "key from value")
		timeFromTS := rapid.Bool().Draw(t, "time from json.ts")
		opts := stages.Options{"within": time.Duration(within) * time.Millisecond, "store": "dd"}
		if keyFromValue {
			opts["key"], opts["repartition"] = "json.user", false
		}
		if timeFromTS {
			opts["time"] = "json.ts"
		}
		events := drawEvents(t, "dedupe", true)
		if !timeFromTS {
			for i := range events {
				events[i].badTime = false
			}
		}
		st, err := stagetest.Build("dedupe", opts, stagetest.Env(nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		outcome := map[[2]int64]mOutcome{}
		models := [2]*mDedupe{{within: within, seen: map[string]int64{}}, {within: within, seen: map[string]int64{}}}
		for _, e := range events {
			pass, fail := models[e.partition].step(e)
			o := mOutcome{fail: fail}
			if pass {
				r := e.record(keyFromValue)
				o.out = []string{string(r.Key) + "|" + string(r.Value)}
			}
			outcome[[2]int64{int64(e.partition), e.offset}] = o
		}
		pieces, state := runInPieces(t, st, events, keyFromValue)
		for i, p := range pieces {
			compareRun(t, i, p, outcome)
		}
		for part, m := range models {
			count := map[byte]int{}
			for k := range state.Contents("dd", int32(part)) {
				count[k[0]]++
			}
			if count['k'] != len(m.seen) || count['x'] != len(m.seen) {
				t.Fatalf("partition %d: the store holds %v entries by prefix, want %d keys", part, count, len(m.seen))
			}
		}
	})
}
