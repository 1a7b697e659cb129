package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fencepost-dev/fencepost/internal/fastjson"
	"github.com/fencepost-dev/fencepost/internal/memo"
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
		// Its only effect is which records it returns (or fails).
		ExactlyOnce: true,
	})
}

// jsonStage validates values; valid records pass unchanged.
type jsonStage struct {
	require []string
	fields  *fastjson.FieldSet // of require
}

func newJSON(opts stages.Options, _ stages.Env) (stages.Stage, error) {
	var req []string
	if opts.Has("require") {
		var err error
		if req, err = opts.StringList("require"); err != nil {
			return nil, err
		}
	}
	for i, f := range req {
		if f == "" {
			return nil, &stages.OptionError{Option: "require", Err: errors.New("empty field name")}
		}
		if slices.Contains(req[:i], f) {
			return nil, &stages.OptionError{Option: "require", Err: fmt.Errorf("field %q is listed twice", f)}
		}
	}
	req = append([]string(nil), req...)
	return &jsonStage{require: req, fields: fastjson.NewFieldSet(req)}, nil
}

// Process returns the valid records, shared with in; invalid ones are
// reported in a *stages.RecordErrors. What it learns of each value is
// kept in the chain's memo for the stages after it (see docFor).
// Once ctx has ended it returns ctx.Err() (checked before each record).
func (j *jsonStage) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	cache := memo.From(ctx)
	cache.Reserve(len(in)) // a doc per record
	seen := make([]bool, len(j.require))
	var docs fastjson.Docs
	docs.Reserve(len(in))
	return eachRecord(ctx, in, func(r *stages.Record, _ *stages.Record) (outcome, error) {
		text := fastjson.Text(r.Value)
		if err := j.check(docFor(cache, &docs, text), text, seen); err != nil {
			if len(text) < len(r.Value) {
				err = fmt.Errorf("after its UTF-8 byte order mark, %w", err)
			}
			return failed, stages.Permanent(err)
		}
		return passed, nil
	})
}

// check returns why v, whose doc is d, does not pass; seen is scratch of
// len(j.require).
func (j *jsonStage) check(d *fastjson.Doc, v []byte, seen []bool) error {
	switch {
	case !d.Valid():
		return invalidJSON(v)
	case d.Err() != nil:
		return d.Err()
	case len(j.require) == 0:
		return nil
	case !d.Object() && firstByte(v) == 'n':
		return fmt.Errorf("value is JSON null, not an object: required fields %s are missing", strings.Join(j.require, ", "))
	case !d.Object():
		return fmt.Errorf("value is a JSON %s, not an object: required fields %s cannot be present", kindName(firstByte(v)), strings.Join(j.require, ", "))
	}
	clear(seen)
	d.Present(v, j.fields, seen)
	var missing []string
	for i, f := range j.require {
		if !seen[i] {
			missing = append(missing, f)
		}
	}
	if missing != nil {
		return fmt.Errorf("value lacks required field(s) %s", strings.Join(missing, ", "))
	}
	return nil
}

// firstByte is the first byte of v past white space, 0 if none.
func firstByte(v []byte) byte {
	if v = bytes.TrimLeft(v, " \t\n\r"); len(v) > 0 {
		return v[0]
	}
	return 0
}

// kindName names the JSON value starting with c as encoding/json does.
func kindName(c byte) string {
	switch c {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

// invalidJSON says why v is not JSON; a null value (a tombstone) and an
// empty one are told apart.
func invalidJSON(v []byte) error {
	switch {
	case v == nil:
		return errors.New("value is null (a tombstone), not valid JSON (to drop tombstones before this stage: filter if: value != nil)")
	case len(v) == 0:
		return errors.New("value is empty (not null), not valid JSON")
	}
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return fmt.Errorf("value is not valid JSON: %w", err)
	}
	return errors.New("value is not valid JSON")
}
