package fastjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	segjson "github.com/segmentio/encoding/json"
)

// FuzzFastJSONAgreesWithStd: the stages read JSON with this package's
// reader (scanJSON, decodeValid, for linear cost and a depth limit) and
// write it with Append (github.com/segmentio/encoding/json for all but
// scalars), for speed; the semantics users rely on are encoding/json's.
// For any bytes the reader and encoding/json agree on validity; for
// valid JSON the reader decodes what encoding/json decodes (numbers as
// documented: see parseJSON) or refuses it for the same reason, and so
// does Parse; and Append encodes a decoded value to the bytes
// encoding/json writes (no HTML escaping). A dependency upgrade that
// drifts fails here. An object's fields read one by one (ProjectInto)
// are what the whole value holds.
func FuzzFastJSONAgreesWithStd(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"type":"purchase","user":"u1","price":12.5,"qty":3,"tags":["a","b"],"n":null,"ok":true}`,
		`[1, -0.0, 1e-7, 123456789012345678, 1.5e300, "x"]`,
		`"<a href=\"x\">&amp;</a> \u2028 \u2029 \ud83d\ude00 \u00e9"`,
		"\"\xff\xfe invalid utf-8 \xc3\"",
		`{"a":{"b":{"c":[{},[],""]}}, "a":2}`,
		`1e400`, `{"a":1,}`, `01`, "\"\x01\"", ` 	{ } `, `tru`, `"\ud800"`,
		`[1, 1.0, -0, 1E2, 9223372036854775807, -9223372036854775808, 9223372036854775808]`,
		// objects, checked member by member (scanObject): nested values,
		// white space everywhere, the first unholdable number in order,
		// and what follows or breaks a member
		` { "a" : { } , "b" : [ ] , "c" : [ 1 , { "d" : "e" } ] } `, `{"a":[1e400],"b":1e999}`, `{"a":1e999,"b":[1e400]}`,
		`{"a":1} x`, `{"a":1}}`, `{"a":1,"b":}`, `{"a":01}`, `{"a":-}`, `{"a":nul}`, `{"a":"x}`, `{"a":1 "b":2}`, `{"a"}`, `{"a":}`,
		`{"a":[}`, `{"a":{"b":1]}`, `{"":""}`, `{"a\"b":"c\u00e9"}`, `{}x`, `{`, `{"a":[1,2,]}`,
		`"\ud83d\ude00\ud83d x\udc00\\u0041 \/"`, `-`, `1.`, `.5`, `1e`, `[1 2]`, `{"a" 1}`, `{1:2}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`, `[[[`, `]`,
		strings.Repeat(`{"a":[`, MaxDepth/2) + "1" + strings.Repeat("]}", MaxDepth/2),         // at the limit
		strings.Repeat(`{"a":[`, MaxDepth/2+1) + "1" + strings.Repeat("]}", MaxDepth/2+1),     // past it
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),                               // past encoding/json's
		strings.Repeat(`{"a":[`, MaxDepth/2+1) + "1" + strings.Repeat("]}", MaxDepth/2) + "]", // past it, not JSON
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := scanJSON(b)
		valid := json.Valid(b)
		var de *DepthError
		if s.valid != valid {
			if errors.As(s.err, &de) && de.Depth > 10000 {
				return // past encoding/json's own limit, which it calls invalid
			}
			t.Fatalf("%.300q: encoding/json says valid=%v, scanJSON says %v", b, valid, s.valid)
		}
		if _, valid, err := Parse(b); valid != s.valid || !sameFailure(err, s.err) {
			t.Fatalf("%.300q: Parse says valid %v, %v; scanJSON %v, %v", b, valid, err, s.valid, s.err)
		}
		if !s.valid {
			return
		}
		want, ok, wantErr := parseJSON(b)
		if !sameFailure(s.err, wantErr) {
			t.Fatalf("%.300q: scanJSON refuses it with %v, want %v", b, s.err, wantErr)
		}
		if !ok {
			return
		}
		if _, isObject := want.(map[string]any); isObject != s.object {
			t.Fatalf("%.300q: object %v, want %v", b, s.object, isObject)
		}
		got := decodeValid(b)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%.300q: decoded differently:\nencoding/json %#v\ndecodeValid   %#v", b, want, got)
		}
		if x, valid, err := Parse(b); !valid || err != nil || !reflect.DeepEqual(x, want) {
			t.Fatalf("%.300q: Parse gives %#v, %v, %v; want %#v", b, x, valid, err, want)
		}
		if s.object {
			checkSpans(t, b)
		}
		if m, isObject := want.(map[string]any); isObject {
			// The projection (fields decoded one by one, boxed from
			// slabs) gives what the full value gives, for its own
			// names and some it may lack.
			fields := []string{"type", "a"}
			for name := range m {
				if len(fields) < 8 && !slices.Contains(fields, name) {
					fields = append(fields, name)
				}
			}
			checkProjection(t, b, fields)
		}
		var std bytes.Buffer
		se := json.NewEncoder(&std)
		se.SetEscapeHTML(false)
		if err := se.Encode(want); err != nil {
			t.Fatalf("%.300q: encoding/json cannot encode what it decoded: %v", b, err)
		}
		enc, err := Append(nil, want)
		if err != nil {
			t.Fatalf("%.300q: segmentio cannot encode what encoding/json encodes: %v", b, err)
		}
		if w := bytes.TrimSuffix(std.Bytes(), []byte("\n")); !bytes.Equal(w, enc) {
			t.Fatalf("%.300q: encoded differently:\nencoding/json %s\nsegmentio     %s", b, w, enc)
		}
	})
}

