package builtin_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

func TestStatefulBadOptions(t *testing.T) {
	count := map[string]string{"n": "count()"}
	tumbling := map[string]string{"type": "tumbling", "size": "1m"}
	tests := []struct {
		stage  string
		opts   stages.Options
		option string // the option the *stages.OptionError names
		msg    string // in the error
	}{
		{"aggregate", stages.Options{}, "fields", "required"},
		{"aggregate", stages.Options{"fields": map[string]string{}}, "fields", "at least one field, such as orders: count()"},
		{"aggregate", stages.Options{"fields": map[string]string{"n": "count(1)"}}, "fields", `fields["n"]: count() takes no argument`},
		{"aggregate", stages.Options{"fields": map[string]string{"s": "sum()"}}, "fields", `fields["s"]: sum takes one argument`},
		{"aggregate", stages.Options{"fields": map[string]string{"s": "sum(json.a, json.b)"}}, "fields", "sum takes one argument"},
		{"aggregate", stages.Options{"fields": map[string]string{"s": "sum(json.a) + 1"}}, "fields", `"sum(json.a) + 1" is not one call of count(), sum(x)`},
		{"aggregate", stages.Options{"fields": map[string]string{"s": "sum(json.a) + sum(json.b)"}}, "fields", "is not one call"},
		{"aggregate", stages.Options{"fields": map[string]string{"s": "median(json.a)"}}, "fields", "is not one call"},
		{"aggregate", stages.Options{"fields": map[string]string{"s": "json.a"}}, "fields", "is not one call"},
		{"aggregate", stages.Options{"fields": map[string]string{"s": "sum(json.)"}}, "fields", `fields["s"]`},
		{"aggregate", stages.Options{"fields": map[string]string{"s": "max(nosuch)"}}, "fields", "unknown name nosuch"},
		{"aggregate", stages.Options{"fields": map[string]string{"key": "count()"}}, "fields", `"key" is the output's own member`},
		{"aggregate", stages.Options{"fields": map[string]string{"window_end": "count()"}}, "fields", "own member"},
		{"aggregate", stages.Options{"fields": map[string]string{" ": "count()"}}, "fields", "a field needs a name"},
		{"aggregate", stages.Options{"fields": count, "key": "json.user +", "repartition": false}, "key", "unexpected token"},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{}}, "window", "window needs a type: tumbling, hopping or session"},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "weekly"}}, "window", `window type "weekly" is not one of tumbling, hopping, session`},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "tumbling"}}, "window", "a tumbling window needs size"},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "tumbling", "size": "1m", "gap": "5s"}}, "window",
			"a tumbling window has no gap (a tumbling window has size)"},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "hopping", "size": "1m"}}, "window", "a hopping window needs advance"},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "session", "gap": "1m", "size": "1m"}}, "window", "a session window has no size"},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "hopping", "size": "1m", "advance": "2m"}}, "window",
			"window advance 2m0s is longer than its size 1m0s"},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "hopping", "size": "1h", "advance": "1s"}}, "window",
			"window size / advance is 3600: each record would update that many windows; at most 1000"},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "session", "gap": "0s"}}, "window", "window gap: must be longer than 0"},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "session", "gap": "soon"}}, "window", `window gap: "soon" is not a duration`},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "session", "gap": "1500us"}}, "window", "not a whole number of milliseconds"},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "tumbling", "size": "1m", "grace": "-1s"}}, "window", "window grace: -1s is negative"},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "tumbling", "size": "1m", "idle_close": "5m"}}, "window",
			"idle_close is not available yet"},
		{"aggregate", stages.Options{"fields": count, "window": map[string]string{"type": "tumbling", "sise": "1m"}}, "window",
			`window has no key "sise" (its keys: type, size, advance, gap, grace)`},
		{"aggregate", stages.Options{"fields": count, "time": "json.ts"}, "time", "event time applies to windows"},
		{"aggregate", stages.Options{"fields": count, "window": tumbling, "time": "json.ts +"}, "time", "unexpected token"},
		{"aggregate", stages.Options{"fields": count, "emit": "on_close"}, "emit", "on_close needs a window"},
		{"aggregate", stages.Options{"fields": count, "emit": "sometimes"}, "emit", `"sometimes" is not one of on_update, on_close`},
		{"aggregate", stages.Options{"fields": count, "late": "ignore"}, "late", `"ignore" is not one of drop, dead_letter`},
		{"aggregate", stages.Options{"fields": count, "max_future": -time.Second}, "max_future", "want 0 (no limit) or a positive"},
		{"aggregate", stages.Options{"fields": count, "store": "my store"}, "store", `store name "my store"`},
		{"dedupe", stages.Options{}, "within", "required"},
		{"dedupe", stages.Options{"within": time.Duration(0)}, "within", "want a positive whole number of milliseconds"},
		{"dedupe", stages.Options{"within": 1500 * time.Microsecond}, "within", "want a positive whole number of milliseconds"},
		{"dedupe", stages.Options{"within": time.Hour, "time": "json.ts)"}, "time", "unexpected token"},
		{"dedupe", stages.Options{"within": time.Hour, "store": ""}, "store", `store name ""`},
	}
	for _, tc := range tests {
		t.Run(tc.stage+"/"+tc.msg, func(t *testing.T) {
			st, err := stagetest.Build(tc.stage, tc.opts, stagetest.Env(nil, nil))
			if err == nil {
				t.Fatalf("built %T, want an error", st)
			}
			optionError(t, err, tc.option)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not contain %q", err, tc.msg)
			}
		})
	}
}

