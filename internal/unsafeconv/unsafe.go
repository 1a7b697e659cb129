//go:build !purego

package unsafeconv

import "unsafe"

// String returns b's bytes as a string without copying them (an empty
// b is ""). The string shares b's memory: the caller must not write to
// b again while the string, or any string cut from it, is in use.
func String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Bytes returns s's bytes as a slice without copying them (an empty s
// is a nil slice). The slice shares s's memory, which is immutable: the
// caller must never write to it, nor append to it in place (its
// capacity is its length, so an append copies).
func Bytes(s string) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// eface is the runtime's layout of an any: its dynamic type, and a
// pointer to its value (for a string, an int or a float64, to a copy
// the any owns; the value is never written through it).
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

// typeOf is the dynamic type word of v.
func typeOf(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

var (
	stringType  = typeOf("")
	intType     = typeOf(0)
	float64Type = typeOf(0.0)
)

// box is the any of dynamic type typ whose value is at data.
func box(typ, data unsafe.Pointer) any {
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = typ, data
	return v
}

// BoxString returns any(*p), the same dynamic type and value, holding p
// itself instead of a copy of *p: no allocation. The caller hands *p
// over: it must never write to it again (an any's value is immutable),
// and p keeps whatever it points into reachable.
func BoxString(p *string) any { return box(stringType, unsafe.Pointer(p)) }

// BoxInt is BoxString for an int: any(*p), holding p; *p must never be
// written again.
func BoxInt(p *int) any { return box(intType, unsafe.Pointer(p)) }

// BoxFloat64 is BoxString for a float64: any(*p), holding p; *p must
// never be written again.
func BoxFloat64(p *float64) any { return box(float64Type, unsafe.Pointer(p)) }

// Slice32 is a slice kept as the address of its first element and a
// 32-bit length: 12 bytes instead of a slice header's 24, for structs
// kept by the thousand. The zero Slice32 is an empty slice. It keeps its
// elements reachable, as a slice does.
type Slice32[T any] struct {
	p *T
	n uint32
}

// MakeSlice32 returns s as a Slice32, or false if s is longer than a
// uint32 counts (then the Slice32 is empty). The Slice32 shares s's
// elements, as a copy of s would.
func MakeSlice32[T any](s []T) (Slice32[T], bool) {
	if uint64(len(s)) > 1<<32-1 {
		return Slice32[T]{}, false
	}
	return Slice32[T]{unsafe.SliceData(s), uint32(len(s))}, true
}

// Slice returns the slice s was made from, its capacity cut to its
// length (an append copies rather than writing past it).
func (s Slice32[T]) Slice() []T {
	if s.p == nil {
		return nil
	}
	return unsafe.Slice(s.p, s.n)
}
