package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/builtin"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// nested is {"a":{"a":...1...}} nested depth objects deep.
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}

// TestDeepJSONRefused: a value nested deeper than MaxJSONDepth fails its
// record with a *DepthError naming the limit, in every stage that reads
// it as JSON (the json stage, an expression over the whole value, one
// reading a field), quickly, and the next record of the batch is
// processed. One at the limit passes; text that is not JSON, however
// deep its brackets, is nil as before.
func TestDeepJSONRefused(t *testing.T) {
	deep := nested(100_000) // 600 KB: took minutes to decode before
	env := stagetest.Env(nil, &stagetest.Producer{})
	for _, st := range []struct {
		name string
		opts stages.Options
	}{
		{"json", stages.Options{}},
		{"filter", stages.Options{"if": `json != nil`}},
		{"filter", stages.Options{"if": `json.a != nil`}}, // by field
		{"map", stages.Options{"value": `toJSON(json)`}},
		{"produce", stages.Options{"topic": "out", "value": `json?.a`}},
	} {
		t.Run(fmt.Sprint(st.name, st.opts), func(t *testing.T) {
			stage := build(t, st.name, st.opts, env)
			began := time.Now()
			res := run(t, st.name, stage, rec(1, "", deep), rec(2, "", `{"a":{"a":2}}`))
			if took := time.Since(began); took > 3*time.Second { // a hang guard: it takes milliseconds
				t.Errorf("took %v", took)
			}
			if len(res.DeadLetters) != 1 || header(res.DeadLetters[0], stages.HeaderSourceOffset) != "1" {
				t.Fatalf("dead letters %v, want the deep record's", res.DeadLetters)
			}
			want := fmt.Sprintf("JSON value nests arrays or objects 100000 levels deep; the limit is %d", builtin.MaxJSONDepth)
			if msg := header(res.DeadLetters[0], stages.HeaderErrorMessage); !strings.Contains(msg, want) {
				t.Errorf("error %q, want it to contain %q", msg, want)
			}
			if !slices.Equal(offsets(res.Outputs), []int64{2}) {
				t.Errorf("outputs %v, want the next record's", offsets(res.Outputs))
			}
		})
	}

	js := build(t, "json", stages.Options{}, env)
	deepArrays := strings.Repeat("[", builtin.MaxJSONDepth+1) + strings.Repeat("]", builtin.MaxJSONDepth+1)
	res := run(t, "json", js, rec(1, "", nested(builtin.MaxJSONDepth)), rec(2, "", nested(builtin.MaxJSONDepth+1)), rec(3, "", deepArrays))
	if !slices.Equal(offsets(res.Outputs), []int64{1}) || len(res.DeadLetters) != 2 {
		t.Errorf("at the limit: outputs %v, dead letters %d; want 1 passed, 2 and 3 refused", offsets(res.Outputs), len(res.DeadLetters))
	}
	var de *builtin.DepthError
	st := build(t, "filter", stages.Options{"if": `json != nil`}, env)
	_, err := st.Process(context.Background(), []stages.Record{rec(1, "", nested(builtin.MaxJSONDepth+1))})
	var re *stages.RecordErrors
	if !errors.As(err, &re) || !errors.As(re.Errs[0], &de) || de.Depth != builtin.MaxJSONDepth+1 || de.Limit != builtin.MaxJSONDepth {
		t.Errorf("error %v, want a record's *DepthError of depth %d", err, builtin.MaxJSONDepth+1)
	}

	notJSON := strings.Repeat("[", 100_000) // unclosed: not JSON at all
	f := build(t, "filter", stages.Options{"if": `json == nil`}, env)
	if res := run(t, "filter", f, rec(1, "", notJSON)); len(res.Outputs) != 1 {
		t.Errorf("deep text that is not JSON: dead letters %v, want json nil", res.DeadLetters)
	}
}

// cancelWriter is a log output that cancels a context at its first write.
type cancelWriter struct {
	cancel context.CancelFunc
	lines  int
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.lines++
	w.cancel()
	return len(p), nil
}

