package builtin

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/expr-lang/expr/vm"

	"github.com/fencepost-dev/fencepost/internal/fastjson"
	"github.com/fencepost-dev/fencepost/internal/memo"
	"github.com/fencepost-dev/fencepost/stages"
)

// sumOf is an expression reading json.f0 ... json.f<n-1> as numbers, 0
// for an absent one.
func sumOf(n int) string {
	terms := make([]string, n)
	for i := range terms {
		terms[i] = fmt.Sprintf("(json?.f%d ?? 0)", i)
	}
	return strings.Join(terms, " + ")
}

// slottedExprs are expressions whose slotted forms are checked against
// them as written: 1, 64 and 65 fields, let variables, closures, nested
// accesses, an object encoded member by member.
var slottedExprs = []string{
	`json.f0`,
	sumOf(64),
	sumOf(65),
	`let a = json.f0; let b = json?.f1; [a, b, json.f2]`,
	`let a = 1; all(json.items, {let b = # + a; b > json.f0})`,
	`json.f0 + json.f1`, // fails where they are not numbers
	`json.f0.x ?? json?.f1?.y`,
	`toJSON({"a": json.f0, "b": [json.f1, json.f0], "c": let x = json.f2; x})`,
}

// slottedCase runs one expression (and the programs it holds) with an
// evaluator that projects and one that runs it as written.
type slottedCase struct {
	src        string
	p          *program
	fast, slow *evaluator
}

func newSlottedCase(t testing.TB, src string) *slottedCase {
	p, err := compile("value", "value", src, false)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	withEncoded(p, "value", src)
	rd := readsOf(p)
	if !rd.project || p.slotted == nil || p.layout != rd.layout {
		t.Fatalf("%s: not bound to slots (project %v)", src, rd.project)
	}
	for _, q := range p.withParts(nil) {
		if q.byField != nil && (q.slotted == nil || q.layout != rd.layout) {
			t.Fatalf("%s: a part is not bound to the stage's slots", src)
		}
		if q.slotted != nil {
			checkNoFieldLoads(t, src, q.slotted)
		}
	}
	asWritten := *rd
	asWritten.project = false
	return &slottedCase{src: src, p: p,
		fast: newEvaluator(context.Background(), rd, 0), slow: newEvaluator(context.Background(), &asWritten, 0)}
}

// check fails t if, over the value v, the slotted forms give another
// result or error than the programs as written, or the record is not
// projected though v is an object whose numbers are all holdable.
func (c *slottedCase) check(t testing.TB, v []byte) {
	r := stages.Record{Key: []byte("k"), Value: v}
	fastLoad, slowLoad := c.fast.load(&r), c.slow.load(&r)
	if fmt.Sprint(fastLoad) != fmt.Sprint(slowLoad) {
		t.Fatalf("%s over %q: load %v, as written %v", c.src, v, fastLoad, slowLoad)
	}
	if fastLoad != nil {
		return
	}
	if _, isObject := c.slow.env[varJSON].(map[string]any); c.fast.projected != isObject { // and every number holdable
		t.Fatalf("%s over %q: projected %v, object %v", c.src, v, c.fast.projected, isObject)
	}
	for _, q := range c.p.withParts(nil) {
		fastOut, fastErr := c.fast.run(q)
		slowOut, slowErr := c.slow.run(q)
		if fmt.Sprint(fastErr) != fmt.Sprint(slowErr) || !reflect.DeepEqual(fastOut, slowOut) {
			t.Fatalf("%s over %q:\nslotted    %#v, %v\nas written %#v, %v", c.src, v, fastOut, fastErr, slowOut, slowErr)
		}
	}
}

var slottedValues = []string{
	`{"f0":1,"f1":2,"f2":3,"items":[2,3]}`,
	`{"f1":"x"}`,
	`{"f0":"a","f0":5,"f1":7,"items":[]}`, // duplicates: the last wins
	`{"f\u0030":4,"f1":{"y":"n"},"items":[0]}`,
	`{"f0":{"x":9},"f2":null}`,
	`{"f0":[],"f1":{},"f2":""}`,
	`{"f0":null,"f1":[null],"f2":-0.0}`,
	`{}`, `[1]`, `"text"`, `not json`, `{"f0":1e400}`,
	"{\"\xffname\":1,\"f0\":2,\"\xff\":3}", // names starting with byte 0xff (the last one of the first-byte table)
}

