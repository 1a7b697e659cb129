package builtin

import (
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
	e := newEvaluator(useValue)
	e.env[varJSON] = "stale"
	if err := e.load(&valid); err != nil || e.env[varJSON] != "stale" {
		t.Errorf("json parsed though no expression uses it")
	}
	e = newEvaluator(useJSON)
	if err := e.load(&valid); err != nil {
		t.Fatal(err)
	}
	if m, ok := e.env[varJSON].(map[string]any); !ok || m["a"] != 1.0 {
		t.Errorf("json = %#v, want map[a:1]", e.env[varJSON])
	}
	if err := e.load(&stages.Record{Value: []byte(`{`)}); err != nil || e.env[varJSON] != nil {
		t.Errorf("json = %#v for an invalid value, want nil", e.env[varJSON])
	}
}
