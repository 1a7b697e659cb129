package builtin

import (
	"context"

	"github.com/fencepost-dev/fencepost/stages"
)

// outcome is what a stage made of one input record.
type outcome uint8

const (
	dropped  outcome = iota // no output
	passed                  // the input record itself, unchanged
	replaced                // a new record (written to *out)
	failed                  // an error: no output, the record fails
)

// eachRecord runs fn on every record of in and gathers the outputs: fn
// says for each record whether it passes unchanged, is replaced by the
// record it wrote to out, or is dropped, or returns an error that fails
// the record (reported in a *stages.RecordErrors, the other records'
// output going on). Before each record it checks ctx; once ctx is done
// it returns ctx's error for the whole batch (nothing of it counts as
// finished; the pipeline redelivers it after a restart), however long
// the batch.
//
// It allocates no more than the output needs: when every record passes
// the output is in itself (read-only like in, capped so an append
// cannot write into it); when every record is replaced it is the
// replacements; otherwise one slice of the exact length. The outcome of
// each record is kept only once they start to differ, and which input
// each output came from (stages.RecordErrors.From) only when a record
// fails.
func eachRecord(ctx context.Context, in []stages.Record, fn func(r *stages.Record, out *stages.Record) (outcome, error)) ([]stages.Record, error) {
	done := ctx.Done()
	var (
		first    outcome
		outcomes []outcome // per input record, once they differ
		repl     []stages.Record
		fails    stages.RecordErrors
		out      stages.Record
	)
	for i := range in {
		if ended(done) {
			return nil, ctx.Err()
		}
		o, err := fn(&in[i], &out)
		if err != nil {
			o = failed
			fails.Fail(i, err)
		}
		if o == replaced {
			if repl == nil {
				repl = make([]stages.Record, 0, len(in)-i)
			}
			repl = append(repl, out)
			out = stages.Record{}
		}
		switch {
		case i == 0:
			first = o
		case outcomes != nil:
			outcomes[i] = o
		case o != first:
			outcomes = make([]outcome, len(in))
			for j := range i {
				outcomes[j] = first
			}
			outcomes[i] = o
		}
	}
	if len(in) == 0 {
		return nil, nil
	}
	if outcomes == nil { // every record had the same outcome
		switch first {
		case passed:
			return in[:len(in):len(in)], nil
		case replaced:
			return repl, nil
		case dropped:
			return nil, nil
		}
		return nil, &fails // every record failed
	}
	n, from := 0, []int(nil)
	for _, o := range outcomes {
		if o == passed || o == replaced {
			n++
		}
	}
	res := make([]stages.Record, 0, n)
	if fails.Failed() {
		from = make([]int, 0, n)
	}
	r := 0
	for i, o := range outcomes {
		switch o {
		case passed:
			res = append(res, in[i])
		case replaced:
			res = append(res, repl[r])
			r++
		default:
			continue
		}
		if from != nil {
			from = append(from, i)
		}
	}
	if fails.Failed() {
		fails.Out, fails.From = res, from
		return nil, &fails
	}
	return res, nil
}

// ended reports whether done (a context's Done channel, nil for one that
// never ends) is closed, without blocking.
func ended(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