// TestStagesReturnWhenContextEnds: every built-in stage returns ctx's
// error, without finishing the batch, once its context has ended:
// nothing is printed, written or passed on after that.
func TestStagesReturnWhenContextEnds(t *testing.T) {
	var out stagetest.Buffer
	prod := &stagetest.Producer{}
	env := stagetest.Env(&out, prod)
	in := []stages.Record{rec(1, "k", `{"a":1}`), rec(2, "k", `{"a":2}`), rec(3, "k", `{"a":3}`)}
	for _, st := range []struct {
		name string
		opts stages.Options
	}{
		{"filter", stages.Options{"if": `json.a > 0`}},
		{"filter", stages.Options{"if": `true`}},
		{"map", stages.Options{"value": `toJSON(json)`}},
		{"json", stages.Options{"require": []string{"a"}}},
		{"produce", stages.Options{"topic": "out"}},
		{"log", stages.Options{}},
		{"stdout", stages.Options{"format": "json"}},
	} {
		t.Run(fmt.Sprint(st.name, st.opts), func(t *testing.T) {
			stage := build(t, st.name, st.opts, env)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			calls := prod.Calls()
			got, err := stage.Process(ctx, in)
			if !errors.Is(err, context.Canceled) || got != nil {
				t.Errorf("Process after the context ended: %d records, error %v; want none and context.Canceled", len(got), err)
			}
			if prod.Calls() != calls || len(out.Lines()) != 0 {
				t.Errorf("%d produce calls, printed %q; want nothing done", prod.Calls()-calls, out.Lines())
			}
		})
	}

	// Ended while the batch runs: the log stage stops after the record
	// being printed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelWriter{cancel: cancel}
	stage := build(t, "log", stages.Options{}, stagetest.Env(w, nil))
	if got, err := stage.Process(ctx, in); !errors.Is(err, context.Canceled) || got != nil || w.lines != 1 {
		t.Errorf("log ended mid-batch: %d records, error %v, %d lines printed; want none, context.Canceled, 1", len(got), err, w.lines)
	}
}

// TestJSONNumberTypes: a JSON number written as a whole number is an int
// in expressions, by field and over the whole value alike, so integer
// arithmetic (%) works on ids; any other is a float64.
func TestJSONNumberTypes(t *testing.T) {
	env := stagetest.Env(nil, nil)
	byField := build(t, "map", stages.Options{"value": `type(json.a)`}, env)
	whole := build(t, "map", stages.Options{"value": `type(json.a) + "," + type(json["b"]) + "," + type(json) + "," + string(len(json))`}, env)
	tests := []struct{ lit, typ string }{
		{"1", "int"}, {"-7", "int"}, {"0", "int"}, {"-0", "int"},
		{"9223372036854775807", "int"}, {"-9223372036854775808", "int"}, {"9007199254740993", "int"},
		{"1.0", "float"}, {"1e2", "float"}, {"1E+2", "float"}, {"0.5", "float"}, {"-0.0", "float"}, {"1e-400", "float"},
	}
	for _, tc := range tests {
		v := fmt.Sprintf(`{"a":%s,"b":[%s]}`, tc.lit, tc.lit)
		res := run(t, "map", byField, rec(1, "", v))
		if got := values(res.Outputs); !slices.Equal(got, []string{tc.typ}) {
			t.Errorf("by field: type(json.a) of %s is %v (dead letters %v), want %s", v, got, res.DeadLetters, tc.typ)
		}
		res = run(t, "map", whole, rec(1, "", v))
		if got, want := values(res.Outputs), []string{tc.typ + ",array,map,2"}; !slices.Equal(got, want) {
			t.Errorf("whole value: %s gives %v (dead letters %v), want %v", v, got, res.DeadLetters, want)
		}
	}

	f := build(t, "filter", stages.Options{"if": `json.id % 10 != 7`}, env)
	res := run(t, "filter", f, rec(1, "", `{"id":17}`), rec(2, "", `{"id":12}`), rec(3, "", `{"id":9223372036854775807}`))
	if !slices.Equal(offsets(res.Outputs), []int64{2}) || len(res.DeadLetters) != 0 {
		t.Errorf("json.id %% 10 != 7: outputs %v, dead letters %v; want 2 kept and none failed", offsets(res.Outputs), res.DeadLetters)
	}
}

