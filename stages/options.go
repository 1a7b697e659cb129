package stages

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
)

// Errors of Spec.Check, wrapped in an *OptionError naming the option.
var (
	ErrUnknownOption   = errors.New("the stage has no such option")
	ErrMissingOption   = errors.New("required option is missing")
	ErrOptionType      = errors.New("wrong type")
	ErrOptionNotInEnum = errors.New("value is not one of the allowed values")
)

var goTypes = map[OptionType]reflect.Type{
	TypeString:     reflect.TypeFor[string](),
	TypeExpr:       reflect.TypeFor[string](),
	TypeInt:        reflect.TypeFor[int](),
	TypeBool:       reflect.TypeFor[bool](),
	TypeDuration:   reflect.TypeFor[time.Duration](),
	TypeStringList: reflect.TypeFor[[]string](),
	TypeStringMap:  reflect.TypeFor[map[string]string](),
}

// GoType is the Go type an option value of type t has (string for
// TypeExpr); nil for an unknown type.
func (t OptionType) GoType() reflect.Type { return goTypes[t] }

// Check checks given option values against the spec, the way every
// caller of New must: it returns the options with the spec's defaults
// applied (lists and maps copied, so a stage never shares them), and one
// *OptionError per problem, sorted by option name: an option the spec does
// not list (ErrUnknownOption), a required one missing (ErrMissingOption),
// a value of the wrong Go type (ErrOptionType) or a string outside the
// option's Enum (ErrOptionNotInEnum). It also reports a Default that does
// not fit its own option: a mistake in the spec.
func (s Spec) Check(given Options) (Options, []*OptionError) {
	var probs []*OptionError
	for _, o := range s.Options {
		if o.Default != nil {
			if err := o.check(o.Default); err != nil {
				probs = append(probs, &OptionError{Option: o.Name, Err: fmt.Errorf("the spec of stage %q is wrong: its default: %w", s.Name, err)})
			}
		}
	}
	for name := range given {
		if !slices.ContainsFunc(s.Options, func(o OptionSpec) bool { return o.Name == name }) {
			probs = append(probs, &OptionError{Option: name, Err: ErrUnknownOption})
		}
	}
	out := Options{}
	for _, o := range s.Options {
		v, ok := given[o.Name]
		switch {
		case ok:
			if err := o.check(v); err != nil {
				probs = append(probs, &OptionError{Option: o.Name, Err: err})
				continue
			}
		case o.Required:
			probs = append(probs, &OptionError{Option: o.Name, Err: fmt.Errorf("%w (%s)", ErrMissingOption, o.Type)})
			continue
		case o.Default == nil:
			continue
		default:
			v = o.Default
		}
		out[o.Name] = cloneValue(v)
	}
	sort.Slice(probs, func(i, j int) bool { return probs[i].Option < probs[j].Option })
	return out, probs
}

// check reports whether v has the Go type of o.Type and, for a string
// with an Enum, is one of its values.
func (o OptionSpec) check(v any) error {
	t := o.Type.GoType()
	if t == nil {
		return fmt.Errorf("%w: unknown option type %q", ErrOptionType, o.Type)
	}
	if v == nil || reflect.TypeOf(v) != t {
		return fmt.Errorf("%w: want %s, got %T", ErrOptionType, o.Type, v)
	}
	if s, isString := v.(string); isString && len(o.Enum) > 0 && !slices.Contains(o.Enum, s) {
		return fmt.Errorf("%w: %q is not one of %s", ErrOptionNotInEnum, s, strings.Join(o.Enum, ", "))
	}
	return nil
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case []string:
		return slices.Clone(x)
	case map[string]string:
		return maps.Clone(x)
	}
	return v
}
