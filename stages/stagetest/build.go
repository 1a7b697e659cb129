package stagetest

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

// Build builds the stage registered as name in stages.Default from opts,
// as a configuration file would: it fails on an option the spec does not
// list, and returns a *stages.OptionError for a missing required option,
// a value of the wrong Go type (see stages.OptionSpec.Default for the
// types) or a string outside the option's Enum. It then applies the
// spec's defaults and calls the spec's New with env. It also checks the
// spec itself (each Default matches its option's Type and Enum), so a
// test of a stage's Build catches spec mistakes.
func Build(name string, opts stages.Options, env stages.Env) (stages.Stage, error) {
	spec, ok := stages.Default.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("no stage %q is registered in stages.Default (is its package imported?)", name)
	}
	checked, err := checkOptions(spec, opts)
	if err != nil {
		return nil, err
	}
	return spec.New(checked, env)
}

func checkOptions(spec stages.Spec, opts stages.Options) (stages.Options, error) {
	known := map[string]stages.OptionSpec{}
	for _, o := range spec.Options {
		if o.Default != nil {
			if err := checkValue(o, o.Default); err != nil {
				return nil, fmt.Errorf("spec of stage %q is wrong: default of option %q: %w", spec.Name, o.Name, err)
			}
		}
		known[o.Name] = o
	}
	var unknown []string
	for name := range opts {
		if _, ok := known[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	if unknown != nil {
		sort.Strings(unknown)
		names := slices.Sorted(maps.Keys(known))
		return nil, fmt.Errorf("stage %q has no option %s (its options: %s)", spec.Name,
			strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	out := stages.Options{}
	for _, o := range spec.Options {
		v, given := opts[o.Name]
		switch {
		case given:
			if err := checkValue(o, v); err != nil {
				return nil, &stages.OptionError{Option: o.Name, Err: err}
			}
		case o.Required:
			return nil, &stages.OptionError{Option: o.Name, Err: fmt.Errorf("required %s option is missing", o.Type)}
		case o.Default == nil:
			continue
		default:
			v = o.Default
		}
		out[o.Name] = clone(v)
	}
	return out, nil
}

// checkValue reports whether v has the Go type of o.Type and, for a
// string with an Enum, one of its values.
func checkValue(o stages.OptionSpec, v any) error {
	var ok bool
	switch o.Type {
	case stages.TypeString, stages.TypeExpr:
		_, ok = v.(string)
	case stages.TypeInt:
		_, ok = v.(int)
	case stages.TypeBool:
		_, ok = v.(bool)
	case stages.TypeDuration:
		_, ok = v.(time.Duration)
	case stages.TypeStringList:
		_, ok = v.([]string)
	case stages.TypeStringMap:
		_, ok = v.(map[string]string)
	default:
		return fmt.Errorf("unknown option type %q", o.Type)
	}
	if !ok {
		return fmt.Errorf("want %s, got %T", o.Type, v)
	}
	if s, isString := v.(string); isString && len(o.Enum) > 0 && !slices.Contains(o.Enum, s) {
		return fmt.Errorf("%q is not one of %s", s, strings.Join(o.Enum, ", "))
	}
	return nil
}

// clone copies list and map values, so a stage never shares them with
// the caller or the spec's defaults.
func clone(v any) any {
	switch x := v.(type) {
	case []string:
		return slices.Clone(x)
	case map[string]string:
		return maps.Clone(x)
	}
	return v
}
