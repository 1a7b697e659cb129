package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/internal/memo"
)

// fullValue is what the json variable held before projections: the whole
// value parsed (nil if invalid), or the parse's error.
func fullValue(v []byte) (any, error) {
	x, _, err := parseJSON(v)
	return x, err
}

// checkProjection fails t if a member access on the projection of fields
// differs from the same access on the full value.
func checkProjection(t interface{ Fatalf(string, ...any) }, v []byte, fields []string) {
	full, fullErr := fullValue(v)
	got, err := docFor(nil, v).value(v, fields)
	if (err == nil) != (fullErr == nil) || err != nil && err.Error() != fullErr.Error() {
		t.Fatalf("%q: error %v, want %v", v, err, fullErr)
	}
	if err != nil {
		return // the record fails: what json holds is never seen
	}
	fm, isObject := full.(map[string]any)
	if !isObject {
		if !reflect.DeepEqual(got, full) {
			t.Fatalf("%q (not an object): json = %#v, want the full value %#v", v, got, full)
		}
		return
	}
	gm, ok := got.(map[string]any)
	if !ok {
		t.Fatalf("%q: json = %#v, want an object", v, got)
	}
	for _, f := range fields {
		want, wantOK := fm[f]
		have, haveOK := gm[f]
		if wantOK != haveOK || !reflect.DeepEqual(have, want) {
			t.Fatalf("%q: json[%q] = %#v (present %v), want %#v (present %v)", v, f, have, haveOK, want, wantOK)
		}
	}
}

func TestProjectionMatchesFullValue(t *testing.T) {
	fields := []string{"type", "id", "a b", "é", "items", "n", "missing"}
	for _, v := range []string{
		`{"type":"purchase","id":42,"items":[{"sku":"a"}],"n":null}`,
		`  { "type" : "x" , "id" : -1.5e3 }  `,
		`{"type":"first","type":"last"}`,                 // duplicates: the last wins
		`{"ty\u0070e":"escaped name","\u00e9":1}`,        // escaped names
		`{"é":"utf-8 name","a b":true}`,                  // non-ASCII and spaces
		`{"type":"esc\"aped \\ \u00e9 \n"}`,              // escaped string value
		"{\"type\":\"bad \xff utf-8\",\"t\xffpe\":1}",    // invalid UTF-8 is replaced, as encoding/json does
		`{"id":12345678901234567890}`,                    // beyond 64 bits: the NumberError
		`{"id":9007199254740993,"n":1.0}`,                // beyond 2^53: an exact int
		`{"id":1e400}`,                                   // beyond float64
		`{"items":{"nested":{"type":"not top-level"}}}`,  // only top-level names count
		`{"items":["]","}",{"x":"\"}"}],"type":"after"}`, // brackets inside strings
		`{}`,
		`[{"type":"array"}]`, `"type"`, `42`, `true`, `null`, // not objects: the full value
		`{"type":`, ``, `{"type":"x"} trailing`, // not JSON: nil
	} {
		checkProjection(t, []byte(v), fields)
	}
}

// TestProjectionProperty: for random JSON objects (random names, nesting,
// duplicates, escapes, numbers of every size) and random field sets, the
// projection agrees with the full value on every field.
func TestProjectionProperty(t *testing.T) {
	names := []string{"a", "type", "id", "é", "a\"b", "x y", "\u2028", "type"}
	var value func(depth int) *rapid.Generator[string]
	value = func(depth int) *rapid.Generator[string] {
		return rapid.Custom(func(t *rapid.T) string {
			kinds := 6
			if depth > 2 {
				kinds = 4
			}
			switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
			case 0:
				return jsonString(rapid.String().Draw(t, "s"))
			case 1:
				return rapid.SampledFrom([]string{"0", "-1", "1.5", "1e3", "9007199254740993", "-9223372036854775808",
					"18446744073709551616", "1e400", "2.5E-3"}).Draw(t, "number")
			case 2:
				return rapid.SampledFrom([]string{"true", "false", "null"}).Draw(t, "literal")
			case 3:
				return jsonString(rapid.SampledFrom(names).Draw(t, "name-like string"))
			case 4:
				elems := rapid.SliceOfN(value(depth+1), 0, 3).Draw(t, "elems")
				return "[" + strings.Join(elems, ",") + "]"
			default:
				return object(t, names, value(depth+1))
			}
		})
	}
	rapid.Check(t, func(t *rapid.T) {
		v := object(t, names, value(1))
		fields := rapid.SliceOfNDistinct(rapid.SampledFrom(names), 1, 4, rapid.ID[string]).Draw(t, "fields")
		checkProjection(t, []byte(v), fields)
	})
}

func object(t *rapid.T, names []string, values *rapid.Generator[string]) string {
	n := rapid.IntRange(0, 5).Draw(t, "members")
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(rapid.SampledFrom([]string{",", " , ", ",\n"}).Draw(t, "comma"))
		}
		name := jsonString(rapid.SampledFrom(names).Draw(t, "name"))
		if rapid.Bool().Draw(t, "escape the name") {
			name = strings.ReplaceAll(name, "a", `\u0061`)
		}
		fmt.Fprintf(&b, "%s:%s", name, values.Draw(t, "value"))
	}
	b.WriteString("}")
	return b.String()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestDocSharedWithinAChainCall: the second stage of a chain call finds
// the doc the first stored; new bytes (a value a stage replaced) get a
// doc of their own.
func TestDocSharedWithinAChainCall(t *testing.T) {
	cache := memo.From(memo.With(context.Background()))
	v := []byte(`{"type":"a"}`)
	d := docFor(cache, v)
	if docFor(cache, v) != d {
		t.Fatal("the same bytes got a second doc")
	}
	replaced := []byte(`{"type":"b"}`)
	if docFor(cache, replaced) == d {
		t.Fatal("new bytes found the old doc")
	}
	full, err := d.value(v, nil)
	if err != nil || !reflect.DeepEqual(full, map[string]any{"type": "a"}) {
		t.Fatalf("full value %#v, %v", full, err)
	}
	if again, _ := docFor(cache, v).value(v, nil); reflect.ValueOf(again).Pointer() != reflect.ValueOf(full).Pointer() {
		t.Fatal("the full value was parsed twice")
	}
}
