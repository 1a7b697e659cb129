package stages

import (
	"errors"
	"fmt"
	"time"
)

// What the pipeline makes of a stage's failures. A partition stopped by
// a record reports a *StoppedError (pipeline.PartitionStopped.Err); a
// dead letter's HeaderErrorMessage holds the error of the record's last
// attempt, which may be a *PanicError or a *TimeoutError.

// StoppedError stops a partition: a record failed a stage for good under
// the dead-letter policy stop, or could not be written to the
// dead-letter topic either (Err is then an *UndeliverableError).
//
// Offset is where the partition's commit stops: every source record
// below it finished every stage, and the one at Offset did not. It is
// usually Failed, the source offset of the record that failed; it is
// lower when records before that one had not finished (a stage emitted
// records out of order, or a record whose source is unknown failed).
type StoppedError struct {
	Stage  string
	Offset int64
	Failed int64 // source offset of the record that failed, -1 if a stage did not keep it
	Err    error
}

func (e *StoppedError) Error() string {
	var u *UndeliverableError
	if errors.As(e.Err, &u) {
		return fmt.Sprintf("record at offset %d failed stage %q and could not be written to the dead-letter topic: %v "+
			"(check the dead-letter topic's limits and permissions, then seek past the record or restart)", e.Failed, e.Stage, e.Err)
	}
	return fmt.Sprintf("stage %q rejected the record at offset %d and dead_letter policy is stop: %v "+
		"(fix the stage or the record, then seek past it or restart)", e.Stage, e.Failed, e.Err)
}

func (e *StoppedError) Unwrap() error { return e.Err }

// UndeliverableError is a failed record that the dead-letter topic
// refused for good, both whole and as a truncated dead letter: it cannot
// be written anywhere, so its partition stops.
type UndeliverableError struct {
	Stage   string
	Cause   error // why the stage rejected the record
	Refused error // why the dead-letter topic refused the truncated dead letter
}

func (e *UndeliverableError) Error() string {
	return fmt.Sprintf("stage %q: %v; the dead-letter sink refused it: %v", e.Stage, e.Cause, e.Refused)
}

func (e *UndeliverableError) Unwrap() []error { return []error{e.Cause, e.Refused} }

// TimeoutError is a stage call that did not finish within the pipeline's
// processing timeout.
type TimeoutError struct {
	Stage   string
	Timeout time.Duration
	Records int
	Err     error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("stage %q did not finish %d record(s) within processing_timeout (%v): %v", e.Stage, e.Records, e.Timeout, e.Err)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// PanicError is a stage's panic, turned into the error of the records
// the call held.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("stage panicked: %v", e.Value) }
