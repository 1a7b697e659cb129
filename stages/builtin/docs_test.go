package builtin_test

import (
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
