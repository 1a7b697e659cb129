package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/fencepost-dev/fencepost/stages"
)

func init() {
	stages.Register(stages.Spec{
		Name:    "json",
		Summary: "fail records whose value is not valid JSON, holds a number expressions cannot hold, or lacks required fields",
		Options: []stages.OptionSpec{{
			Name: "require",
			Type: stages.TypeStringList,
			Doc: "top-level fields the value must have (then it must be a JSON object); " +
				"a record without one of them fails",
		}},
		New: newJSON,
	})
}

// jsonStage validates values; valid records pass unchanged.
type jsonStage struct {
	require []string
}

func newJSON(opts stages.Options, _ stages.Env) (stages.Stage, error) {
	var req []string
	if opts.Has("require") {
		var err error
		if req, err = opts.StringList("require"); err != nil {
			return nil, err
		}
	}
	for _, f := range req {
		if f == "" {
			return nil, &stages.OptionError{Option: "require", Err: errors.New("empty field name")}
		}
	}
	return &jsonStage{require: append([]string(nil), req...)}, nil
}

// Process returns the valid records, shared with in; invalid ones are
// reported in a *stages.RecordErrors.
func (j *jsonStage) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	return stages.ForEach(in, func(r *stages.Record, emit func(stages.Record)) error {
		if err := j.check(r.Value); err != nil {
			return stages.Permanent(err)
		}
		emit(*r)
		return nil
	})
}

func (j *jsonStage) check(v []byte) error {
	if !json.Valid(v) {
		return invalidJSON(v)
	}
	if _, err := scanNumbers(v); err != nil {
		return err
	}
	if len(j.require) == 0 {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(v, &obj); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("value is a JSON %s, not an object: required fields %s cannot be present", te.Value, strings.Join(j.require, ", "))
		}
		return invalidJSON(v)
	}
	if obj == nil {
		return fmt.Errorf("value is JSON null, not an object: required fields %s are missing", strings.Join(j.require, ", "))
	}
	var missing []string
	for _, f := range j.require {
		if _, ok := obj[f]; !ok {
			missing = append(missing, f)
		}
	}
	if missing != nil {
		return fmt.Errorf("value lacks required field(s) %s", strings.Join(missing, ", "))
	}
	return nil
}

func invalidJSON(v []byte) error {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return fmt.Errorf("value is not valid JSON: %w", err)
	}
	return errors.New("value is not valid JSON")
}