// checkSpans fails t if the members of obj (a valid JSON object) recorded
// by scanJSONMembers, in either width, are not those eachMember walks to.
func checkSpans(t interface{ Fatalf(string, ...any) }, obj []byte) {
	var walked [][2]string
	eachMember(obj, func(name, raw []byte) { walked = append(walked, [2]string{string(name), string(raw)}) })
	for width := max(1, spanWidth(len(obj))); width <= 2; width++ {
		var spans []uint16
		s := scanJSONMembers(obj, &spans, width)
		if !s.valid || !s.object {
			t.Fatalf("%.300q: scanned as valid %v, object %v", obj, s.valid, s.object)
		}
		d := Doc{valid: true, object: true}
		d.setSpans(spans, width)
		var got [][2]string
		d.eachMember(obj, func(name, raw []byte) { got = append(got, [2]string{string(name), string(raw)}) })
		if !slices.Equal(got, walked) {
			t.Fatalf("%.300q: width %d: members recorded as %q, walked %q", obj, width, got, walked)
		}
	}
}

// FuzzAppendJSONScalars: the scalars Append writes itself (AppendScalar:
// strings, ints, float64s, bools, nil) come out as encoding/json writes
// them without HTML escaping, and as segmentio/encoding/json (which
// writes everything else) does; NaN and infinities fail in both.
func FuzzAppendJSONScalars(f *testing.F) {
	f.Add("purchase", int64(42), 12.5, true)
	f.Add("<a&b>", int64(-1), 1e-7, false)
	f.Add("tab\there \"q\" \\ \x7f \u00e9 \u2028 \xff", int64(math.MinInt64), 1e21, false)
	f.Add("", int64(0), math.Copysign(0, -1), false)
	f.Add("x", int64(math.MaxInt64), 123456789e300, true)
	f.Add("y", int64(7), 0.000001, true)
	f.Add("z", int64(7), math.NaN(), true)
	f.Fuzz(func(t *testing.T, s string, i int64, x float64, b bool) {
		for _, v := range []any{s, i, int(i), x, b, nil} {
			got, err := Append([]byte("prefix"), v)
			seg, segErr := segjson.Append(nil, v, segjson.SortMapKeys)
			if (err != nil) != (segErr != nil) {
				t.Fatalf("%#v: error %v, segmentio's %v", v, err, segErr)
			}
			if err != nil {
				continue
			}
			var std bytes.Buffer
			se := json.NewEncoder(&std)
			se.SetEscapeHTML(false)
			if err := se.Encode(v); err != nil {
				t.Fatalf("%#v: encoding/json fails (%v), Append wrote %s", v, err, got)
			}
			want := bytes.TrimSuffix(std.Bytes(), []byte("\n"))
			if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) || !bytes.Equal(seg, want) {
				t.Fatalf("%#v: Append wrote %s, segmentio %s, encoding/json %s", v, got, seg, want)
			}
		}
	})
}
