package stagetest

import (
	"errors"
	"fmt"
	"sort"
	"strings"

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
	return spec.Build(checked, env)
}

func checkOptions(spec stages.Spec, opts stages.Options) (stages.Options, error) {
	checked, probs := spec.Check(opts)
	var unknown []string
	for _, p := range probs {
		if errors.Is(p, stages.ErrUnknownOption) {
			unknown = append(unknown, p.Option)
		}
	}
	if unknown != nil {
		var names []string
		for _, o := range spec.Options {
			names = append(names, o.Name)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("stage %q has no option %s (its options: %s)", spec.Name,
			strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	if len(probs) > 0 {
		return nil, probs[0]
	}
	return checked, nil
}
