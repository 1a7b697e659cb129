package builtin

import (
	"context"
	"slices"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
)

func TestUsesDetection(t *testing.T) {
	tests := []struct {
		src  string
		want uses
	}{
		{`value == "x"`, useValue},
		{`key + value`, useKey | useValue},
		{`"key" == "json"`, 0},
		{`offset > 1 && topic == "t" && partition == 0`, useOffset | useTopic | usePartition},
		{`timestamp.Unix()`, useTimestamp},
		{`json?.key`, useJSON},
		{`headers["json"]`, useHeaders},
		{`toJSON(headers)`, useHeaders},
		{`map(json.items, #.key)`, useJSON},
		{`$env["json"]`, useAll},
	}
	for _, tc := range tests {
		p, err := compile("value", "value", tc.src, false)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if p.uses != tc.want {
			t.Errorf("%s: uses %04b, want %04b", tc.src, p.uses, tc.want)
		}
	}
}

func TestJSONParsedOnlyWhenUsed(t *testing.T) {
	valid := stages.Record{Value: []byte(`{"a":1}`)}
	compiled := func(src string) *program {
		p, err := compile("value", "value", src, false)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	e := newEvaluator(context.Background(), readsOf(compiled(`value`)), 0)
	e.env[varJSON] = "stale"
	if err := e.load(&valid); err != nil || e.env[varJSON] != "stale" {
		t.Errorf("json parsed though no expression uses it")
	}
	e = newEvaluator(context.Background(), readsOf(compiled(`json`)), 0)
	if err := e.load(&valid); err != nil {
		t.Fatal(err)
	}
	if m, ok := e.env[varJSON].(map[string]any); !ok || m["a"] != 1 { // a whole number: an int
		t.Errorf("json = %#v, want map[a:1]", e.env[varJSON])
	}
	if err := e.load(&stages.Record{Value: []byte(`{`)}); err != nil || e.env[varJSON] != nil {
		t.Errorf("json = %#v for an invalid value, want nil", e.env[varJSON])
	}
}

// TestJSONFields: an expression that reads json only through constant
// top-level fields gets those fields (a projection); any other use needs
// the whole value (nil).
func TestJSONFields(t *testing.T) {
	tests := []struct {
		src    string
		fields []string // nil: the whole value
	}{
		{`json.type == "purchase"`, []string{"type"}},
		{`json?.status == "paid" && (json?.amount ?? 0) > 100`, []string{"status", "amount"}},
		{`json["user"] + json.user`, []string{"user"}},
		{`json.items[0].sku`, []string{"items"}},
		{`map(json.items, #.sku)`, []string{"items"}},
		{`toJSON({"order": json.id, "n": len(json.items)})`, []string{"id", "items"}},
		{`json`, nil},
		{`toJSON(json)`, nil},
		{`"type" in json`, nil},
		{`json[key]`, nil},
		{`json.type == "x" && len(json) > 2`, nil},
		{`$env.json.type`, nil},
		{`keys(json)`, nil},
	}
	for _, tt := range tests {
		p, err := compile("value", "value", tt.src, false)
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		if !slices.Equal(p.fields, tt.fields) || (p.fields == nil) != (tt.fields == nil) {
			t.Errorf("%s: fields %q, want %q", tt.src, p.fields, tt.fields)
		}
	}
}
