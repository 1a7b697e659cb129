package fastjson

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

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

// checkFieldSet fails t if FieldSet.index (or fieldIndex) finds another
// field for name than the one it decodes to.
func checkFieldSet(t interface{ Fatalf(string, ...any) }, fields []string, name string) {
	want, ok := decodedIndex(fields, name)
	if !ok {
		return
	}
	if got := NewFieldSet(fields).index([]byte(name)); got != want {
		t.Fatalf("fields %q, name %s: index %d, want %d", fields, name, got, want)
	}
	if got := fieldIndex(fields, []byte(name)); got != want {
		t.Fatalf("fields %q, name %s: fieldIndex %d, want %d", fields, name, got, want)
	}
	// Without an escape, plainIndex says the same from the name's bytes
	// in a value: at its end (compared as a string) and followed by
	// more bytes (a short token compared as one word, what follows the
	// name masked off).
	if fs := NewFieldSet(fields); fs.ascii && !strings.Contains(name, `\`) {
		for _, v := range []string{name, "{" + name, "{" + name + `:"and more bytes after it"}`} {
			start := strings.Index(v, name)
			if got := fs.plainIndex([]byte(v), start, start+len(name)); got != want {
				t.Fatalf("fields %q, name %s in %q: plainIndex %d, want %d", fields, name, v, got, want)
			}
		}
	}
}

// fieldSetPool is field names of every kind a FieldSet tells apart:
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

// FuzzFieldSetIndex: for any member name and field, FieldSet.index finds
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
