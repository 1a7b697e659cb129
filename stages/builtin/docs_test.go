package builtin_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// TestDocumentedExpressions runs the examples of the package
// documentation and docs/plugins.md, so they stay true.
func TestDocumentedExpressions(t *testing.T) {
	r := rec(1, "Alice", `{"status":"paid","amount":150,"id":"o-1","items":[1],"name":"n"}`, "tenant", "a")
	r.Timestamp = time.Now().Add(-time.Minute)
	for _, cond := range []string{
		`json?.status == "paid" && (json?.amount ?? 0) > 100`,
		`headers["tenant"] in ["a", "b"]`,
		`timestamp > now() - duration("1h")`,
	} {
		st := build(t, "filter", stages.Options{"if": cond}, stagetest.Env(nil, nil))
		if res := run(t, "filter", st, r); len(res.Outputs) != 1 {
			t.Errorf("filter %s dropped or failed the example record: dead letters %v", cond, res.DeadLetters)
		}
	}
	for _, tc := range []struct {
		opts stages.Options
		want string
	}{
		{stages.Options{"value": `{"id": json.id, "total": json.amount * 1.2}`}, `{"id":"o-1","total":180}`},
		{stages.Options{"value": `{"id": json.id, "total": json.amount * 1.2, "seen": timestamp}`}, ""},
		{stages.Options{"value": `json.items`}, `[1]`},
		{stages.Options{"value": `toJSON(json.items)`}, `[1]`},
		{stages.Options{"value": `json.name`}, `n`},
		{stages.Options{"key": `lower(key)`}, ""},
		{stages.Options{"key": `upper(key)`}, ""},
	} {
		st := build(t, "map", tc.opts, stagetest.Env(nil, nil))
		res := run(t, "map", st, r)
		if len(res.Outputs) != 1 {
			t.Fatalf("map %v failed the example record: %v", tc.opts, res.DeadLetters)
		}
		if tc.want != "" && string(res.Outputs[0].Value) != tc.want {
			t.Errorf("map %v: value %s, want %s", tc.opts, res.Outputs[0].Value, tc.want)
		}
	}
}

// TestDocumentedStatefulExamples runs the worked examples of
// docs/plugins.md ("aggregate and dedupe"), so they stay true.
func TestDocumentedStatefulExamples(t *testing.T) {
	agg := build(t, "aggregate", stages.Options{
		"key": "json.user", "repartition": false,
		"window": map[string]string{"type": "tumbling", "size": "1m", "grace": "10s"},
		"time":   "json.ts",
		"fields": map[string]string{"orders": "count()", "revenue": "sum(json.price * json.qty)", "biggest": "max(json.price)", "last_order": "last(json.id)"},
	}, stagetest.Env(nil, nil))
	var in []stages.Record
	for i, v := range []string{
		`{"id":1,"user":"ann","ts":"2026-03-01T12:00:05Z","price":10,"qty":2}`,
		`{"id":2,"user":"bob","ts":"2026-03-01T12:00:30Z","price":4.5,"qty":1}`,
		`{"id":3,"user":"ann","ts":"2026-03-01T12:00:50Z","price":7,"qty":1}`,
		`{"id":4,"user":"ann","ts":"2026-03-01T12:01:05Z","price":3,"qty":1}`,
		`{"id":5,"user":"bob","ts":"2026-03-01T12:00:58Z","price":1,"qty":1}`,
		`{"id":6,"user":"ann","ts":"2026-03-01T12:01:12Z","price":2,"qty":3}`,
		`{"id":7,"user":"bob","ts":"2026-03-01T12:00:59Z","price":5,"qty":1}`,
	} {
		in = append(in, jsonRec(int64(i), "", v, ts0))
	}
	state := stagetest.NewState()
	res := stagetest.Runner{}.CheckReplay(t, state, in, stagetest.NamedStage{Name: "aggregate", Stage: agg})
	var got []string
	for _, r := range res.Outputs {
		got = append(got, fmt.Sprintf("%d %s  %s", r.Offset, r.Key, r.Value))
	}
	want := []string{
		`5 ann  {"key":"ann","biggest":10,"last_order":3,"orders":2,"revenue":27,"window_start":"2026-03-01T12:00:00.000Z","window_end":"2026-03-01T12:01:00.000Z"}`,
		`5 bob  {"key":"bob","biggest":4.5,"last_order":5,"orders":2,"revenue":5.5,"window_start":"2026-03-01T12:00:00.000Z","window_end":"2026-03-01T12:01:00.000Z"}`,
	}
	if !slices.Equal(got, want) || len(res.DeadLetters) != 0 {
		t.Fatalf("aggregate outputs\n%s\nwant\n%s\ndead letters %v", strings.Join(got, "\n"), strings.Join(want, "\n"), res.DeadLetters)
	}
	// ann's window of 12:01 comes out once stream time reaches 12:02:10
	res = stagetest.Runner{State: state}.Run(t, []stages.Record{jsonRec(7, "", `{"id":8,"user":"cy","ts":"2026-03-01T12:02:10Z","price":1,"qty":1}`, ts0)},
		stagetest.NamedStage{Name: "aggregate", Stage: agg})
	if got := values(res.Outputs); len(got) != 1 || !strings.Contains(got[0], `{"key":"ann","biggest":3,"last_order":6,"orders":2,"revenue":9,"window_start":"2026-03-01T12:01:00.000Z"`) {
		t.Fatalf("at 12:02:10: %q", got)
	}

	dd := build(t, "dedupe", stages.Options{"key": "json.id", "repartition": false, "within": time.Hour, "time": "json.ts"}, stagetest.Env(nil, nil))
	in = nil
	for i, v := range []string{
		`{"id":"p-1","ts":"2026-03-01T12:00:00Z"}`,
		`{"id":"p-1","ts":"2026-03-01T12:20:00Z"}`,
		`{"id":"p-2","ts":"2026-03-01T12:30:00Z"}`,
		`{"id":"p-1","ts":"2026-03-01T11:40:00Z"}`,
		`{"id":"p-1","ts":"2026-03-01T13:00:00Z"}`,
	} {
		in = append(in, jsonRec(int64(i), "", v, ts0))
	}
	res = stagetest.Runner{}.CheckReplay(t, nil, in, stagetest.NamedStage{Name: "dedupe", Stage: dd})
	if got := offsets(res.Outputs); !slices.Equal(got, []int64{0, 2, 4}) {
		t.Fatalf("dedupe passed offsets %v, want 0, 2, 4", got)
	}
}
