package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/expr-lang/expr/vm"
	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/stages"
)

// project is projectInto with the fields set in env, by variable name:
// how the projection was checked when the byField forms ran over the
// environment map (checkProjection, TestProjectClearsAbsentFields).
func (d *jsonDoc) project(v []byte, fields, vars []string, env map[string]any, bx *boxer) bool {
	slots := make([]any, len(fields))
	if !d.projectInto(v, newFieldSet(fields), slots, bx) {
		return false
	}
	for i, name := range vars {
		env[name] = slots[i]
	}
	return true
}

// manyFields returns n field names f0, f1, ...
func manyFields(n int) []string {
	fields := make([]string, n)
	for i := range fields {
		fields[i] = fmt.Sprintf("f%d", i)
	}
	return fields
}

// TestProjectIntoReusesSlots: one slice of slots serves record after
// record (1, 64 and 65 fields): every field is what the member access on
// the full value gives (absent: nil, not the last record's; duplicates:
// the last), and a value that is not projected leaves the slots alone.
func TestProjectIntoReusesSlots(t *testing.T) {
	for _, n := range []int{1, 64, 65} {
		fields := manyFields(n)
		var all, dup strings.Builder
		all.WriteString("{")
		dup.WriteString(`{"f0":"first",`)
		for i, f := range fields {
			if i > 0 {
				all.WriteString(",")
				dup.WriteString(",")
			}
			fmt.Fprintf(&all, "%q:%d", f, 1000+i)
			fmt.Fprintf(&dup, "%q:\"v%d\"", f, i)
		}
		all.WriteString("}")
		dup.WriteString(`,"f0":"last"}`)
		slots := make([]any, n)
		var a docAlloc
		for _, v := range []string{all.String(), `{"other":true}`, dup.String(), `{}`, `{"f0":null}`, all.String()} {
			if !docFor(nil, &a, []byte(v)).projectInto([]byte(v), newFieldSet(fields), slots, new(boxer)) {
				t.Fatalf("%d fields: %s not projected", n, v)
			}
			full, err := fullValue([]byte(v))
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range fields {
				if want := full.(map[string]any)[f]; !reflect.DeepEqual(slots[i], want) {
					t.Fatalf("%d fields, %s: %s = %#v, want %#v", n, v, f, slots[i], want)
				}
			}
		}
		before := append([]any(nil), slots...)
		for _, v := range []string{`[1]`, `"f0"`, `null`, `{"f0":`, `{"f0":1e400}`} {
			if docFor(nil, &a, []byte(v)).projectInto([]byte(v), newFieldSet(fields), slots, new(boxer)) {
				t.Fatalf("%s projected", v)
			}
			if !reflect.DeepEqual(slots, before) {
				t.Fatalf("%s not projected, but the slots changed", v)
			}
		}
	}
}

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
	if _, isObject := fullValueOrNil(string(v)).(map[string]any); c.fast.projected != isObject {
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

// decodedIndex is the index in fields of what the member name (a JSON
// string token) decodes to, as encoding/json decodes it; -1 if none, and
// false if name is not a string token.
func decodedIndex(fields []string, name string) (int, bool) {
	var s string
	if !json.Valid([]byte(name)) || json.Unmarshal([]byte(name), &s) != nil {
		return 0, false
	}
	return slices.Index(fields, s), true
}

// checkFieldSet fails t if fieldSet.index (or fieldIndex) finds another
// field for name than the one it decodes to.
func checkFieldSet(t interface{ Fatalf(string, ...any) }, fields []string, name string) {
	want, ok := decodedIndex(fields, name)
	if !ok {
		return
	}
	if got := newFieldSet(fields).index([]byte(name)); got != want {
		t.Fatalf("fields %q, name %s: index %d, want %d", fields, name, got, want)
	}
	if got := fieldIndex(fields, []byte(name)); got != want {
		t.Fatalf("fields %q, name %s: fieldIndex %d, want %d", fields, name, got, want)
	}
	// Without an escape, plainIndex says the same from the name's bytes
	// in a value: at its end (compared as a string) and followed by
	// more bytes (a short token compared as one word, what follows the
	// name masked off).
	if fs := newFieldSet(fields); fs.ascii && !strings.Contains(name, `\`) {
		for _, v := range []string{name, "{" + name, "{" + name + `:"and more bytes after it"}`} {
			start := strings.Index(v, name)
			if got := fs.plainIndex([]byte(v), start, start+len(name)); got != want {
				t.Fatalf("fields %q, name %s in %q: plainIndex %d, want %d", fields, name, v, got, want)
			}
		}
	}
}

// fieldSetPool is field names of every kind a fieldSet tells apart:
// ASCII ones sharing first bytes, the empty one, a NUL, a quote, and ones
// that are not ASCII (which make the set take the general path).
var fieldSetPool = []string{"type", "t", "ty", "ts", "T", "a b", "", "\x00", "a\"b", "a\\b", "é", "\u2028", "\ufffd"}

// TestFieldSetIndex: a member name is found among fields exactly when it
// decodes to one of them: escaped names, non-ASCII and invalid UTF-8
// (which decodes to U+FFFD), names that only share a first byte.
func TestFieldSetIndex(t *testing.T) {
	names := []string{`"type"`, `"t\u0079pe"`, `"\u0074ype"`, `"typ"`, `"types"`, `"ts"`, `"t"`, `"x"`, `""`,
		`"\u0000"`, `"a\"b"`, `"a\\b"`, `"a b"`, `"\u0061 b"`, `"é"`, `"\u00e9"`, "\"\xff\"", `"\ufffd"`, `"\u2028"`,
		"\"\u2028\"", `"T"`, `"\u0054"`, `"\/"`, `"e\u0301"`}
	for _, fields := range [][]string{
		{"type"}, {"type", "ts", "t"}, {"T", "a b", ""}, {"\x00", "a\"b"}, {"a\\b", "type"},
		{"type", "é"}, {"\ufffd"}, {"\u2028", "t"}, {}, fieldSetPool,
	} {
		for _, name := range names {
			if _, ok := decodedIndex(fields, name); !ok {
				t.Fatalf("%s is not a JSON string", name)
			}
			checkFieldSet(t, fields, name)
		}
	}
}

// TestFieldSetIndexProperty: random field sets and random member names
// built of plain bytes, escapes, non-ASCII and invalid UTF-8.
func TestFieldSetIndexProperty(t *testing.T) {
	pieces := []string{"t", "y", "p", "e", "s", "T", " ", "a", "b", `\u0074`, `\u0079`, `\u0000`, `\"`, `\\`, `\/`,
		"é", `\u00e9`, "\xff", "\xc3", `\ufffd`, "\u2028", `\u2028`, `\n`}
	rapid.Check(t, func(t *rapid.T) {
		fields := rapid.SliceOfNDistinct(rapid.SampledFrom(fieldSetPool), 0, 5, rapid.ID[string]).Draw(t, "fields")
		parts := rapid.SliceOfN(rapid.SampledFrom(pieces), 0, 6).Draw(t, "name")
		checkFieldSet(t, fields, `"`+strings.Join(parts, "")+`"`)
	})
}

// FuzzFieldSetIndex: for any member name and field, fieldSet.index finds
// the field exactly when the name decodes to it.
func FuzzFieldSetIndex(f *testing.F) {
	f.Add(`type`, "type")
	f.Add(`t\u0079pe`, "type")
	f.Add(`\u00e9`, "é")
	f.Add("\xff", "\ufffd")
	f.Add(`a\"b`, "a\"b")
	f.Fuzz(func(t *testing.T, inner, field string) {
		for _, fields := range [][]string{{field}, {"type", field}, {field, "é"}} {
			checkFieldSet(t, fields, `"`+inner+`"`)
		}
	})
}
