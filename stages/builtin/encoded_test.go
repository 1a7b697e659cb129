package builtin

import "testing"

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
