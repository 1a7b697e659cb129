package stagetest

import (
	"sync"
	"sync/atomic"

	"github.com/fencepost-dev/fencepost/stages"
)

// Counters keeps the counts a stage adds to its counters
// (stages.Env.Counter), for a test to read: set the Counter of the Env
// the stage is built with to its Counter method. The zero value is
// ready; it is safe for concurrent use.
//
//	var counts stagetest.Counters
//	env := stagetest.Env(nil, nil)
//	env.Counter = counts.Counter
//	st, err := stagetest.Build("aggregate", opts, env)
//	// ... Run records through st ...
//	if n := counts.Get("late_records_dropped"); n != 1 { ... }
type Counters struct {
	mu sync.Mutex
	m  map[string]*atomic.Int64
}

// Counter returns the counter of event, the same one for every call
// with that name; it has the type of stages.Env.Counter. A negative or
// zero Add changes nothing, as in the processor.
func (c *Counters) Counter(event string) stages.Counter {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*atomic.Int64{}
	}
	n, ok := c.m[event]
	if !ok {
		n = new(atomic.Int64)
		c.m[event] = n
	}
	return counter{n}
}

// Get returns the count of event: 0 if nothing was added, or the stage
// never asked for that counter.
func (c *Counters) Get(event string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.m[event]; ok {
		return n.Load()
	}
	return 0
}

// All returns every counter the stage asked for, by event, with its
// count (0 for those never added to).
func (c *Counters) All() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.m))
	for e, n := range c.m {
		out[e] = n.Load()
	}
	return out
}

type counter struct{ n *atomic.Int64 }

func (c counter) Add(n int64) {
	if n > 0 {
		c.n.Add(n)
	}
}
