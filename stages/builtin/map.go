package builtin

import (
	"context"
	"errors"

	"github.com/fencepost-dev/fencepost/stages"
)

const convertDoc = " The result becomes bytes: a string as is, nil as null, any other value as its JSON encoding."

func init() {
	stages.Register(stages.Spec{
		Name:    "map",
		Summary: "rewrite each record's value, key or headers with expressions",
		Options: []stages.OptionSpec{
			{Name: "value", Type: stages.TypeExpr, Doc: "expression for the new value; absent: the value is kept." + convertDoc},
			{Name: "key", Type: stages.TypeExpr, Doc: "expression for the new key; absent: the key is kept." + convertDoc},
			{Name: "headers", Type: stages.TypeStringMap, Doc: "header name -> expression: sets those headers, replacing " +
				"any of the same name; other headers are kept." + convertDoc},
		},
		New: newMap,
		// Its only effect is the records it returns.
		ExactlyOnce: true,
	})
}

// mapStage rewrites records. Every expression sees the input record.
type mapStage struct {
	t *transform
}

func newMap(opts stages.Options, _ stages.Env) (stages.Stage, error) {
	headers, _ := opts.StringMap("headers") // absent: none
	if !opts.Has("value") && !opts.Has("key") && len(headers) == 0 {
		return nil, &stages.OptionError{Option: "value",
			Err: errors.New("map needs at least one of value, key or headers (a map that changes nothing is a mistake)")}
	}
	t, err := compileTransform(opts)
	if err != nil {
		return nil, err
	}
	return &mapStage{t: t}, nil
}

// Process returns one new record per input record, with the source
// topic, partition, offset and timestamp of its input. A record whose
// expressions fail is reported in a *stages.RecordErrors. Once ctx has
// ended it returns ctx.Err() (checked before each record).
func (m *mapStage) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	e := newEvaluator(ctx, m.t.reads, len(in))
	return eachRecord(ctx, in, func(r *stages.Record, out *stages.Record) (outcome, error) {
		if err := e.load(r); err != nil {
			return failed, stages.Permanent(err)
		}
		o, err := m.t.apply(e, *r)
		if err != nil {
			return failed, stages.Permanent(err)
		}
		*out = o
		return replaced, nil
	})
}

// keyOf evaluates the stage's key expression for one record (a stage
// that groups by it hands this to the pipeline's repartition). A record
// the expression fails for is a permanent failure; a null result is a
// null key.
func (m *mapStage) keyOf(r stages.Record) ([]byte, error) {
	out, err := m.Process(context.Background(), []stages.Record{r})
	var re *stages.RecordErrors
	switch {
	case errors.As(err, &re):
		for _, e := range re.Errs {
			return nil, e
		}
		return nil, err
	case err != nil:
		return nil, err
	case len(out) != 1:
		return nil, stages.Permanent(errors.New("the key expression gave no record"))
	}
	return out[0].Key, nil
}