// TestSlottedMatchesAsWritten: the slotted forms give what the
// expressions as written give over the whole value, results and errors,
// record after record with one evaluator; and they load no field from
// the environment.
func TestSlottedMatchesAsWritten(t *testing.T) {
	for _, src := range slottedExprs {
		c := newSlottedCase(t, src)
		for _, v := range slottedValues {
			c.check(t, []byte(v))
		}
	}
}

// FuzzSlottedMatchesAsWritten: over any value, the slotted forms give
// what the expressions as written give.
func FuzzSlottedMatchesAsWritten(f *testing.F) {
	for _, v := range slottedValues {
		f.Add([]byte(v))
	}
	var cases []*slottedCase
	for _, src := range slottedExprs {
		cases = append(cases, newSlottedCase(f, src))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		for _, c := range cases {
			c.check(t, v)
		}
	})
}

// TestOneFieldReadWithoutVM: an expression that is one field read
// (json.b, json["a b"]) is read from its slot without running the VM
// (TestSlottedMatchesAsWritten compares what it gives with the
// expression as written); anything more runs in the VM.
func TestOneFieldReadWithoutVM(t *testing.T) {
	for _, tc := range []struct {
		src   string
		field int // index in the layout's fields; -1: runs in the VM
	}{
		{`json.b`, 0}, {`json["a b"]`, 0}, {`json?.b`, -1}, {`json.b + json.a`, -1}, {`json.b.c`, -1},
	} {
		p, err := compile("value", "value", tc.src, false)
		if err != nil {
			t.Fatal(err)
		}
		rd := readsOf(p)
		want := -1
		if tc.field >= 0 {
			want = rd.layout.base + tc.field
		}
		if p.slotted == nil || p.only != want {
			t.Errorf("%s: only %d, want %d", tc.src, p.only, want)
		}
	}
}

// checkNoFieldLoads fails t if prog loads a field's variable from the
// environment map.
func checkNoFieldLoads(t testing.TB, src string, prog *vm.Program) {
	t.Helper()
	for i, op := range prog.Bytecode {
		if op != vm.OpLoadFast {
			continue
		}
		if name, _ := prog.Constants[prog.Arguments[i]].(string); strings.HasPrefix(name, fieldVarPrefix) {
			t.Fatalf("%s: the slotted form loads %q from the environment", src, name)
		}
	}
}

// TestProjectionWritesNoEnvironment: a record whose fields are projected
// leaves the environment map as it was (its fields go to the slot VM's
// variables), and the other variables are still there.
func TestProjectionWritesNoEnvironment(t *testing.T) {
	p, err := compile("if", "if", `json.type == "purchase" && key == "k"`, true)
	if err != nil {
		t.Fatal(err)
	}
	e := newEvaluator(context.Background(), readsOf(p), 0)
	r := stages.Record{Key: []byte("k"), Value: []byte(`{"type":"purchase"}`)}
	if err := e.load(&r); err != nil || !e.projected {
		t.Fatalf("load: %v, projected %v", err, e.projected)
	}
	if len(e.env) != 1 || e.env[varKey] != "k" {
		t.Errorf("environment after a projected load: %#v, want only the key", e.env)
	}
	if v, err := e.run(p); v != true || err != nil {
		t.Errorf("run: %v, %v; want true", v, err)
	}
}

// TestUnboundProgramRunsAsWritten: a program run by an evaluator whose
// slots it is not bound to (not among the programs its reads came from,
// or bound again since to other fields) reads the whole value, as
// written, rather than slots that are not its own.
func TestUnboundProgramRunsAsWritten(t *testing.T) {
	compiled := func(src string) *program {
		p, err := compile("value", "value", src, false)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := compiled(`json.a`), compiled(`[json.b, json.a]`)
	first := readsOf(a)
	e := newEvaluator(context.Background(), first, 0)
	r := stages.Record{Value: []byte(`{"a":1,"b":2}`)}
	check := func(when string, p *program, want any) {
		t.Helper()
		if err := e.load(&r); err != nil || !e.projected {
			t.Fatalf("%s: load: %v, projected %v", when, err, e.projected)
		}
		if v, err := e.run(p); err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("%s: %v, %v; want %v", when, v, err, want)
		}
	}
	check("a program of another stage", b, []any{2, 1})
	check("the stage's program", a, 1)
	if again := readsOf(a); a.layout != first.layout || again.layout != first.layout {
		t.Errorf("the same program's reads worked out again: bound to a new layout")
	}
	readsOf(b, a) // a is bound again, to the fields b, a
	if a.layout == first.layout {
		t.Fatalf("a not bound again")
	}
	check("a program bound again since", a, 1)
}

