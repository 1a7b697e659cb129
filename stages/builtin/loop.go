package builtin

import (
	"context"

	"github.com/fencepost-dev/fencepost/stages"
)

// eachRecord is stages.ForEach that stops when ctx ends: before each
// record it checks ctx, and once ctx is done it returns ctx's error for
// the whole batch (nothing of it counts as finished; the pipeline
// redelivers it after a restart), however long the batch.
func eachRecord(ctx context.Context, in []stages.Record, fn func(r *stages.Record, emit func(stages.Record)) error) ([]stages.Record, error) {
	done := ctx.Done()
	var re stages.RecordErrors
	re.Out = make([]stages.Record, 0, len(in))
	cur := 0
	emit := func(r stages.Record) { re.Emit(cur, r) }
	for i := range in {
		if ended(done) {
			return nil, ctx.Err()
		}
		cur = i
		if err := fn(&in[i], emit); err != nil {
			re.Fail(i, err)
		}
	}
	if re.Failed() {
		return nil, &re
	}
	return re.Out, nil
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