// TestNullIsNotEmpty: a null key, value or header value (nil) stays null
// through expressions and stages, and an empty one stays empty: a
// tombstone stays a tombstone.
func TestNullIsNotEmpty(t *testing.T) {
	null := stages.Record{Topic: "in", Offset: 1, Headers: []stages.Header{{Key: "h", Value: nil}}}
	empty := stages.Record{Topic: "in", Offset: 2, Key: []byte{}, Value: []byte{}, Headers: []stages.Header{{Key: "h", Value: []byte{}}}}
	absent := stages.Record{Topic: "in", Offset: 3, Key: []byte("k"), Value: []byte("v")}
	in := []stages.Record{null, empty, absent}
	// shape prints key|value|header h, "<nil>" for null, "<absent>" for no header.
	shape := func(rs []stages.Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, str(r.Key)+"|"+str(r.Value)+"|"+header(r, "h"))
		}
		return out
	}
	prod := &stagetest.Producer{}
	env := stagetest.Env(nil, prod)
	tests := []struct {
		stage string
		opts  stages.Options
		want  []string
	}{
		{"map", stages.Options{"value": `value`, "key": `key`, "headers": map[string]string{"h": `headers["h"]`}},
			[]string{"<nil>|<nil>|<nil>", "||", "k|v|<nil>"}}, // an absent header is nil too
		{"map", stages.Options{"value": `value ?? "was null"`, "key": `key == nil ? "null" : key == "" ? "empty" : key`},
			[]string{"null|was null|<nil>", "empty||", "k|v|<absent>"}},
		{"map", stages.Options{"headers": map[string]string{"h": `headers["h"] == nil ? ("h" in headers ? "null" : "absent") : "set"`}},
			[]string{"<nil>|<nil>|null", "||set", "k|v|absent"}},
		{"map", stages.Options{"value": `value == nil ? nil : upper(value)`}, // documented
			[]string{"<nil>|<nil>|<nil>", "||", "k|V|<absent>"}},
		{"filter", stages.Options{"if": `value == nil`}, []string{"<nil>|<nil>|<nil>"}},
		{"filter", stages.Options{"if": `value == ""`}, []string{"||"}},
		{"filter", stages.Options{"if": `value != "x" && headers["h"] != "x"`}, []string{"<nil>|<nil>|<nil>", "||", "k|v|<absent>"}},
		{"produce", stages.Options{"topic": "nulls", "value": `value`, "key": `key`}, []string{"<nil>|<nil>|<nil>", "||", "k|v|<absent>"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.stage, tc.opts), func(t *testing.T) {
			res := run(t, tc.stage, build(t, tc.stage, tc.opts, env), in...)
			if got := shape(res.Outputs); !slices.Equal(got, tc.want) || len(res.DeadLetters) != 0 {
				t.Errorf("outputs %q, dead letters %v; want %q", got, res.DeadLetters, tc.want)
			}
		})
	}
	if got, want := shape(prod.Records("nulls")), []string{"<nil>|<nil>|<nil>", "||", "k|v|<absent>"}; !slices.Equal(got, want) {
		t.Errorf("produced %q, want %q", got, want)
	}

	// A string function of a null value fails the record, saying why.
	res := run(t, "map", build(t, "map", stages.Options{"value": `upper(value)`}, env), null, empty)
	if len(res.DeadLetters) != 1 || !strings.Contains(header(res.DeadLetters[0], stages.HeaderErrorMessage), `write value ?? ""`) ||
		!slices.Equal(shape(res.Outputs), []string{"||"}) {
		t.Errorf("upper(value): outputs %q, dead letters %v; want the tombstone failed with a hint", shape(res.Outputs), res.DeadLetters)
	}
	// The json stage tells a tombstone from an empty value.
	res = run(t, "json", build(t, "json", stages.Options{}, env), null, empty)
	var msgs []string
	for _, d := range res.DeadLetters {
		msgs = append(msgs, header(d, stages.HeaderErrorMessage))
	}
	if len(msgs) != 2 || !strings.Contains(msgs[0], "null (a tombstone)") || !strings.Contains(msgs[1], "empty (not null)") {
		t.Errorf("json stage errors %q", msgs)
	}
	// log prints null and empty apart.
	var out stagetest.Buffer
	run(t, "log", build(t, "log", stages.Options{}, stagetest.Env(&out, nil)), null, empty)
	if got, want := out.Lines(), []string{`in/0@1 key=null value=null "h"=null`, `in/0@2 key="" value="" "h"=""`}; !slices.Equal(got, want) {
		t.Errorf("log printed %q, want %q", got, want)
	}
}

// TestFromJSONAgrees: expr's fromJSON reads JSON as the json variable
// does: whole numbers are ints, the depth is limited.
func TestFromJSONAgrees(t *testing.T) {
	env := stagetest.Env(nil, nil)
	m := build(t, "map", stages.Options{"value": `type(fromJSON(value).a) + "," + type(fromJSON(value).b)`}, env)
	res := run(t, "map", m, rec(1, "", `{"a":1,"b":1.0}`), rec(2, "", nested(builtin.MaxJSONDepth+1)), rec(3, "", `{`))
	if got := values(res.Outputs); !slices.Equal(got, []string{"int,float"}) || len(res.DeadLetters) != 2 {
		t.Fatalf("outputs %v, dead letters %v; want int,float and two refused", got, res.DeadLetters)
	}
	if msg := header(res.DeadLetters[0], stages.HeaderErrorMessage); !strings.Contains(msg, "the limit is 1000") {
		t.Errorf("too deep: %q", msg)
	}
	if msg := header(res.DeadLetters[1], stages.HeaderErrorMessage); !strings.Contains(msg, "not valid JSON") {
		t.Errorf("invalid: %q", msg)
	}
}