// TestDocSharedWithinAChainCall: the second stage of a chain call finds
// the doc the first stored; new bytes (a value a stage replaced) get a
// doc of their own.
func TestDocSharedWithinAChainCall(t *testing.T) {
	cache := memo.From(memo.With(context.Background()))
	v := []byte(`{"type":"a"}`)
	var docs fastjson.Docs
	d := docFor(cache, &docs, v)
	if docFor(cache, &docs, v) != d {
		t.Fatal("the same bytes got a second doc")
	}
	replaced := []byte(`{"type":"b"}`)
	if docFor(cache, &docs, replaced) == d {
		t.Fatal("new bytes found the old doc")
	}
	full, err := d.Value(v)
	if err != nil || !reflect.DeepEqual(full, map[string]any{"type": "a"}) {
		t.Fatalf("full value %#v, %v", full, err)
	}
	if again, _ := docFor(cache, &docs, v).Value(v); reflect.ValueOf(again).Pointer() != reflect.ValueOf(full).Pointer() {
		t.Fatal("the full value was parsed twice")
	}
}

// TestByFieldFormMatchesAsWritten: for expressions that read json only by
// constant fields, the byField form (run when the value is an object)
// gives exactly the result, or the error, of the expression as written
// over the full value; for values that are not objects the evaluator
// runs the expression as written.
func TestByFieldFormMatchesAsWritten(t *testing.T) {
	exprs := []string{
		`json.type == "purchase"`,
		`json?.user`,
		`json["a b"]`,
		`json.items[0]`,
		`json.price * json.qty`,
		`toJSON({"u": json.user, "n": json.n, "t": json?.type})`,
		`json.missing == nil`,
		`json.a.b`,
		`json?.a?.b`,
		`len(json.items)`,
		`json.type + ":" + key`,
	}
	values := []string{
		`{"type":"purchase","user":"u1","price":2.5,"qty":3,"items":["x","y"],"n":null,"a b":true,"a":{"b":7}}`,
		`{"type":"view","type":"purchase","price":"text","qty":1}`,
		`{"ty\u0070e":"purchase","items":[],"a":null}`,
		`{"id":9007199254740993,"price":1,"qty":9007199254740993}`,
		`{}`, `{"n":1e400}`, `[1,2]`, `"text"`, `null`, `42`, `not json`, ``,
	}
	for _, src := range exprs {
		p, err := compile("value", "value", src, false)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if p.byField == nil {
			t.Fatalf("%s: no byField form", src)
		}
		for _, v := range values {
			r := stages.Record{Key: []byte("k"), Value: []byte(v)}
			fast := newEvaluator(context.Background(), readsOf(p), 0)
			asWritten := *readsOf(p)
			asWritten.project = false
			slow := newEvaluator(context.Background(), &asWritten, 0)
			fastOut, fastErr := loadAndRun(fast, &r, p)
			slowOut, slowErr := loadAndRun(slow, &r, p)
			if fmt.Sprint(fastErr) != fmt.Sprint(slowErr) || !reflect.DeepEqual(fastOut, slowOut) {
				t.Errorf("%s over %s:\nby field  %#v, %v\nas written %#v, %v", src, v, fastOut, fastErr, slowOut, slowErr)
			}
			_, isObject := slow.env[varJSON].(map[string]any) // and every number holdable
			if fast.projected != isObject {
				t.Errorf("%s over %s: projected %v, object %v", src, v, fast.projected, isObject)
			}
		}
	}
}

func loadAndRun(e *evaluator, r *stages.Record, p *program) (any, error) {
	if err := e.load(r); err != nil {
		return nil, err
	}
	return e.run(p)
}
