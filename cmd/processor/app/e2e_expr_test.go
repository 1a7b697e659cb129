package app

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

// exprCase is a record value through a pipeline, and what must come of
// it: the value written to "out", or a dead letter whose error holds
// deadErr.
type exprCase struct {
	name, value string
	out         string
	deadErr     string
}

// runPipeline runs the processor itself (the built-in stages) with the
// stages given (YAML of pipeline: entries, ending in a produce to
// "out") over one record per case, keyed by its index, and checks where
// each record went: out or the dead-letter topic "dlq".
func runPipeline(t *testing.T, stagesYAML string, cases []exprCase) {
	t.Helper()
	addr, _ := startBroker(t, "--topics", "in,out,dlq")
	var input strings.Builder
	for i, c := range cases {
		fmt.Fprintf(&input, `{"key":"%d","value_base64":%q}`+"\n", i, base64.StdEncoding.EncodeToString([]byte(c.value)))
	}
	if code, _, errOut := runProgram(t, processorBinary(t), nil, input.String(), "produce", "--brokers", addr, "--topic", "in", "-i", "json"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errOut)
	}
	cfg := writeFile(t, t.TempDir(), "c.yaml", fmt.Sprintf(`kafka: {brokers: [%q]}
consumer: {group: g, topics: [in], commit_interval: 200ms}
pipeline:
%s
dead_letter: {topic: dlq, retries: -1}
http: {address: off}
`, addr, stagesYAML))
	p := startProcessor(t, nil, "run", "-c", cfg)
	consume := func(topic string) []jsonRecord {
		code, out, errOut := runProgram(t, processorBinary(t), nil, "", "consume", "--brokers", addr, "--topic", topic, "-o", "json")
		if code != 0 {
			t.Fatalf("consume %s: exit %d: %s", topic, code, errOut)
		}
		return jsonLines(t, out)
	}
	var out, dead []jsonRecord
	waitUntil(t, 60*time.Second, "every record out or dead-lettered", func() bool {
		select {
		case <-p.done:
			errOut := p.stderr.String()
			t.Fatalf("the processor exited: %v\n%s", p.err, errOut[max(0, len(errOut)-2000):])
		default:
		}
		out, dead = consume("out"), consume("dlq")
		return len(out)+len(dead) >= len(cases)
	})
	if code := p.terminate(t); code != 0 {
		t.Errorf("run exited %d on SIGTERM", code)
	}
	got := map[string]string{} // key: "out: value" or "dead: error"
	for _, r := range out {
		v := []byte(strOr(r.Value))
		if r.ValueBase64 != nil {
			v, _ = base64.StdEncoding.DecodeString(*r.ValueBase64)
		}
		got[*r.Key] = "out: " + string(v)
	}
	for _, r := range dead {
		for _, h := range r.Headers {
			if h.Key == "fencepost.error.message" && h.Value != nil {
				got[*r.Key] = "dead: " + *h.Value
			}
		}
	}
	for i, c := range cases {
		g := got[fmt.Sprint(i)]
		switch {
		case c.deadErr == "" && g != "out: "+c.out:
			t.Errorf("%s: %q, want out: %q", c.name, g, c.out)
		case c.deadErr != "" && (!strings.HasPrefix(g, "dead: ") || !strings.Contains(g, c.deadErr)):
			t.Errorf("%s: %q, want a dead letter saying %q", c.name, g, c.deadErr)
		}
	}
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestBinaryJSONByteOrderMark: a JSON value starting with a UTF-8 byte
// order mark reads as the JSON after it, in the json stage and in
// expressions (fields read alone, and the whole value); the mark alone,
// or before text that is no JSON, is still not JSON.
func TestBinaryJSONByteOrderMark(t *testing.T) {
	const bom = "\xef\xbb\xbf"
	runPipeline(t, `  - stage: json
    require: [n]
  - stage: map
    value: 'string(json.n) + " " + toJSON(json)'
  - stage: produce
    topic: out`, []exprCase{
		{name: "no mark", value: `{"n":1}`, out: `1 {"n":1}`},
		{name: "a mark", value: bom + `{"n":2,"s":"\u00e9"}`, out: `2 {"n":2,"s":"é"}`},
		{name: "a mark and spaces", value: bom + ` {"n":3} `, out: `3 {"n":3}`},
		{name: "the mark alone", value: bom, deadErr: "not valid JSON"},
		{name: "a mark before text", value: bom + "hello", deadErr: "not valid JSON"},
		{name: "two marks", value: bom + bom + `{"n":4}`, deadErr: "not valid JSON"},
	})
}

// TestBinaryExprMemoryBudget: an expression that builds strings or
// arrays past the memory budget, by any operator or builtin, fails its
// record with "memory budget exceeded" (a dead letter) instead of taking
// the process's memory; one that stays within it is written. Each case
// grows to at most a few hundred MB without the budget, so that a
// regression fails the test rather than the machine.
func TestBinaryExprMemoryBudget(t *testing.T) {
	cases := []struct{ name, expr, out string }{
		{"+ on strings, doubling", `len(reduce(1..27, #acc + #acc, "x"))`, ""},
		{"+ on strings, small", `len(reduce(1..10, #acc + #acc, "x"))`, "1024"},
		{"+ on strings, in map", `(let s = repeat("x", 600000); len(map(1..100, s + "y")))`, ""},
		{"repeat (counted before)", `len(repeat("x", 1000000000))`, ""},
		{"concat", `len(reduce(1..22, concat(#acc, #acc), [1]))`, ""},
		{"flatten", `(let a = 1..900000; len(flatten(map(1..10, a))))`, ""},
		{"replace", `len(replace(repeat("x", 1000), "x", repeat("y", 100000)))`, ""},
		{"join", `(let s = repeat("x", 900000); len(join(map(1..100, s), "")))`, ""},
		{"upper", `(let s = repeat("x", 900000); len(map(1..100, upper(s))))`, ""},
		{"split", `(let s = repeat("x", 900000); len(split(s, "")))`, ""},
		{"string of an array", `(let s = repeat("x", 900000); len(string(map(1..100, s))))`, ""},
		{"toJSON", `(let s = repeat("x", 900000); len(toJSON(map(1..100, s))))`, ""},
		{"toJSON, small", `len(toJSON(map(1..10, "ab")))`, "51"},
	}
	var expr strings.Builder
	ecs := make([]exprCase, len(cases))
	for i, c := range cases {
		fmt.Fprintf(&expr, "      value == %q ? %s :\n", c.name, c.expr)
		ecs[i] = exprCase{name: c.name, value: c.name, out: c.out}
		if c.out == "" {
			ecs[i].deadErr = "memory budget exceeded"
		}
	}
	runPipeline(t, "  - stage: map\n    value: >-\n"+expr.String()+"      -1\n  - stage: produce\n    topic: out", ecs)
}
