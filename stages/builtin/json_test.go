package builtin_test

import (
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

func TestJSON(t *testing.T) {
	tests := []struct {
		require []string
		value   string // "<nil>": null value
		fail    string // "" if the record passes; else in the error
	}{
		{nil, `{"a":1}`, ""},
		{nil, `[1, 2]`, ""},
		{nil, `"s"`, ""},
		{nil, ` 12 `, ""},
		{nil, `null`, ""},
		{nil, `{"a":`, "not valid JSON: unexpected end of JSON input"},
		{nil, `{"a":1} x`, "not valid JSON"},
		{nil, ``, "not valid JSON"},
		{nil, `<nil>`, "not valid JSON"},
		{[]string{"id", "ts"}, `{"id":1,"ts":"2026"}`, ""},
		{[]string{"id", "ts"}, `{"id":null,"ts":0,"x":1}`, ""},
		{[]string{"id", "ts"}, `{"id":1}`, "lacks required field(s) ts"},
		{[]string{"id", "ts"}, `{"x":{"id":1,"ts":1}}`, "lacks required field(s) id, ts"},
		{[]string{"id"}, `[{"id":1}]`, "value is a JSON array, not an object"},
		{[]string{"id"}, `"id"`, "value is a JSON string, not an object"},
		{[]string{"id"}, `null`, "JSON null, not an object"},
		{[]string{"id"}, `{"id":1`, "not valid JSON"},
		{[]string{"id"}, `{"id":1}}`, "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.require, ",")+" "+tc.value, func(t *testing.T) {
			opts := stages.Options{}
			if tc.require != nil {
				opts["require"] = tc.require
			}
			st := build(t, "json", opts, stagetest.Env(nil, nil))
			in := rec(3, "k", tc.value, "h", "v")
			res := run(t, "json", st, rec(1, "", `{"id":0,"ts":0}`), in, rec(5, "", `{"id":0,"ts":0}`))
			if tc.fail == "" {
				if len(res.Outputs) != 3 || len(res.DeadLetters) != 0 {
					t.Fatalf("outputs %v, dead letters %v; want all 3 records out", offsets(res.Outputs), offsets(res.DeadLetters))
				}
				out := res.Outputs[1]
				if str(out.Value) != tc.value || string(out.Key) != "k" || header(out, "h") != "v" || out.Offset != 3 {
					t.Errorf("record changed: %+v", out)
				}
				return
			}
			if len(res.DeadLetters) != 1 || res.DeadLetters[0].Offset != 3 || len(res.Outputs) != 2 {
				t.Fatalf("outputs %v, dead letters %v; want record 3 dead-lettered, the others out",
					offsets(res.Outputs), offsets(res.DeadLetters))
			}
			if msg := header(res.DeadLetters[0], stages.HeaderErrorMessage); !strings.Contains(msg, tc.fail) {
				t.Errorf("error %q does not contain %q", msg, tc.fail)
			}
		})
	}
}
