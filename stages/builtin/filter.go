package builtin

import (
	"context"
	"fmt"

	"github.com/fencepost-dev/fencepost/internal/fastjson"
	"github.com/fencepost-dev/fencepost/stages"
)

func init() {
	stages.Register(stages.Spec{
		Name:    "filter",
		Summary: "keep the records for which an expression is true",
		Options: []stages.OptionSpec{{
			Name:     "if",
			Type:     stages.TypeExpr,
			Required: true,
			Doc: "expression evaluated per record; the record is kept if it is true and dropped if false. " +
				"A result that is not a bool (nil included) fails the record.",
		}},
		New: newFilter,
		// Its only effect is which records it returns.
		ExactlyOnce: true,
	})
}

// filter keeps the records its expression is true for.
type filter struct {
	cond  *program
	reads *reads
}

func newFilter(opts stages.Options, _ stages.Env) (stages.Stage, error) {
	src, err := opts.String("if")
	if err != nil {
		return nil, err
	}
	p, err := compile("if", "if", src, true)
	if err != nil {
		return nil, err
	}
	return &filter{cond: p, reads: readsOf(p)}, nil
}

// Process returns the records the condition holds for, sharing them with
// in. A record whose evaluation fails is reported in a
// *stages.RecordErrors. Once ctx has ended it returns ctx.Err() (checked
// before each record).
func (f *filter) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	e := newEvaluator(ctx, f.reads, len(in))
	return eachRecord(ctx, in, func(r *stages.Record, _ *stages.Record) (outcome, error) {
		if eq := f.cond.equals; eq != nil {
			text := fastjson.Text(r.Value)
			if keep, ok := eq.test(docFor(e.cache, &e.docs, text), text); ok {
				if keep {
					return passed, nil
				}
				return dropped, nil
			}
		}
		if err := e.load(r); err != nil {
			return failed, stages.Permanent(err)
		}
		v, err := e.run(f.cond)
		if err != nil {
			return failed, stages.Permanent(err)
		}
		keep, ok := v.(bool)
		if !ok {
			return failed, stages.Permanent(&EvalError{Expr: f.cond.label,
				Err: fmt.Errorf("result is %s, not a bool (write a comparison, e.g. json?.status == \"ok\")", typeName(v))})
		}
		if keep {
			return passed, nil
		}
		return dropped, nil
	})
}

func typeName(v any) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", v)
}
