package stages_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
)

// countingSpec is a stage whose factory asks env for the counter event
// and adds n to it.
func countingSpec(event string, n int64) stages.Spec {
	return stages.Spec{Name: "counting", Summary: "Counts.", New: func(_ stages.Options, env stages.Env) (stages.Stage, error) {
		env.Counter(event).Add(n)
		return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) { return in, nil }), nil
	}}
}

// fixedCounter counts in total whatever its event.
type fixedCounter struct{ total *int64 }

func (c fixedCounter) Add(n int64) { *c.total += n }

// TestBuildCounter: through Spec.Build a factory's Env.Counter is the
// given one, one that counts nowhere when none is given (or it returns
// nil), and a bad event name panics saying what an event name is.
func TestBuildCounter(t *testing.T) {
	var total int64
	given := func(string) stages.Counter { return fixedCounter{&total} }
	if _, err := countingSpec("late_records_dropped", 3).Build(nil, stages.Env{Counter: given}); err != nil || total != 3 {
		t.Errorf("built with a Counter: err %v, counted %d, want 3", err, total)
	}
	for name, c := range map[string]func(string) stages.Counter{"none": nil, "nil counters": func(string) stages.Counter { return nil }} {
		if _, err := countingSpec("dropped", 1).Build(nil, stages.Env{Counter: c}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, bad := range []string{"", "Late", "1st", "late-records", "late records", strings.Repeat("a", 65)} {
		func() {
			defer func() {
				p, _ := recover().(string)
				if !strings.Contains(p, "an event name is 1 to 64 of a-z, 0-9 and _, starting with a letter") {
					t.Errorf("Counter(%q): panic %q", bad, p)
				}
			}()
			_, _ = countingSpec(bad, 1).Build(nil, stages.Env{Counter: given})
		}()
	}
	if total != 3 {
		t.Errorf("bad event names counted: total %d", total)
	}
}
