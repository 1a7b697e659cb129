package builtin_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/stateref"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// counting returns an Env whose counters count in counts.
func counting(counts *stagetest.Counters) stages.Env {
	env := stagetest.Env(nil, nil)
	env.Counter = counts.Counter
	return env
}

// TestStatefulDropsCountOncePerCall: a call that fails is made again,
// its records one by one; the records it dropped count once, in the
// calls that stand, not again for the call that failed.
func TestStatefulDropsCountOncePerCall(t *testing.T) {
	at := func(s string) time.Time { return ts0.Add(mustDuration(t, s)) }
	tests := []struct {
		stage  string
		opts   stages.Options
		in     []stages.Record
		fails  int64 // the offset of the record that fails
		counts map[string]int64
	}{
		{"aggregate", stages.Options{"window": map[string]string{"type": "tumbling", "size": "1m"}, "time": "json.ts",
			"fields": map[string]string{"s": "sum(json.p)"}}, []stages.Record{
			jsonRec(0, "k", `{"p":1,"ts":0}`, ts0),
			jsonRec(1, "k", `{"p":1,"ts":70000}`, ts0),        // closes [0, 60s)
			jsonRec(2, "k", `{"p":1,"ts":59000}`, ts0),        // late
			jsonRec(3, "k", `{"p":"x","ts":70000}`, ts0),      // fails the call
			jsonRec(4, "k", `{"p":1,"ts":100000000000}`, ts0), // beyond max_future
		}, 3, map[string]int64{"late_records_dropped": 1, "future_records_dropped": 1}},
		{"dedupe", stages.Options{"within": time.Hour, "key": "json.id", "repartition": false}, []stages.Record{
			jsonRec(0, "k", `{"id":"a"}`, at("0s")),
			jsonRec(1, "k", `{"id":"a"}`, at("1s")), // a duplicate
			jsonRec(2, "k", `{}`, at("2s")),         // no key: fails the call
			jsonRec(3, "k", `{"id":"b"}`, at("3s")),
			jsonRec(4, "k", `{"id":"a"}`, at("4s")), // a duplicate
		}, 2, map[string]int64{"duplicate_records_dropped": 2}},
	}
	for _, tc := range tests {
		t.Run(tc.stage, func(t *testing.T) {
			var counts stagetest.Counters
			st := build(t, tc.stage, tc.opts, counting(&counts))
			res := stagetest.Runner{State: stagetest.NewState()}.Run(t, tc.in, stagetest.NamedStage{Name: tc.stage, Stage: st})
			if !slices.Equal(offsets(res.DeadLetters), []int64{tc.fails}) {
				t.Fatalf("dead letters %v, want the record that fails", offsets(res.DeadLetters))
			}
			if got := counts.All(); !maps.Equal(got, tc.counts) {
				t.Errorf("counted %v, want %v", got, tc.counts)
			}
		})
	}
}

// memTable is a stages.Store in memory: a join's table in a test.
type memTable struct {
	mu   sync.Mutex
	rows map[string][]byte
}

func (m *memTable) Get(key []byte) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.rows[string(key)]
	return slices.Clone(v), ok, nil
}

func (m *memTable) Put(key, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows[string(key)] = slices.Clone(value)
	return nil
}

func (m *memTable) Delete(key []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, string(key))
	return nil
}

func (m *memTable) Scan([]byte, func(key, value []byte) error) error { return nil }

// TestJoinCountsUnmatched: an inner join counts the records it drops for
// want of a row, also in a call that names a failed record (its other
// records stand); a left join drops none.
func TestJoinCountsUnmatched(t *testing.T) {
	table := &memTable{rows: map[string][]byte{"u1": []byte(`{"name":"Ann"}`)}}
	ctx := stateref.With(context.Background(), func(name string) (any, error) {
		if name != "table-users" {
			t.Fatalf("the join asked for store %q", name)
		}
		return table, nil
	})
	in := []stages.Record{
		jsonRec(0, "u1", `{"n":0}`, ts0),
		jsonRec(1, "u2", `{"n":1}`, ts0), // no row
		jsonRec(2, "u1", `[1]`, ts0),     // not an object: fails
		jsonRec(3, "u3", `{"n":3}`, ts0), // no row
	}
	for _, tc := range []struct {
		kind string
		out  []int64
		want int64
	}{{"inner", []int64{0}, 2}, {"left", []int64{0, 1, 3}, 0}} {
		t.Run(tc.kind, func(t *testing.T) {
			var counts stagetest.Counters
			st := build(t, "join", stages.Options{"table": "users", "type": tc.kind}, counting(&counts))
			_, err := st.Process(ctx, in)
			re, ok := err.(*stages.RecordErrors)
			if !ok || !re.Consistent(len(in)) || len(re.Errs) != 1 || re.Errs[2] == nil {
				t.Fatalf("error %v, want the record at offset 2 named", err)
			}
			if got := offsets(re.Out); !slices.Equal(got, tc.out) {
				t.Errorf("outputs %v, want %v", got, tc.out)
			}
			if got := counts.Get("unmatched_records_dropped"); got != tc.want {
				t.Errorf("unmatched_records_dropped %d, want %d", got, tc.want)
			}
		})
	}
}

// TestJoinKeepsTheRecordsJSON: the join adds its member to the record's
// object and leaves the rest of the text as it was (member order,
// escapes, numbers, spacing); a member of that name already there is
// replaced, not repeated.
func TestJoinKeepsTheRecordsJSON(t *testing.T) {
	table := &memTable{rows: map[string][]byte{"u1": []byte(`{"name":"Ann <a&b>"}`)}}
	ctx := stateref.With(context.Background(), func(string) (any, error) { return table, nil })
	st := build(t, "join", stages.Options{"table": "users", "as": "profile"}, stages.Env{})
	for _, tc := range []struct{ name, in, want string }{
		{"members kept in order", `{"z":1,"a":"<tag> & 1.50","n":12345678901234567890}`,
			`{"z":1,"a":"<tag> & 1.50","n":12345678901234567890,"profile":{"name":"Ann <a&b>"}}`},
		{"spacing kept", " { \"b\" : [1, 2] }\n", ` { "b" : [1, 2] ,"profile":{"name":"Ann <a&b>"}}`},
		{"empty object", `{ }`, `{ "profile":{"name":"Ann <a&b>"}}`},
		{"member replaced", `{"profile":"old","b":2}`, `{"b":2,"profile":{"name":"Ann <a&b>"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := st.Process(ctx, []stages.Record{jsonRec(0, "u1", tc.in, ts0)})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || string(out[0].Value) != tc.want {
				t.Fatalf("got %q, want %q", out[0].Value, tc.want)
			}
			if !json.Valid(out[0].Value) {
				t.Fatalf("%q is not JSON", out[0].Value)
			}
		})
	}
}
