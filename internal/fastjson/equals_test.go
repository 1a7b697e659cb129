package fastjson

import (
	"testing"
)

// fieldEqualsValues are values FieldEquals must answer as a comparison
// of the decoded field does: escapes, duplicates, other types,
// non-UTF-8, numbers refused, non-objects, invalid JSON.
var fieldEqualsValues = []string{
	`{"type":"purchase"}`, `{"type":"view"}`, `{"kind":"purchase"}`, `{}`,
	`{"type":"purc\u0068ase"}`, `{"t\u0079pe":"purchase"}`, `{"type":"purchase\""}`,
	`{"type":"purchase","type":"view"}`, `{"type":"view","type":"purchase"}`,
	`{"type":1}`, `{"type":null}`, `{"type":true}`, `{"type":["purchase"]}`, `{"type":{"a":"purchase"}}`,
	"{\"type\":\"purchase\xff\"}", `{"type":"é"}`, `{"a b":"x y"}`, `{"é":"purchase"}`, `{"":"purchase"}`,
	`{"a":1e400,"type":"purchase"}`, `{"a":123456789012345678901234567890,"type":"purchase"}`,
	`["purchase"]`, `"purchase"`, `null`, `not json`, ``, `{"type":"purchase"`, ` {"type" : "purchase"} `,
	sizedObject(1 << 17), // members recorded two uint16s each
}

// checkFieldEquals fails t unless FieldEquals(name, want) over v answers
// as the oracle's full value does: not at all (ok false) when the value
// is not an object or is refused, else whether its member name is the
// string want. It also declines once the doc is parsed whole.
func checkFieldEquals(t testing.TB, name, want string, v []byte) {
	t.Helper()
	fs := NewFieldSet([]string{name})
	d := new(Docs).New(v)
	equal, ok := d.FieldEquals(v, fs, want)
	full, err := fullValue(v)
	m, isObject := full.(map[string]any)
	switch {
	case ok != (isObject && err == nil):
		t.Fatalf("%q == %q over %q: answered %v; the value is an object %v, refused %v", name, want, v, ok, isObject, err)
	case ok && equal != (m[name] == any(want)):
		t.Fatalf("%q == %q over %q: %v, but the field is %#v", name, want, v, equal, m[name])
	}
	if ok {
		if _, err := d.Value(v); err != nil {
			t.Fatal(err)
		}
		if _, ok := d.FieldEquals(v, fs, want); ok {
			t.Fatalf("%q == %q over %q: answered from the bytes once parsed whole", name, want, v)
		}
	}
}

// TestFieldEquals: over every value above, FieldEquals answers what the
// decoded field compared with the constant gives.
func TestFieldEquals(t *testing.T) {
	for _, c := range [][2]string{
		{"type", "purchase"}, {"type", ""}, {"type", "é"}, {"a b", "x y"}, {"é", "purchase"}, {"", "purchase"},
		{"type", "purchase\""}, {"type", "purchase\uFFFD"}, {"type", "big"},
	} {
		for _, v := range fieldEqualsValues {
			checkFieldEquals(t, c[0], c[1], []byte(v))
		}
	}
}

// FuzzFieldEquals: over any value, name and constant, FieldEquals
// answers what the decoded field compared with the constant gives.
func FuzzFieldEquals(f *testing.F) {
	for _, v := range fieldEqualsValues {
		f.Add([]byte(v), "type", "purchase")
	}
	f.Add([]byte(`{"type":"\ud800"}`), "type", "\uFFFD")
	f.Add([]byte(`{"\u00e9":"x"}`), "é", "x")
	f.Fuzz(func(t *testing.T, v []byte, name, want string) {
		checkFieldEquals(t, name, want, v)
	})
}
