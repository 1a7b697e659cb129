package builtin_test

import (
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// TestJSONNumbers: a number no float64 (or, written as a whole number, no
// 64-bit integer) holds fails the record with the same clear error in the
// json stage and in every stage whose expressions read json; any other
// number is kept as written (whole numbers beyond 2^53 as ints).
func TestJSONNumbers(t *testing.T) {
	tests := []struct {
		value string
		fail  string // "" if the record passes
		out   string // map value: toJSON(json), when it passes
	}{
		{`{"amount":1e400}`, "JSON number 1e400 is out of range: a float64 holds at most ±1.8e308", ""},
		{`{"amount":-1e400}`, "JSON number -1e400 is out of range", ""},
		{`[1, {"a": [2, 1E+309]}]`, "JSON number 1E+309 is out of range", ""},
		{`{"id":12345678901234567890}`, "JSON number 12345678901234567890 does not fit a 64-bit integer", ""},
		{`{"id":-9223372036854775809}`, "does not fit a 64-bit integer", ""},
		{`{"id":` + strings.Repeat("9", 100) + `}`, "JSON number 99999999999999999999999999999999999999…", ""},
		{`{"id":1234567890123456789}`, "", `{"id":1234567890123456789}`},
		{`{"id":-9223372036854775808}`, "", `{"id":-9223372036854775808}`},
		{`{"tiny":1e-400,"x":1.5,"n":-0,"z":-0.0}`, "", `{"n":0,"tiny":0,"x":1.5,"z":-0}`}, // -0 is the int 0
		{`{"s":"1e400","k\"1e400":[]}`, "", `{"k\"1e400":[],"s":"1e400"}`},
		{`1e308`, "", `1e+308`},
	}
	env := stagetest.Env(nil, nil)
	js := build(t, "json", stages.Options{}, env)
	jsReq := build(t, "json", stages.Options{"require": []string{"x"}}, env)
	m := build(t, "map", stages.Options{"value": `toJSON(json)`}, env)
	f := build(t, "filter", stages.Options{"if": `json != nil`}, env)
	p := build(t, "produce", stages.Options{"topic": "out", "value": `toJSON(json)`}, stagetest.Env(nil, &stagetest.Producer{}))
	for _, tc := range tests {
		t.Run(tc.value[:min(len(tc.value), 30)], func(t *testing.T) {
			for _, st := range []struct {
				name  string
				stage stages.Stage
			}{{"json", js}, {"map", m}, {"filter", f}, {"produce", p}, {"json_require", jsReq}} {
				res := run(t, st.name, st.stage, rec(1, "", tc.value))
				if tc.fail != "" {
					if len(res.DeadLetters) != 1 {
						t.Errorf("%s: outputs %v, want the record dead-lettered", st.name, values(res.Outputs))
						continue
					}
					if msg := header(res.DeadLetters[0], stages.HeaderErrorMessage); !strings.Contains(msg, tc.fail) {
						t.Errorf("%s: error %q, want it to contain %q", st.name, msg, tc.fail)
					}
					continue
				}
				if st.name == "json_require" {
					continue // passes the number check; the field may be missing
				}
				if len(res.Outputs) != 1 {
					t.Errorf("%s: dead letters %v, want the record out", st.name, res.DeadLetters)
					continue
				}
				if st.name == "map" && string(res.Outputs[0].Value) != tc.out {
					t.Errorf("map: %s, want %s", res.Outputs[0].Value, tc.out)
				}
			}
		})
	}
}
