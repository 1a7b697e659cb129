package process

import (
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
// out carries. A stage that passes every record often returns in itself
// (nothing is without output); stages usually keep offset order, which
// makes this one merge pass; otherwise the offsets of out go through a
// set.
func withoutOutput(in, out []stages.Record) int {
	if len(out) == 0 {
		return len(in)
	}
	if len(in) > 0 && len(out) >= len(in) && &out[0] == &in[0] {
		return 0 // out starts with in's own records
	}
	if sortedByOffset(in) && sortedByOffset(out) {
		n, j := 0, 0
		for i := range in {
			for j < len(out) && out[j].Offset < in[i].Offset {
				j++
			}
			if j == len(out) || out[j].Offset != in[i].Offset {
				n++
			}
		}
		return n
	}
	have := make(map[int64]struct{}, len(out))
	for i := range out {
		have[out[i].Offset] = struct{}{}
	}
	n := 0
	for i := range in {
		if _, ok := have[in[i].Offset]; !ok {
			n++
		}
	}
	return n
}

// sortedByOffset reports whether rs is in offset order (without copying
// a record per comparison, as a comparison function taking values does).
func sortedByOffset(rs []stages.Record) bool {
	for i := 1; i < len(rs); i++ {
		if rs[i].Offset < rs[i-1].Offset {
			return false
		}
	}
	return true
}