// jsonRec is a record of topic "in", partition 0, keyed, with a JSON
// value and a timestamp.
func jsonRec(offset int64, key, value string, ts time.Time) stages.Record {
	r := stages.Record{Topic: "in", Offset: offset, Value: []byte(value), Timestamp: ts}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}

// TestStatefulBadRecords: a record whose key, event time or field value
// is unusable fails alone, with an error that says what to do, and
// leaves the state as it was: the records around it are counted, it is
// not.
func TestStatefulBadRecords(t *testing.T) {
	ts := ts0
	tumble := stages.Options{"window": map[string]string{"type": "tumbling", "size": "1m"}, "emit": "on_update", "time": "json.ts",
		"fields": map[string]string{"n": "count()", "s": "sum(json.p)", "f": "first(json.x)"}}
	running := stages.Options{"fields": map[string]string{"n": "count()", "s": "sum(json.p)", "f": "first(json.x)"}}
	byUser := stages.Options{"fields": map[string]string{"n": "count()"}, "key": "json.user", "repartition": false}
	tests := []struct {
		name  string
		stage string
		opts  stages.Options
		bad   stages.Record
		msg   string
	}{
		{"null record key", "aggregate", running, jsonRec(1, "", `{"p":1}`, ts),
			"the record key is null: aggregate groups by the record key (set key: to an expression to group by)"},
		{"key expression nil", "aggregate", byUser, jsonRec(1, "k", `{"p":1}`, ts),
			`expression key: the key is nil (a missing field?): every record needs a key`},
		{"key expression fails", "aggregate", byUser, jsonRec(1, "k", `not json`, ts), "expression key"},
		{"sum of a string", "aggregate", running, jsonRec(1, "k", `{"p":"12"}`, ts), `expression fields["s"]: sum needs numbers: the value is string, not a number`},
		{"sum of a bool", "aggregate", running, jsonRec(1, "k", `{"p":true}`, ts), "sum needs numbers: the value is bool"},
		{"sum overflows", "aggregate", running, jsonRec(1, "k", `{"p":9223372036854775807}`, ts),
			"overflows a 64-bit integer (write float(x) to sum as floats)"},
		{"no JSON encoding", "aggregate", stages.Options{"fields": map[string]string{"n": "count()", "f": "first(json.p == 0 ? json.p / 0.0 : 1)"}},
			jsonRec(1, "k", `{"p":0}`, ts),
			`expression fields["f"]: the value has no JSON encoding`},
		{"time does not parse", "aggregate", tumble, jsonRec(1, "k", `{"p":1,"ts":"12:00"}`, ts),
			`expression time: event time "12:00" is not an RFC 3339 time (such as 2026-03-01T12:00:00Z) nor a number of epoch milliseconds`},
		{"time missing", "aggregate", tumble, jsonRec(1, "k", `{"p":1}`, ts), "expression time: event time is nil (a missing field?)"},
		{"time a fraction", "aggregate", tumble, jsonRec(1, "k", `{"p":1,"ts":1.5}`, ts), "event time 1.5 is not a whole number of epoch milliseconds"},
		{"time a bool", "aggregate", tumble, jsonRec(1, "k", `{"p":1,"ts":true}`, ts), "event time is bool: want epoch milliseconds"},
		{"time before 1970", "aggregate", tumble, jsonRec(1, "k", `{"p":1,"ts":-1}`, ts), "event time -1 (epoch milliseconds) is outside 1970-01-01 to 9999-12-31"},
		{"no timestamp", "aggregate", stages.Options{"window": map[string]string{"type": "session", "gap": "1m"}, "emit": "on_update",
			"fields": map[string]string{"n": "count()"}},
			jsonRec(1, "k", `{}`, time.Time{}), "the record has no timestamp (set the stage's time option"},
		{"dedupe null key", "dedupe", stages.Options{"within": time.Hour}, jsonRec(1, "", `{}`, ts), "the record key is null: dedupe groups by the record key"},
		{"dedupe bad time", "dedupe", stages.Options{"within": time.Hour, "time": "json.ts"}, jsonRec(1, "k", `{"ts":"soon"}`, ts), `event time "soon"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := build(t, tc.stage, tc.opts, stagetest.Env(nil, nil))
			good := func(off int64) stages.Record {
				key := "k"
				if tc.stage == "dedupe" {
					key = fmt.Sprint("k", off)
				}
				return jsonRec(off, key, fmt.Sprintf(`{"p":1,"user":"u","x":%d,"ts":%d}`, off, ts.UnixMilli()), ts)
			}
			res := stagetest.Runner{State: stagetest.NewState()}.CheckReplay(t, nil, []stages.Record{good(0), tc.bad, good(2)},
				stagetest.NamedStage{Name: tc.stage, Stage: st})
			if len(res.DeadLetters) != 1 || res.DeadLetters[0].Offset != 1 {
				t.Fatalf("dead letters %v, want the record at offset 1", res.DeadLetters)
			}
			if msg := header(res.DeadLetters[0], stages.HeaderErrorMessage); !strings.Contains(msg, tc.msg) {
				t.Errorf("error %q does not contain %q", msg, tc.msg)
			}
			if !slices.Equal(offsets(res.Outputs), []int64{0, 2}) {
				t.Fatalf("outputs from offsets %v, want 0 and 2", offsets(res.Outputs))
			}
			if tc.stage == "aggregate" {
				if v := string(res.Outputs[1].Value); !strings.Contains(v, `"n":2`) {
					t.Errorf("the second good record's output %s: the failed record counted, or the first did not", v)
				}
			}
		})
	}
}

// TestAggregateLate: a record whose windows closed is dropped, counted
// (event late_records_dropped) and logged (late: drop) or fails with an
// error saying so (late: dead_letter), as is one too far ahead of stream
// time (event future_records_dropped).
func TestAggregateLate(t *testing.T) {
	at := func(s string) time.Time { return ts0.Add(mustDuration(t, s)) }
	in := []stages.Record{
		jsonRec(0, "k", `{}`, at("0s")),
		jsonRec(1, "k", `{}`, at("70s")),  // stream time 70s: [0, 60s) closed (grace 5s)
		jsonRec(2, "k", `{}`, at("59s")),  // late
		jsonRec(3, "k", `{}`, at("100h")), // beyond max_future
		jsonRec(4, "k", `{}`, at("130s")), // closes [60s, 120s)
	}
	opts := stages.Options{"window": map[string]string{"type": "tumbling", "size": "1m", "grace": "5s"}, "fields": map[string]string{"n": "count()"}}
	log := &warnLog{}
	var counts stagetest.Counters
	st := build(t, "aggregate", opts, stages.Env{Log: log, Counter: counts.Counter})
	res := run(t, "aggregate", st, in...)
	if len(res.DeadLetters) != 0 || !slices.Equal(offsets(res.Outputs), []int64{1, 4}) {
		t.Fatalf("late: drop: outputs %v %v, dead letters %v", offsets(res.Outputs), values(res.Outputs), res.DeadLetters)
	}
	if got := log.lines(); len(got) != 2 || !strings.Contains(got[0], "dropped a late record (late: drop) [dropped_so_far 1 partition 0 offset 2 event_time 2026-03-01T12:00:59.000Z") ||
		!strings.Contains(got[1], "max_future (24h0m0s)") {
		t.Errorf("warnings %q", got)
	}
	if got, want := counts.All(), map[string]int64{"late_records_dropped": 1, "future_records_dropped": 1}; !maps.Equal(got, want) {
		t.Errorf("late: drop: counted %v, want %v", got, want)
	}

	opts["late"] = "dead_letter"
	env := stagetest.Env(nil, nil)
	var dlCounts stagetest.Counters
	env.Counter = dlCounts.Counter
	st = build(t, "aggregate", opts, env)
	res = run(t, "aggregate", st, in...)
	if !slices.Equal(offsets(res.DeadLetters), []int64{2, 3}) {
		t.Fatalf("late: dead_letter: dead letters %v", offsets(res.DeadLetters))
	}
	if got, want := dlCounts.All(), map[string]int64{"late_records_dropped": 0, "future_records_dropped": 0}; !maps.Equal(got, want) {
		t.Errorf("late: dead_letter: counted %v, want %v (the records failed)", got, want)
	}
	for i, want := range []string{
		"late record: event time 2026-03-01T12:00:59.000Z: its windows have closed (stream time 2026-03-01T12:01:10.000Z); " +
			"raise the window's grace to count such records, or set late: drop",
		"late record: event time 2026-03-05T16:00:00.000Z: it is more than max_future (24h0m0s) ahead of stream time " +
			"(stream time 2026-03-01T12:01:10.000Z); raise max_future (0: no limit) if such times are right, or set late: drop",
	} {
		if msg := header(res.DeadLetters[i], stages.HeaderErrorMessage); msg != want {
			t.Errorf("dead letter %d: %q, want %q", i, msg, want)
		}
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// warnLog keeps the warnings logged.
type warnLog struct {
	mu    sync.Mutex
	warns []string
}

func (l *warnLog) Debug(string, ...any) {}
func (l *warnLog) Info(string, ...any)  {}
func (l *warnLog) Error(string, ...any) {}
func (l *warnLog) Warn(msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.warns = append(l.warns, fmt.Sprint(msg, " ", kv))
}

func (l *warnLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.warns)
}

// TestAggregateShapeChange: a store written with other fields or another
// window is refused, with an error saying to name a new store, rather
// than read as something it is not.
func TestAggregateShapeChange(t *testing.T) {
	state := stagetest.NewState()
	rn := stagetest.Runner{State: state}
	one := build(t, "aggregate", stages.Options{"fields": map[string]string{"n": "count()"}}, stagetest.Env(nil, nil))
	rn.Run(t, []stages.Record{jsonRec(0, "k", `{}`, ts0)}, stagetest.NamedStage{Name: "aggregate", Stage: one})
	other := build(t, "aggregate", stages.Options{"fields": map[string]string{"n": "count()", "s": "sum(json.p)"}}, stagetest.Env(nil, nil))
	res := rn.Run(t, []stages.Record{jsonRec(1, "k", `{"p":1}`, ts0)}, stagetest.NamedStage{Name: "aggregate", Stage: other})
	if len(res.DeadLetters) != 1 || !strings.Contains(header(res.DeadLetters[0], stages.HeaderErrorMessage),
		`store "aggregate" holds the state of another configuration of this stage (its fields or window changed): give the stage a new store name (option store)`) {
		t.Fatalf("dead letters %v", res.DeadLetters)
	}
	renamed := build(t, "aggregate", stages.Options{"store": "aggregate2", "fields": map[string]string{"n": "count()", "s": "sum(json.p)"}}, stagetest.Env(nil, nil))
	res = rn.Run(t, []stages.Record{jsonRec(2, "k", `{"p":1}`, ts0)}, stagetest.NamedStage{Name: "aggregate", Stage: renamed})
	if got := values(res.Outputs); !slices.Equal(got, []string{`{"key":"k","n":1,"s":1}`}) {
		t.Fatalf("a new store: %q", got)
	}
}

// TestAggregateNumbers: a sum of ints is an int, one with a float a
// float; min and max compare ints with floats exactly; avg is a float;
// first and last keep the value's JSON; a nil value is skipped.
func TestAggregateNumbers(t *testing.T) {
	st := build(t, "aggregate", stages.Options{"fields": map[string]string{
		"s": "sum(json.p)", "mn": "min(json.p)", "mx": "max(json.p)", "a": "avg(json.p)", "f": "first(json.o)", "l": "last(json.o)", "n": "count()"}},
		stagetest.Env(nil, nil))
	res := run(t, "aggregate", st,
		jsonRec(0, "k", `{"o":{"b":[1,"x"]}}`, ts0),
		jsonRec(1, "k", `{"p":9007199254740993,"o":null}`, ts0),
		jsonRec(2, "k", `{"p":9007199254740992.0,"o":"é"}`, ts0),
		jsonRec(3, "k", `{"p":-1}`, ts0),
	)
	want := []string{
		`{"key":"k","a":null,"f":{"b":[1,"x"]},"l":{"b":[1,"x"]},"mn":null,"mx":null,"n":1,"s":null}`,
		`{"key":"k","a":9007199254740992,"f":{"b":[1,"x"]},"l":{"b":[1,"x"]},"mn":9007199254740993,"mx":9007199254740993,"n":2,"s":9007199254740993}`,
		`{"key":"k","a":9007199254740992,"f":{"b":[1,"x"]},"l":"é","mn":9007199254740992,"mx":9007199254740993,"n":3,"s":18014398509481984}`,
		`{"key":"k","a":6004799503160661,"f":{"b":[1,"x"]},"l":"é","mn":-1,"mx":9007199254740993,"n":4,"s":18014398509481984}`,
	}
	if got := values(res.Outputs); !slices.Equal(got, want) {
		t.Fatalf("outputs\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
