package stages_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

func TestSpecCheck(t *testing.T) {
	spec := stages.Spec{Name: "s", Options: []stages.OptionSpec{
		{Name: "topic", Type: stages.TypeString, Required: true},
		{Name: "mode", Type: stages.TypeString, Enum: []string{"a", "b"}, Default: "a"},
		{Name: "wait", Type: stages.TypeDuration, Default: time.Second},
		{Name: "tags", Type: stages.TypeStringList, Default: []string{"x"}},
	}}
	tests := []struct {
		name  string
		given stages.Options
		want  map[string]error // option -> sentinel
	}{
		{name: "defaults applied", given: stages.Options{"topic": "t"}},
		{name: "missing required", given: stages.Options{}, want: map[string]error{"topic": stages.ErrMissingOption}},
		{name: "unknown", given: stages.Options{"topic": "t", "colour": "red"}, want: map[string]error{"colour": stages.ErrUnknownOption}},
		{name: "wrong type", given: stages.Options{"topic": 3}, want: map[string]error{"topic": stages.ErrOptionType}},
		{name: "not in enum", given: stages.Options{"topic": "t", "mode": "c"}, want: map[string]error{"mode": stages.ErrOptionNotInEnum}},
		{name: "all at once", given: stages.Options{"mode": "c", "wait": "1s", "x": 1},
			want: map[string]error{"topic": stages.ErrMissingOption, "mode": stages.ErrOptionNotInEnum, "wait": stages.ErrOptionType, "x": stages.ErrUnknownOption}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, probs := spec.Check(tt.given)
			if len(probs) != len(tt.want) {
				t.Fatalf("problems %v, want %v", probs, tt.want)
			}
			for _, p := range probs {
				if !errors.Is(p, tt.want[p.Option]) {
					t.Errorf("option %s: %v, want %v", p.Option, p, tt.want[p.Option])
				}
			}
			if len(tt.want) == 0 {
				mode, _ := opts.String("mode")
				wait, _ := opts.Duration("wait")
				tags, _ := opts.StringList("tags")
				if mode != "a" || wait != time.Second || len(tags) == 0 || tags[0] != "x" {
					t.Fatalf("defaults not applied: %v", opts)
				}
				tags[0] = "changed"
				if spec.Options[3].Default.([]string)[0] != "x" {
					t.Fatal("a stage can change the spec's default list")
				}
			}
		})
	}
}
