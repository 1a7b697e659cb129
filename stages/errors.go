package stages

import (
	"fmt"
	"sort"
	"strings"
)

// RecordErrors is the error a stage returns when it knows which input
// records failed: Errs maps an index into the input batch to that record's
// error. The other input records count as finished and Out holds their
// output, which goes on to the next stage.
type RecordErrors struct {
	Errs map[int]error
	Out  []Record
}

func (e *RecordErrors) Error() string {
	idx := make([]int, 0, len(e.Errs))
	for i := range e.Errs {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	var b strings.Builder
	fmt.Fprintf(&b, "%d record(s) failed", len(idx))
	for n, i := range idx {
		if n == 3 {
			fmt.Fprintf(&b, "; and %d more", len(idx)-3)
			break
		}
		fmt.Fprintf(&b, "; record %d: %v", i, e.Errs[i])
	}
	return b.String()
}
