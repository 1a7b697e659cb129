package config

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

// contractRegistry registers stand-ins with the option specs the
// built-in stages are specified to have (their expressions are not
// compiled here), so the example configurations are checked against
// that contract before the built-in stages exist on this branch.
// cmd/processor's tests lint the same files with the real stages.
func contractRegistry() *stages.Registry {
	reg := &stages.Registry{}
	pass := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) { return in, nil })
	build := func(stages.Options, stages.Env) (stages.Stage, error) { return pass, nil }
	printOpts := []stages.OptionSpec{
		{Name: "format", Type: stages.TypeString, Default: "text", Enum: []string{"text", "json", "value"}},
		{Name: "every", Type: stages.TypeInt, Default: 1},
	}
	for _, s := range []stages.Spec{
		{Name: "filter", Options: []stages.OptionSpec{{Name: "if", Type: stages.TypeExpr, Required: true}}, New: build},
		{Name: "map", Options: []stages.OptionSpec{
			{Name: "value", Type: stages.TypeExpr}, {Name: "key", Type: stages.TypeExpr}, {Name: "headers", Type: stages.TypeStringMap},
		}, New: func(o stages.Options, _ stages.Env) (stages.Stage, error) {
			if !o.Has("value") && !o.Has("key") && !o.Has("headers") {
				return nil, errors.New("set at least one of value, key, headers")
			}
			return pass, nil
		}},
		{Name: "json", Options: []stages.OptionSpec{{Name: "require", Type: stages.TypeStringList}}, New: build},
		{Name: "produce", Options: []stages.OptionSpec{
			{Name: "topic", Type: stages.TypeString, Required: true}, {Name: "key", Type: stages.TypeExpr},
			{Name: "value", Type: stages.TypeExpr}, {Name: "headers", Type: stages.TypeStringMap},
		}, New: build},
		{Name: "aggregate", Options: []stages.OptionSpec{
			{Name: "key", Type: stages.TypeExpr}, {Name: "repartition", Type: stages.TypeBool, Default: true},
			{Name: "window", Type: stages.TypeStringMap}, {Name: "time", Type: stages.TypeExpr},
			{Name: "fields", Type: stages.TypeStringMap, Required: true},
			{Name: "emit", Type: stages.TypeString, Enum: []string{"on_update", "on_close"}},
			{Name: "late", Type: stages.TypeString, Default: "drop", Enum: []string{"drop", "dead_letter"}},
			{Name: "max_future", Type: stages.TypeDuration, Default: 24 * time.Hour},
			{Name: "store", Type: stages.TypeString, Default: "aggregate"},
		}, New: build},
		{Name: "log", Options: printOpts, New: build},
		{Name: "stdout", Options: printOpts, New: build},
	} {
		if err := reg.Register(s); err != nil {
			panic(err)
		}
	}
	return reg
}

// TestExamplesFollowTheStageContract: every file in configs/ loads
// against the built-in stages' specified options.
func TestExamplesFollowTheStageContract(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("example configurations: %v %v", files, err)
	}
	env := envOf(map[string]string{"KAFKA_PASSWORD": "example"})
	for _, f := range files {
		cfg, err := Loader{Registry: contractRegistry(), LookupEnv: env}.Load(f)
		if err != nil {
			t.Errorf("%s:\n%v", f, err)
			continue
		}
		if len(cfg.Stages) == 0 {
			t.Errorf("%s: no stages", f)
		}
	}
}
