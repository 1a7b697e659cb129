package builtin

import (
	"slices"
	"testing"
)

// TestToJSONArg: only a program that is one call toJSON(x) takes map's
// direct encoding path, with x as its argument.
func TestToJSONArg(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`toJSON({"a": json.a})`, `{"a": json.a}`},
		{`  toJSON( json ) `, ` json `},
		{`toJSON(json.a) + toJSON(json.b)`, ``},
		{`toJSON(json.a) == toJSON(json.b) ? "x" : "y"`, ``},
		{`"" + toJSON(json)`, ``},
		{`upper(toJSON(json))`, ``},
		{`toJSON((json))`, `(json)`},
	} {
		p, err := compile("value", "value", c.src, false)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		withEncoded(p, "value", c.src)
		got := ""
		if p.encoded != nil {
			got = toJSONArg(c.src, p.prog)
		}
		if got != c.want {
			t.Errorf("%s: direct argument %q, want %q", c.src, got, c.want)
		}
	}
}

// TestObjectEncoding: a toJSON of an object literal with constant keys is
// written member by member, in the order appendJSON writes the map (by
// name; of duplicate names the first, as expr builds the map).
func TestObjectEncoding(t *testing.T) {
	for _, c := range []struct {
		src    string
		object bool
		order  []int
	}{
		{`toJSON({"order": json.id, "user": json.user, "amount": json.price * json.qty})`, true, []int{2, 0, 1}},
		{`toJSON( {"b": 1, "a": json.x, "b": 2} )`, true, []int{1, 0}},
		{`toJSON({b: key, a: offset})`, true, []int{1, 0}},
		{`toJSON(({"a": json.x}))`, false, nil},
		{`toJSON({"a": json.x}.a)`, false, nil},
		{`toJSON({("a" + "b"): json.x, "a": 1})`, true, []int{1, 0}}, // a constant key, folded
		{`toJSON({"a": {"c": json.x}})`, true, []int{0}},
	} {
		p, err := compile("value", "value", c.src, false)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		withEncoded(p, "value", c.src)
		if p.encoded == nil {
			t.Fatalf("%s: not encoded directly", c.src)
		}
		o := p.encoded.object
		if (o != nil) != c.object {
			t.Fatalf("%s: written member by member: %v, want %v", c.src, o != nil, c.object)
		}
		if o != nil && !slices.Equal(o.order, c.order) {
			t.Errorf("%s: order %v, want %v", c.src, o.order, c.order)
		}
	}
}
