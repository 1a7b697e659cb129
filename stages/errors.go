package stages

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// RecordErrors is the error a stage returns when it knows which input
// records failed. The other input records count as finished, and their
// output goes on to the next stage, in input order, with the output of
// failed records that later succeed on retry slotted in where they
// belong.
//
// Errs maps an index of the input batch to that record's error. Out is the
// output of the records that did not fail, and From[j] is the index of the
// input record that produced Out[j] (From is non-decreasing and as long as
// Out). Use Fail and Emit to build it. A RecordErrors whose From does not
// match Out is treated like any other error: every record is run again
// alone.
//
// The store writes (Store) of a call that returns an error, a
// *RecordErrors too, are taken back: the other records' outputs go on,
// their writes do not. A stateful stage fails the whole call instead,
// and its records run again one by one.
type RecordErrors struct {
	Errs map[int]error
	Out  []Record
	From []int
}

// Fail records err as the error of input record i.
func (e *RecordErrors) Fail(i int, err error) {
	if e.Errs == nil {
		e.Errs = map[int]error{}
	}
	e.Errs[i] = err
}

// Emit appends r to the output, as produced by input record i.
func (e *RecordErrors) Emit(i int, r Record) {
	e.Out = append(e.Out, r)
	e.From = append(e.From, i)
}

// Failed reports whether any record failed; a stage returns e only then.
func (e *RecordErrors) Failed() bool { return len(e.Errs) > 0 }

// Consistent reports whether From describes Out (see RecordErrors).
func (e *RecordErrors) Consistent(inputs int) bool {
	if len(e.From) != len(e.Out) {
		return false
	}
	prev := -1
	for _, i := range e.From {
		if i < prev || i >= inputs {
			return false
		}
		if _, failed := e.Errs[i]; failed {
			return false
		}
		prev = i
	}
	return true
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

// permanent marks an error that retrying cannot fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as one that retrying will not fix (invalid input,
// a failed validation): the pipeline sends the record to the dead-letter
// topic (or stops, by policy) without the retries and their backoff.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err (or an error it wraps) was marked with
// Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// unavailable marks the failure of a destination that is down for every
// record.
type unavailable struct{ err error }

func (u unavailable) Error() string { return u.err.Error() }
func (u unavailable) Unwrap() error { return u.err }

// Unavailable marks err as the failure of a destination that no record
// can be written to now, whatever the record: a topic that does not
// exist (or was deleted), no permission to write it, no leader, brokers
// down. It is not the record's fault, so the pipeline neither retries the
// records one by one nor dead-letters them: it holds the partition,
// retries the call with backoff (capped at a few seconds) until it
// succeeds, and reports the wait (/readyz answers 503) meanwhile. The
// Producer the pipeline gives stages (Env.Producer) marks such errors;
// a stage that writes elsewhere should mark its own.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return unavailable{err}
}

// IsUnavailable reports whether err (or an error it wraps) was marked
// with Unavailable.
func IsUnavailable(err error) bool {
	var u unavailable
	return errors.As(err, &u)
}

// ErrNoProducer is returned (wrapped) by a stage factory that needs
// Env.Producer when none is available, as when configurations are linted
// without a cluster.
var ErrNoProducer = errors.New("no producer available")
