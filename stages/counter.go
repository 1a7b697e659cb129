package stages

import (
	"fmt"
	"regexp"
)

// Counter counts one kind of event of a stage that the pipeline's own
// per-stage metrics do not tell apart: a record dropped as late, as a
// duplicate, for want of a match. Get one from Env.Counter in the
// stage's factory.
//
// Add is safe for concurrent use and costs an atomic add. A Process call
// that fails is made again (its records alone, retried, its store writes
// taken back first), so add a call's counts once it is about to succeed:
// after its last error return. Counts repeat, as the records do, when a
// partition's records are processed again (an aborted transaction, a
// restart after a crash).
type Counter interface {
	// Add adds n to the count; n <= 0 changes nothing.
	Add(n int64)
}

// eventName is what Env.Counter accepts as an event name.
var eventName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// counterFunc returns the Env.Counter a factory called through
// Spec.Build gets: counter (nil: counters that count nowhere), after a
// check of the event name that panics on a bad one.
func counterFunc(counter func(event string) Counter) func(event string) Counter {
	return func(event string) Counter {
		if !eventName.MatchString(event) {
			panic(fmt.Sprintf("stages: Env.Counter(%q): an event name is 1 to 64 of a-z, 0-9 and _, starting with a letter "+
				"(it is a metric label value: fixed by the stage, such as late_records_dropped)", event))
		}
		if counter == nil {
			return nopCounter{}
		}
		if c := counter(event); c != nil {
			return c
		}
		return nopCounter{}
	}
}

type nopCounter struct{}

func (nopCounter) Add(int64) {}
