package builtin_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

func TestMapValueConversions(t *testing.T) {
	in := rec(10, "k1", `{"id":7,"items":[1,2],"name":"a<b"}`, "h", "hv")
	tests := []struct {
		expr string
		want string // "<nil>" for a null value
	}{
		{`value`, `{"id":7,"items":[1,2],"name":"a<b"}`},
		{`upper(key)`, `K1`},
		{`"text"`, `text`},
		{`nil`, `<nil>`},
		{`42`, `42`},
		{`1.5`, `1.5`},
		{`true`, `true`},
		{`json.id`, `7`}, // a float64; 7.0 encodes as 7
		{`json.id / 2`, `3.5`},
		{`json.items`, `[1,2]`},
		{`json.name`, `a<b`}, // a string result is its bytes, not JSON
		{`toJSON(json.name)`, `"a<b"`},
		{`{"b": json.name, "a": [json.id, nil]}`, `{"a":[7,null],"b":"a<b"}`},
		{`toJSON(json)`, `{"id":7,"items":[1,2],"name":"a<b"}`},
		{`headers`, `{"h":"hv"}`},
		{`headers["h"] + "!"`, `hv!`},
		{`topic + "/" + string(partition) + "@" + string(offset)`, `in/0@10`},
		{`timestamp.Unix()`, `1772366410`},
		{`timestamp`, `"2026-03-01T12:00:10Z"`},
		{`"x" + value[0:1]`, `x{`},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			st := build(t, "map", stages.Options{"value": tc.expr}, stagetest.Env(nil, nil))
			res := run(t, "map", st, in)
			if len(res.Outputs) != 1 {
				t.Fatalf("%d outputs, %d dead letters %v; want 1 output", len(res.Outputs), len(res.DeadLetters), res.DeadLetters)
			}
			out := res.Outputs[0]
			if got := str(out.Value); got != tc.want {
				t.Errorf("value %s, want %s", got, tc.want)
			}
			// the rest is carried from the input
			if string(out.Key) != "k1" || out.Offset != 10 || out.Topic != "in" || !out.Timestamp.Equal(in.Timestamp) ||
				header(out, "h") != "hv" || len(out.Headers) != 1 {
				t.Errorf("unset parts not carried: %+v", out)
			}
		})
	}
}

func TestMapKeyAndHeaders(t *testing.T) {
	in := rec(5, "k", `{"tenant":"t1","id":9}`, "a", "1", "b", "2", "a", "3", "c", "4")
	tests := []struct {
		name        string
		opts        stages.Options
		wantKey     string
		wantValue   string
		wantHeaders []string // name=value in order
	}{
		{name: "key only", opts: stages.Options{"key": `json.tenant`},
			wantKey: "t1", wantValue: string(in.Value), wantHeaders: []string{"a=1", "b=2", "a=3", "c=4"}},
		{name: "null key", opts: stages.Options{"key": `nil`},
			wantKey: "<nil>", wantValue: string(in.Value), wantHeaders: []string{"a=1", "b=2", "a=3", "c=4"}},
		{name: "headers set and override", opts: stages.Options{"headers": map[string]string{"a": `"new"`, "z": `string(offset)`, "n": `nil`}},
			wantKey: "k", wantValue: string(in.Value), wantHeaders: []string{"b=2", "c=4", "a=new", "n=<nil>", "z=5"}},
		{name: "every expression sees the input", opts: stages.Options{"key": `value`, "value": `key`, "headers": map[string]string{"old-key": `key`}},
			wantKey: string(in.Value), wantValue: "k", wantHeaders: []string{"a=1", "b=2", "a=3", "c=4", "old-key=k"}},
		{name: "header values read the last of a name", opts: stages.Options{"value": `headers.a`},
			wantKey: "k", wantValue: "3", wantHeaders: []string{"a=1", "b=2", "a=3", "c=4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := build(t, "map", tc.opts, stagetest.Env(nil, nil))
			res := run(t, "map", st, in)
			if len(res.Outputs) != 1 {
				t.Fatalf("outputs %v, dead letters %v", res.Outputs, res.DeadLetters)
			}
			out := res.Outputs[0]
			if got := str(out.Key); got != tc.wantKey {
				t.Errorf("key %s, want %s", got, tc.wantKey)
			}
			if got := str(out.Value); got != tc.wantValue {
				t.Errorf("value %s, want %s", got, tc.wantValue)
			}
			var hs []string
			for _, h := range out.Headers {
				hs = append(hs, h.Key+"="+str(h.Value))
			}
			if !slices.Equal(hs, tc.wantHeaders) {
				t.Errorf("headers %v, want %v", hs, tc.wantHeaders)
			}
		})
	}
}

func TestMapFailuresAreIsolated(t *testing.T) {
	tests := []struct {
		name string
		opts stages.Options
		bad  string // the value of the record that fails
		msg  string
	}{
		{name: "runtime error in value", opts: stages.Options{"value": `json.a.b`}, bad: `{"a":null}`, msg: "expression value:"},
		{name: "runtime error in a header", opts: stages.Options{"headers": map[string]string{"x": `json.a.b`}},
			bad: `{"a":null}`, msg: `expression headers["x"]:`},
		{name: "result without JSON encoding", opts: stages.Options{"key": `1 / json.a.n`}, bad: `{"a":{"n":0}}`,
			msg: "expression key: result of type float64 has no JSON encoding"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := build(t, "map", tc.opts, stagetest.Env(nil, nil))
			res := run(t, "map", st,
				rec(1, "", `{"a":{"b":"ok","n":1}}`),
				rec(2, "", tc.bad),
				rec(3, "", `{"a":{"b":"ok","n":2}}`))
			if got := offsets(res.DeadLetters); !slices.Equal(got, []int64{2}) {
				t.Fatalf("dead letters %v, want [2]", got)
			}
			if got := offsets(res.Outputs); !slices.Equal(got, []int64{1, 3}) {
				t.Errorf("outputs %v, want [1 3]", got)
			}
			if msg := header(res.DeadLetters[0], stages.HeaderErrorMessage); !strings.Contains(msg, tc.msg) {
				t.Errorf("error %q does not contain %q", msg, tc.msg)
			}
		})
	}
}
