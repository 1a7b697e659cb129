package pipeline

import "github.com/fencepost-dev/fencepost/internal/engine/offsets"

// inFlight is the one request a worker (the resolver, a fetcher, the
// committer) has in flight: the identity of its batch and the slots of
// its entries, in entry order. The zero value is idle.
//
// Only the answer to that batch ends it: a revoke or release never
// forgets a request in flight, so every answer finds its request and the
// worker becomes idle again.
type inFlight struct {
	id    offsets.RequestID
	slots []int
}

// busy reports whether a request is in flight.
func (f *inFlight) busy() bool { return f.id != 0 }

// start records the request of batch id for the given slots (copied).
func (f *inFlight) start(id offsets.RequestID, slots []int) {
	f.id = id
	f.slots = append(f.slots[:0], slots...)
}

// answer ends the request in flight if id names it and it has n entries,
// and returns its slots (valid until the next start). ok is false for an
// answer to anything else, which leaves the request in flight.
func (f *inFlight) answer(id offsets.RequestID, n int) (slots []int, ok bool) {
	if f.id == 0 || f.id != id || len(f.slots) != n {
		return nil, false
	}
	f.id = 0
	return f.slots, true
}
