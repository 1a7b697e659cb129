package fastjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// parseJSON is what the json variable holds for v, worked out
// independently of this package's reader, from the stages'
// documentation (stages/builtin's package documentation) and
// encoding/json: ok is false if v is not valid JSON (json is then
// nil); err is the record's error for a valid value that is refused
// (nested deeper than MaxDepth: a *DepthError; a number no int or
// float64 holds: a *NumberError). A number written as a whole number is
// an int, any other a float64.
//
// (Before, this oracle decoded with encoding/json's float64 numbers and
// converted them with the implementation's own helpers: it shared the
// implementation's number rule, so both sides agreed that {"a":1} holds a
// float64, against the documentation, and the properties passed.)
func parseJSON(v []byte) (x any, ok bool, err error) {
	if !json.Valid(v) {
		return nil, false, nil
	}
	if d := nesting(v); d > MaxDepth {
		return nil, false, &DepthError{Depth: d, Limit: MaxDepth}
	}
	if err := firstRefusedNumber(v); err != nil {
		return nil, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		panic(fmt.Sprintf("%q: valid, but %v", v, err))
	}
	x, err = documentedNumbers(x)
	return x, err == nil, err
}

// firstRefusedNumber is the error of the first number of valid JSON v, in
// text order, that the documentation says fails the record (any number
// written counts, also one a later duplicate name replaces).
func firstRefusedNumber(v []byte) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if n, ok := tok.(json.Number); ok {
			if _, err := documentedNumbers(n); err != nil {
				return err
			}
		}
	}
}

// documentedNumbers replaces every json.Number in x by what the
// documentation says it is: a whole number (no fraction or exponent) an
// int, if it fits 64 bits; any other a float64, if it is within range;
// else the record fails with a *NumberError.
func documentedNumbers(x any) (any, error) {
	switch v := x.(type) {
	case json.Number:
		lit := v.String()
		if !strings.ContainsAny(lit, ".eE") {
			i, err := strconv.ParseInt(lit, 10, 64)
			if err != nil {
				return nil, &NumberError{Number: shorten(lit), Whole: true}
			}
			return int(i), nil
		}
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil {
			return nil, &NumberError{Number: shorten(lit)}
		}
		return f, nil
	case map[string]any:
		for k, e := range v {
			c, err := documentedNumbers(e)
			if err != nil {
				return nil, err
			}
			v[k] = c
		}
	case []any:
		for i, e := range v {
			c, err := documentedNumbers(e)
			if err != nil {
				return nil, err
			}
			v[i] = c
		}
	}
	return x, nil
}

