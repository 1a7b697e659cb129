package stagetest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// optsStage is built by the "test_opts" stage: it keeps the options New
// received.
type optsStage struct {
	stages.StageFunc
	opts stages.Options
}

func init() {
	stages.Register(stages.Spec{
		Name:    "test_opts",
		Summary: "keeps its options, for Build's tests",
		Options: []stages.OptionSpec{
			{Name: "mode", Type: stages.TypeString, Default: "fast", Enum: []string{"fast", "safe"}, Doc: "d"},
			{Name: "n", Type: stages.TypeInt, Required: true, Doc: "d"},
			{Name: "on", Type: stages.TypeBool, Default: true, Doc: "d"},
			{Name: "wait", Type: stages.TypeDuration, Default: time.Second, Doc: "d"},
			{Name: "cond", Type: stages.TypeExpr, Doc: "d"},
			{Name: "list", Type: stages.TypeStringList, Default: []string{"a"}, Doc: "d"},
			{Name: "map", Type: stages.TypeStringMap, Doc: "d"},
		},
		New: func(opts stages.Options, _ stages.Env) (stages.Stage, error) {
			return &optsStage{opts: opts}, nil
		},
	})
}

func TestBuildAppliesDefaults(t *testing.T) {
	st, err := stagetest.Build("test_opts", stages.Options{"n": 3, "mode": "safe", "map": map[string]string{"k": "v"}}, stagetest.Env(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	got := st.(*optsStage).opts
	want := stages.Options{"mode": "safe", "n": 3, "on": true, "wait": time.Second, "list": []string{"a"}, "map": map[string]string{"k": "v"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("options %v, want %v", got, want)
	}
	if got.Has("cond") {
		t.Errorf("an absent option without default is set")
	}
	// defaults are copies: a stage changing its list does not change the spec
	list, err := got.StringList("list")
	if err != nil {
		t.Fatal(err)
	}
	list[0] = "changed"
	st2, _ := stagetest.Build("test_opts", stages.Options{"n": 1}, stagetest.Env(nil, nil))
	if l, _ := st2.(*optsStage).opts.StringList("list"); l[0] != "a" {
		t.Errorf("default list shared between builds: %v", l)
	}
	// the accessors say what is wrong instead of returning zero values
	if _, err := got.String("cond"); !errors.Is(err, stages.ErrNoValue) {
		t.Errorf("String of an absent option: %v, want ErrNoValue", err)
	}
	if _, err := got.Int("mode"); !errors.Is(err, stages.ErrOptionType) || !strings.Contains(err.Error(), `option "mode"`) {
		t.Errorf("Int of a string option: %v, want an OptionError with ErrOptionType", err)
	}
	if n, err := got.Int("n"); err != nil || n != 3 {
		t.Errorf("Int(n) = %d, %v; want 3", n, err)
	}
}

// TestRegisterRejectsWrongSpecs: a spec mistake fails at Register (start-up),
// not when a configuration first uses the stage.
func TestRegisterRejectsWrongSpecs(t *testing.T) {
	nop := func(stages.Options, stages.Env) (stages.Stage, error) { return &optsStage{}, nil }
	tests := []struct {
		spec stages.Spec
		msg  string
	}{
		{stages.Spec{Name: "bad_default", New: nop, Options: []stages.OptionSpec{{Name: "n", Type: stages.TypeInt, Default: "1"}}},
			`stage "bad_default": the default of option "n": wrong type: want int, got string`},
		{stages.Spec{Name: "bad_enum", New: nop, Options: []stages.OptionSpec{{Name: "m", Type: stages.TypeString, Default: "x", Enum: []string{"a"}}}},
			`the default of option "m": value is not one of the allowed values`},
		{stages.Spec{Name: "twice", New: nop, Options: []stages.OptionSpec{{Name: "a", Type: stages.TypeInt}, {Name: "a", Type: stages.TypeBool}}},
			`option "a" is listed twice`},
		{stages.Spec{Name: "odd_type", New: nop, Options: []stages.OptionSpec{{Name: "a", Type: "float"}}},
			`option "a" has an unknown type "float"`},
		{stages.Spec{Name: "Upper", New: nop}, `use lower-case letters, digits and _`},
		{stages.Spec{Name: "no_new"}, `needs a Name and a New function`},
	}
	for _, tt := range tests {
		t.Run(tt.spec.Name, func(t *testing.T) {
			err := (&stages.Registry{}).Register(tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Register: %v, want an error containing %q", err, tt.msg)
			}
		})
	}
}

func TestBuildRejects(t *testing.T) {
	tests := []struct {
		name   string
		opts   stages.Options
		option string // "" for an error that is not an *stages.OptionError
		msg    string
	}{
		{"test_opts", stages.Options{}, "n", "required option is missing (int)"},
		{"test_opts", stages.Options{"n": "3"}, "n", "want int, got string"},
		{"test_opts", stages.Options{"n": 1, "wait": 5}, "wait", "want duration, got int"},
		{"test_opts", stages.Options{"n": 1, "list": []any{"a"}}, "list", "want []string"},
		{"test_opts", stages.Options{"n": 1, "mode": "slow"}, "mode", `"slow" is not one of fast, safe`},
		{"test_opts", stages.Options{"n": 1, "colour": "red", "size": 1}, "", "has no option colour, size (its options: cond, list, map, mode, n, on, wait)"},
		{"no_such_stage", stages.Options{}, "", `no stage "no_such_stage" is registered`},
	}
	for _, tc := range tests {
		t.Run(tc.msg, func(t *testing.T) {
			_, err := stagetest.Build(tc.name, tc.opts, stagetest.Env(nil, nil))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want one containing %q", err, tc.msg)
			}
			var oe *stages.OptionError
			if isOpt := errors.As(err, &oe); isOpt != (tc.option != "") || isOpt && oe.Option != tc.option {
				t.Errorf("error %#v: want an OptionError for %q", err, tc.option)
			}
		})
	}
}

func TestProducerAndEnv(t *testing.T) {
	ctx := context.Background()
	if env := stagetest.Env(nil, nil); env.Producer != nil || env.Stdout == nil || env.Log == nil {
		t.Errorf("Env(nil, nil) = %+v: want no Producer, a Stdout and a Log", env)
	}
	var out stagetest.Buffer
	p := &stagetest.Producer{Fail: func(topic string, rs []stages.Record) error {
		if topic == "down" || string(rs[0].Value) == "poison" {
			return errors.New("refused")
		}
		return nil
	}}
	env := stagetest.Env(&out, p)
	fmt.Fprintln(env.Stdout, "hello")
	if got := out.Lines(); len(got) != 1 || got[0] != "hello" {
		t.Errorf("stdout lines %q", got)
	}
	up, _ := env.Producer("up")
	down, _ := env.Producer("down")
	r := []stages.Record{{Value: []byte("v")}}
	if err := up.Produce(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := down.Produce(ctx, r); err == nil {
		t.Errorf("produce to a failing topic succeeded")
	}
	if err := up.Produce(ctx, []stages.Record{{Value: []byte("poison")}}); err == nil {
		t.Errorf("a failing batch succeeded")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := up.Produce(cancelled, r); !errors.Is(err, context.Canceled) {
		t.Errorf("produce with a cancelled ctx: %v", err)
	}
	if got := p.Records("up"); len(got) != 1 || string(got[0].Value) != "v" {
		t.Errorf("acknowledged records %v, want the one that succeeded", got)
	}
	if len(p.Records("down")) != 0 || p.Calls() != 4 {
		t.Errorf("down has %d records, %d calls; want 0 and 4", len(p.Records("down")), p.Calls())
	}
}
