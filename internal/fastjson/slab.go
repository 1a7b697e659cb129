package fastjson

import "github.com/fencepost-dev/fencepost/internal/unsafeconv"

// Allocation per record is the cost of the json-reading stages: a doc per
// value, and every field an expression reads boxed into an any (a string
// or a number in an interface is a heap allocation of its own). Both come
// from slabs instead: chunks, taken by one Process call and never
// written again once handed out, so one allocation serves many records.
// A slab's first chunk is small and each next one twice as long, up to
// slabChunk: a small batch does not pay for room it never uses. An
// element keeps its whole chunk reachable; chunks are small, and they
// belong to one chain call's records.

// slabFirst and slabChunk are how many elements a slab allocates at once:
// first, and at most.
const (
	slabFirst = 8
	slabChunk = 128
)

// slab hands out pointers to fresh zero Ts, allocating a chunk at a time.
// The zero slab is ready to use. Not safe for concurrent use.
type slab[T any] struct {
	free []T
	size int // of the last chunk
}

// reserve makes the slab's next chunk n long (at most slabChunk), for a
// caller about to take n, if the slab has nothing left.
func (s *slab[T]) reserve(n int) {
	if len(s.free) == 0 && n > 0 {
		s.size = min(n, slabChunk)
		s.free = make([]T, s.size)
	}
}

// next returns a pointer to a zero T no one else holds.
func (s *slab[T]) next() *T {
	if len(s.free) == 0 {
		s.size = min(max(slabFirst, 2*s.size), slabChunk)
		s.free = make([]T, s.size)
	}
	p := &s.free[0]
	s.free = s.free[1:]
	return p
}

// Boxer boxes decoded JSON scalars (strings, ints, float64s) into anys
// whose values live in its slabs: each any is exactly what any(x) gives
// (the same dynamic type and value), without an allocation per value
// (unsafeconv.BoxString and its kin). A slab element is never written
// after it is boxed, so the any stays immutable, as every any is; it
// keeps its chunk reachable. The zero Boxer is ready to use; it is not
// safe for concurrent use: a stage takes one per Process call.
type Boxer struct {
	strs   slab[string]
	ints   slab[int]
	floats slab[float64]
}

func (b *Boxer) str(s string) any {
	p := b.strs.next()
	*p = s
	return unsafeconv.BoxString(p)
}

func (b *Boxer) int(i int) any {
	if i >= 0 && i < 256 {
		return i // the runtime boxes small ints without allocating
	}
	p := b.ints.next()
	*p = i
	return unsafeconv.BoxInt(p)
}

func (b *Boxer) float(f float64) any {
	p := b.floats.next()
	*p = f
	return unsafeconv.BoxFloat64(p)
}
