package process

import (
	"cmp"
	"slices"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

// stageRun builds the StageRun of a stage given in that returned out,
// deadLettered of its records sent to the dead-letter sink. A record at
// failedAt (>= 0) stopped the run: it failed for good, and the records
// after it neither finished nor were dropped.
func stageRun(stage string, in, out []stages.Record, failedAt, deadLettered int, d time.Duration) StageRun {
	handled, failed := in, deadLettered
	if failedAt >= 0 {
		handled, failed = in[:failedAt], deadLettered+1
	}
	return StageRun{
		Stage: stage, In: len(in), Out: len(out),
		Dropped: max(withoutOutput(handled, out)-deadLettered, 0),
		Failed:  failed, DeadLettered: deadLettered, Duration: d,
	}
}

// withoutOutput counts the records of in whose source offset no record of
// out carries. Stages usually keep offset order, which makes this one
// merge pass; otherwise the offsets of out go through a set.
func withoutOutput(in, out []stages.Record) int {
	if len(out) == 0 {
		return len(in)
	}
	byOffset := func(a, b stages.Record) int { return cmp.Compare(a.Offset, b.Offset) }
	if slices.IsSortedFunc(in, byOffset) && slices.IsSortedFunc(out, byOffset) {
		n, j := 0, 0
		for _, r := range in {
			for j < len(out) && out[j].Offset < r.Offset {
				j++
			}
			if j == len(out) || out[j].Offset != r.Offset {
				n++
			}
		}
		return n
	}
	have := make(map[int64]struct{}, len(out))
	for _, r := range out {
		have[r.Offset] = struct{}{}
	}
	n := 0
	for _, r := range in {
		if _, ok := have[r.Offset]; !ok {
			n++
		}
	}
	return n
}
