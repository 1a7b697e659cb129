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

// Errors of Spec.Check and of the Options accessors, wrapped in an
// *OptionError naming the option.
var (
	ErrUnknownOption   = errors.New("the stage has no such option")
	ErrMissingOption   = errors.New("required option is missing")
	ErrOptionType      = errors.New("wrong type")
	ErrOptionNotInEnum = errors.New("value is not one of the allowed values")
	// ErrNoValue: the option has no value (it is optional, has no
	// default and was not given). Check Has first.
	ErrNoValue = errors.New("the option has no value")
)

// Options are a stage's checked option values, by option name: what
// Spec.Check returns, and what Spec.New gets. Read them with the typed
// accessors; each fails with an *OptionError (ErrNoValue, or
// ErrOptionType when the value is not of that type: a mismatch between
// the stage's code and its Spec).
type Options map[string]any

// Has reports whether the option has a value (given, or a default).
func (o Options) Has(name string) bool { _, ok := o[name]; return ok }

// String returns a string (or expr) option.
func (o Options) String(name string) (string, error) { return get[string](o, name, TypeString) }

// Int returns an int option.
func (o Options) Int(name string) (int, error) { return get[int](o, name, TypeInt) }

// Bool returns a bool option.
func (o Options) Bool(name string) (bool, error) { return get[bool](o, name, TypeBool) }

// Duration returns a duration option.
func (o Options) Duration(name string) (time.Duration, error) {
	return get[time.Duration](o, name, TypeDuration)
}

// StringList returns a []string option.
func (o Options) StringList(name string) ([]string, error) {
	return get[[]string](o, name, TypeStringList)
}

// StringMap returns a map[string]string option.
func (o Options) StringMap(name string) (map[string]string, error) {
	return get[map[string]string](o, name, TypeStringMap)
}

func get[T any](o Options, name string, t OptionType) (T, error) {
	var zero T
	v, ok := o[name]
	if !ok {
		return zero, &OptionError{Option: name, Err: ErrNoValue}
	}
	x, ok := v.(T)
	if !ok {
		return zero, &OptionError{Option: name, Err: fmt.Errorf("%w: read as %s, but the value is %T (does the Spec give it another type?)", ErrOptionType, t, v)}
	}
	return x, nil
}

// Validate checks the spec itself: a lower-case name of [a-z0-9_], a New
// function, options with names that are unique and not empty, known
// types, and defaults of their option's type (and Enum). Register calls
// it, so a wrong spec fails at start-up, not at first use.
func (s Spec) Validate() error {
	if s.Name == "" || s.New == nil {
		return errors.New("stage spec needs a Name and a New function")
	}
	for _, c := range s.Name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("stage name %q: use lower-case letters, digits and _", s.Name)
		}
	}
	var errs []error
	seen := map[string]bool{}
	for _, o := range s.Options {
		switch {
		case o.Name == "":
			errs = append(errs, fmt.Errorf("stage %q: an option has no name", s.Name))
		case seen[o.Name]:
			errs = append(errs, fmt.Errorf("stage %q: option %q is listed twice", s.Name, o.Name))
		case o.Type.GoType() == nil:
			errs = append(errs, fmt.Errorf("stage %q: option %q has an unknown type %q", s.Name, o.Name, o.Type))
		case o.Default != nil:
			if err := o.check(o.Default); err != nil {
				errs = append(errs, fmt.Errorf("stage %q: the default of option %q: %w", s.Name, o.Name, err))
			}
		}
		seen[o.Name] = true
	}
	return errors.Join(errs...)
}

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
// option's Enum (ErrOptionNotInEnum). The spec itself is checked by
// Validate (at Register).
func (s Spec) Check(given Options) (Options, []*OptionError) {
	var probs []*OptionError
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
