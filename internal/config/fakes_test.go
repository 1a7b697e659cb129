package config

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

// testRegistry registers small stand-ins for the built-in stages, with
// the same option shapes and ExactlyOnce flags, so these tests do not
// depend on them.
func testRegistry() *stages.Registry {
	reg := &stages.Registry{}
	pass := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) { return in, nil })
	must := func(s stages.Spec) {
		if err := reg.Register(s); err != nil {
			panic(err)
		}
	}
	must(stages.Spec{
		Name: "filter", Summary: "keep records for which an expression holds", ExactlyOnce: true,
		Options: []stages.OptionSpec{{Name: "if", Type: stages.TypeExpr, Required: true, Doc: "the condition"}},
		New: func(o stages.Options, _ stages.Env) (stages.Stage, error) {
			cond, _ := o.String("if")
			if err := compile(cond); err != nil {
				return nil, &stages.OptionError{Option: "if", Err: err}
			}
			return pass, nil
		},
	})
	must(stages.Spec{
		Name: "map", Summary: "rewrite records", ExactlyOnce: true,
		Options: []stages.OptionSpec{
			{Name: "value", Type: stages.TypeExpr}, {Name: "key", Type: stages.TypeExpr},
			{Name: "headers", Type: stages.TypeStringMap},
		},
		New: func(o stages.Options, _ stages.Env) (stages.Stage, error) {
			if !o.Has("value") && !o.Has("key") && !o.Has("headers") {
				return nil, errors.New("set at least one of value, key, headers")
			}
			for _, name := range []string{"value", "key"} {
				src, _ := o.String(name)
				if err := compile(src); o.Has(name) && err != nil {
					return nil, &stages.OptionError{Option: name, Err: err}
				}
			}
			return pass, nil
		},
	})
	must(stages.Spec{
		Name: "json", Summary: "parse values as JSON", ExactlyOnce: true,
		Options: []stages.OptionSpec{{Name: "require", Type: stages.TypeStringList}},
		New:     func(stages.Options, stages.Env) (stages.Stage, error) { return pass, nil },
	})
	must(stages.Spec{
		Name: "stdout", Summary: "print records",
		Options: []stages.OptionSpec{
			{Name: "format", Type: stages.TypeString, Default: "text", Enum: []string{"text", "json", "value"}},
			{Name: "every", Type: stages.TypeInt, Default: 1},
		},
		New: func(o stages.Options, _ stages.Env) (stages.Stage, error) {
			if every, _ := o.Int("every"); every < 1 {
				return nil, &stages.OptionError{Option: "every", Err: fmt.Errorf("must be at least 1")}
			}
			return pass, nil
		},
	})
	must(stages.Spec{
		Name: "produce", Summary: "write records to a topic", ExactlyOnce: true,
		Options: []stages.OptionSpec{
			{Name: "topic", Type: stages.TypeString, Required: true},
			{Name: "timeout", Type: stages.TypeDuration, Default: 10 * time.Second},
			{Name: "sync", Type: stages.TypeBool, Default: true},
		},
		New: func(o stages.Options, env stages.Env) (stages.Stage, error) {
			if env.Producer != nil {
				topic, _ := o.String("topic")
				if _, err := env.Producer(topic); err != nil {
					return nil, err
				}
			}
			return pass, nil
		},
	})
	must(stages.Spec{
		Name: "counter", Summary: "count records per key in stores", ExactlyOnce: true,
		Options: []stages.OptionSpec{{Name: "stores", Type: stages.TypeStringList, Default: []string{"counts"}}},
		New: func(o stages.Options, _ stages.Env) (stages.Stage, error) {
			names, _ := o.StringList("stores")
			return statefulStage{StageFunc: pass, names: names}, nil
		},
	})
	must(stages.Spec{
		Name: "broken", Summary: "a stage whose factory panics",
		New: func(stages.Options, stages.Env) (stages.Stage, error) { panic("boom") },
	})
	return reg
}

// statefulStage is a stage declaring stores.
type statefulStage struct {
	stages.StageFunc
	names []string
}

func (s statefulStage) Stores() []string { return s.names }

// compile stands in for the expression compiler: parentheses must
// balance and the expression must not be empty.
func compile(expr string) error {
	if strings.TrimSpace(expr) == "" {
		return errors.New("empty expression")
	}
	depth := 0
	for i, c := range expr {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		}
		if depth < 0 {
			return fmt.Errorf("unexpected ) at character %d", i+1)
		}
	}
	if depth != 0 {
		return errors.New("unclosed (")
	}
	return nil
}
