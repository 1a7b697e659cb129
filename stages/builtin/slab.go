package builtin

import "unsafe"

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

// eface is the layout of an any: the dynamic type and a pointer to the
// value (for a string, an int or a float64, a pointer to a copy of it).
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

func typeOf(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

var (
	stringType  = typeOf("")
	intType     = typeOf(0)
	float64Type = typeOf(0.0)
)

// boxer boxes decoded JSON scalars into anys whose values live in slabs:
// the any is exactly what any(x) gives (same dynamic type, same value),
// without an allocation per value. The slab element is never written
// after it is boxed, so the any stays immutable, as every any is.
type boxer struct {
	strs   slab[string]
	ints   slab[int]
	floats slab[float64]
}

func (b *boxer) str(s string) any {
	p := b.strs.next()
	*p = s
	return box(stringType, unsafe.Pointer(p))
}

func (b *boxer) int(i int) any {
	if i >= 0 && i < 256 {
		return i // the runtime boxes small ints without allocating
	}
	p := b.ints.next()
	*p = i
	return box(intType, unsafe.Pointer(p))
}

func (b *boxer) float(f float64) any {
	p := b.floats.next()
	*p = f
	return box(float64Type, unsafe.Pointer(p))
}

func box(typ, data unsafe.Pointer) any {
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = typ, data
	return v
}
