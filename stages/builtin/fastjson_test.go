package builtin

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	fastjson "github.com/segmentio/encoding/json"
)

// FuzzFastJSONAgreesWithStd: the json stage, the json variable and toJSON
// use github.com/segmentio/encoding/json for speed; the semantics users
// rely on are encoding/json's. For any bytes both agree on validity; for
// valid JSON they decode the same value, and encode it to the same bytes
// (no HTML escaping, as marshalJSON). A dependency upgrade that drifts
// fails here.
func FuzzFastJSONAgreesWithStd(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"type":"purchase","user":"u1","price":12.5,"qty":3,"tags":["a","b"],"n":null,"ok":true}`,
		`[1, -0.0, 1e-7, 123456789012345678, 1.5e300, "x"]`,
		`"<a href=\"x\">&amp;</a> \u2028 \u2029 \ud83d\ude00 \u00e9"`,
		"\"\xff\xfe invalid utf-8 \xc3\"",
		`{"a":{"b":{"c":[{},[],""]}}, "a":2}`,
		`1e400`, `{"a":1,}`, `01`, "\"\x01\"", ` 	{ } `, `tru`, `"\ud800"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := json.Valid(b)
		if got := fastjson.Valid(b); got != valid {
			t.Fatalf("%q: encoding/json says valid=%v, segmentio says %v", b, valid, got)
		}
		if !valid {
			return
		}
		var std any
		if json.Unmarshal(b, &std) != nil {
			return // a number beyond float64: the stages check numbers before decoding
		}
		var fast any
		if err := fastjson.Unmarshal(b, &fast); err != nil {
			t.Fatalf("%q: encoding/json decodes it, segmentio fails: %v", b, err)
		}
		if !reflect.DeepEqual(std, fast) {
			t.Fatalf("%q: decoded differently:\nencoding/json %#v\nsegmentio     %#v", b, std, fast)
		}
		var want bytes.Buffer
		se := json.NewEncoder(&want)
		se.SetEscapeHTML(false)
		if err := se.Encode(std); err != nil {
			t.Fatalf("%q: encoding/json cannot encode what it decoded: %v", b, err)
		}
		got, err := marshalJSON(std)
		if err != nil {
			t.Fatalf("%q: segmentio cannot encode what encoding/json encodes: %v", b, err)
		}
		if w := bytes.TrimSuffix(want.Bytes(), []byte("\n")); !bytes.Equal(w, got) {
			t.Fatalf("%q: encoded differently:\nencoding/json %s\nsegmentio     %s", b, w, got)
		}
	})
}