// nesting is how deeply valid JSON v nests arrays and objects, by
// encoding/json's tokens.
func nesting(v []byte) int {
	dec := json.NewDecoder(bytes.NewReader(v))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// sameFailure reports whether a and b are both nil, or the same error.
func sameFailure(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

// fullValue is what the json variable held before projections: the whole
// value parsed (nil if invalid), or the parse's error.
func fullValue(v []byte) (any, error) {
	x, _, err := parseJSON(v)
	return x, err
}

// checkProjection fails t if what ProjectInto gives for json.<f>
// differs from the member access on the full value, for each of fields,
// or if a value it declines is not one the full value's reading
// refuses, is not an object, or is not JSON.
func checkProjection(t interface{ Fatalf(string, ...any) }, v []byte, fields []string) {
	full, fullErr := fullValue(v)
	d := new(Docs).New(v)
	slots := make([]any, len(fields))
	for i := range slots {
		slots[i] = "not set"
	}
	if !d.ProjectInto(v, NewFieldSet(fields), slots, new(Boxer)) {
		// Not an object, not JSON, or a number too large: the program
		// as written runs over the whole value.
		for i, s := range slots {
			if s != "not set" {
				t.Fatalf("%q: not projected, but slot %d set to %#v", v, i, s)
			}
		}
		got, err := d.Value(v)
		if !sameFailure(err, fullErr) {
			t.Fatalf("%q: error %v, want %v", v, err, fullErr)
		}
		if err != nil {
			return // the record fails: what json holds is never seen
		}
		if _, isObject := full.(map[string]any); isObject {
			t.Fatalf("%q: an object whose numbers are all holdable was not projected", v)
		}
		if !reflect.DeepEqual(got, full) {
			t.Fatalf("%q: json = %#v, want the full value %#v", v, got, full)
		}
		return
	}
	if fullErr != nil {
		t.Fatalf("%q: projected, but the full value fails: %v", v, fullErr)
	}
	fm, isObject := full.(map[string]any)
	if !isObject {
		t.Fatalf("%q: projected, but the full value %#v is not an object", v, full)
	}
	for i, f := range fields {
		if want := fm[f]; !reflect.DeepEqual(slots[i], want) { // what json.f gives: nil when absent
			t.Fatalf("%q: json.%s = %#v, want %#v", v, f, slots[i], want)
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
		sizedObject(1<<16 - 1),               // the longest value whose member offsets are one uint16 each
		sizedObject(1 << 16),                 // exactly 64KiB: two uint16s each
		sizedObject(1<<16 + 1),               // the last members past 64KiB
		sizedObject(1<<16 + 1)[:1<<16] + "}", // not JSON, 64KiB
	} {
		checkProjection(t, []byte(v), fields)
	}
}

// sizedObject returns a JSON object of exactly n bytes (at least 120)
// whose members after the first two, a padding string, sit at its end.
func sizedObject(n int) string {
	head, tail := `{"type":"big","pad":"`, `","id":-7.5,"items":[1,{"type":"nested"}], "é" : null,"n":123456789}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// TestMemberSpansWidth: a doc records its members' offsets in one uint16
// each for a value shorter than 64KiB, in two from 64KiB on; either way
// they are the members eachMember walks to, and the projection gives
// what the full value holds.
func TestMemberSpansWidth(t *testing.T) {
	tests := []struct {
		n     int
		width uint8
	}{
		{200, 1},
		{1<<16 - 2, 1},
		{1<<16 - 1, 1},
		{1 << 16, 2},
		{1<<16 + 1, 2},
		{1<<16 + 100, 2}, // every member but the first two past 64KiB
		{1 << 18, 2},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.n), func(t *testing.T) {
			v := []byte(sizedObject(tt.n))
			if len(v) != tt.n {
				t.Fatalf("sizedObject made %d bytes", len(v))
			}
			d := new(Docs).New(v)
			if d.width != tt.width || len(d.memberSpans()) != 6*4*int(tt.width) {
				t.Fatalf("width %d, %d spans; want width %d, 6 members", d.width, len(d.memberSpans()), tt.width)
			}
			checkSpans(t, v)
			checkProjection(t, v, []string{"type", "pad", "id", "items", "é", "n", "missing"})
		})
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
					"18446744073709551616", "1e400", "2.5E-3", "1.0", "-0", "-0.0", "9223372036854775807", "1E2", "7"}).Draw(t, "number")
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

// TestValueParsedOnce: a doc parses its value on the first Value and
// gives that same value after, also to a projection.
func TestValueParsedOnce(t *testing.T) {
	v := []byte(`{"type":"a","n":1000}`)
	d := new(Docs).New(v)
	full, err := d.Value(v)
	if err != nil || !reflect.DeepEqual(full, map[string]any{"type": "a", "n": 1000}) {
		t.Fatalf("full value %#v, %v", full, err)
	}
	if again, _ := d.Value(v); reflect.ValueOf(again).Pointer() != reflect.ValueOf(full).Pointer() {
		t.Fatal("the full value was parsed twice")
	}
	slots := make([]any, 2)
	if !d.ProjectInto(v, NewFieldSet([]string{"n", "missing"}), slots, new(Boxer)) || slots[0] != 1000 || slots[1] != nil {
		t.Fatalf("projected from the parsed value: %#v", slots)
	}
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
// record (1, 3, 64, 65 and 70 fields): every field is what the member
// access on the full value gives (absent: nil, not the last record's;
// duplicates: the last), and a value that is not projected leaves the
// slots alone.
func TestProjectIntoReusesSlots(t *testing.T) {
	for _, n := range []int{1, 3, 64, 65, 70} {
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
		var a Docs
		var bx Boxer
		fs := NewFieldSet(fields)
		for _, v := range []string{all.String(), `{"other":true}`, dup.String(), `{}`, `{"f0":null}`, all.String(), `{"f0":"x","f1":"y","f2":"z","f69":1}`, `{"other":true}`} {
			if !a.New([]byte(v)).ProjectInto([]byte(v), fs, slots, &bx) {
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
			if a.New([]byte(v)).ProjectInto([]byte(v), fs, slots, &bx) {
				t.Fatalf("%s projected", v)
			}
			if !reflect.DeepEqual(slots, before) {
				t.Fatalf("%s not projected, but the slots changed", v)
			}
		}
	}
}

// TestPresent: Present marks the fields an object has, whatever their
// values, by their decoded names, and marks nothing for a value that is
// not an object.
func TestPresent(t *testing.T) {
	fs := NewFieldSet([]string{"type", "user", "é"})
	for _, c := range []struct {
		v    string
		want []bool
	}{
		{`{"type":1,"user":null}`, []bool{true, true, false}},
		{`{"t\u0079pe":[],"\u00e9":{}}`, []bool{true, false, true}},
		{`{"user":1e400}`, []bool{false, true, false}},
		{`{}`, []bool{false, false, false}},
		{`["type"]`, []bool{false, false, false}},
		{`not json`, []bool{false, false, false}},
		{sizedObject(1 << 17), []bool{true, false, true}},
	} {
		got := make([]bool, 3)
		v := []byte(c.v)
		new(Docs).New(v).Present(v, fs, got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%.60s: present %v, want %v", c.v, got, c.want)
		}
	}
}

// TestDocSpansShareChunks: the docs of one Process call record their
// members in shared chunks, growing ones, an object with more members
// than a chunk has room left getting an array of its own; values that
// are not objects record nothing. However the sizes follow each other,
// every doc keeps its own members: none is overwritten by a later one.
func TestDocSpansShareChunks(t *testing.T) {
	salt := 0 // makes each object's layout its own: overwritten spans show
	obj := func(members int) []byte {
		salt++
		var b strings.Builder
		b.WriteString(strings.Repeat(" ", salt%3) + "{")
		for i := range members {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"%s%d":[%d]`, strings.Repeat("m", 1+salt%5), i, salt)
		}
		b.WriteString("}")
		return []byte(b.String())
	}
	var values [][]byte
	for _, n := range []int{0, 1, 15, 16, 17, 63, 64, 65, 300, 2, 1000, 3, 1, 70, 1100, 5} {
		values = append(values, obj(n), []byte(`[1,2]`), []byte(`{"not":"json"`))
	}
	for range 200 { // many chunks
		values = append(values, obj(13))
	}
	var a Docs
	docs := make([]*Doc, len(values))
	for i, v := range values {
		docs[i] = a.New(v)
	}
	for i, v := range values {
		d := docs[i]
		if d.object != (firstByte(v) == '{' && d.valid) || d.object && d.width != 1 || !d.object && (len(d.memberSpans()) != 0 || d.width != 0) {
			t.Fatalf("value %d (%.40s): object %v, width %d, %d spans", i, v, d.object, d.width, len(d.memberSpans()))
		}
		if !d.object {
			continue
		}
		var got, walked [][2]string
		d.eachMember(v, func(name, raw []byte) { got = append(got, [2]string{string(name), string(raw)}) })
		eachMember(v, func(name, raw []byte) { walked = append(walked, [2]string{string(name), string(raw)}) })
		if !slices.Equal(got, walked) {
			t.Fatalf("value %d (%.40s): members recorded as %.200q, walked %.200q", i, v, got, walked)
		}
	}
}
