package stagetest_test

import (
	"maps"
	"sync"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// TestCounters: a Counters hands out one counter per event, adds
// concurrent Adds exactly, ignores what is not positive, and reports
// every counter asked for, at 0 when never added to.
func TestCounters(t *testing.T) {
	var c stagetest.Counters
	var counter func(string) stages.Counter = c.Counter // the type of stages.Env.Counter
	late := counter("late")
	counter("unused")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				late.Add(1)
				counter("late").Add(2)
			}
		})
	}
	wg.Wait()
	late.Add(0)
	late.Add(-5)
	if got := c.Get("late"); got != 2400 {
		t.Errorf("late: %d, want 2400", got)
	}
	if got := c.Get("never"); got != 0 {
		t.Errorf("never asked for: %d, want 0", got)
	}
	if got, want := c.All(), map[string]int64{"late": 2400, "unused": 0}; !maps.Equal(got, want) {
		t.Errorf("All: %v, want %v", got, want)
	}
}
