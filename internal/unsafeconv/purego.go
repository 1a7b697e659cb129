//go:build purego

package unsafeconv

// The purego build: the API of unsafe.go in plain Go. Every conversion
// copies, so no memory is shared and no contract can be broken; it is
// slower and allocates more, never different in what it returns.

// String returns b's bytes as a string (a copy).
func String(b []byte) string { return string(b) }

// Bytes returns s's bytes as a slice (a copy; nil for an empty s), its
// capacity its length.
func Bytes(s string) []byte {
	if len(s) == 0 {
		return nil
	}
	b := []byte(s)
	return b[:len(b):len(b)]
}

// BoxString returns any(*p).
func BoxString(p *string) any { return *p }

// BoxInt returns any(*p).
func BoxInt(p *int) any { return *p }

// BoxFloat64 returns any(*p).
func BoxFloat64(p *float64) any { return *p }

// Slice32 is a slice; see the default build for the compact form.
type Slice32[T any] struct {
	s []T
}

// MakeSlice32 returns s as a Slice32, or false if s is longer than a
// uint32 counts (then the Slice32 is empty).
func MakeSlice32[T any](s []T) (Slice32[T], bool) {
	if uint64(len(s)) > 1<<32-1 {
		return Slice32[T]{}, false
	}
	return Slice32[T]{s[:len(s):len(s)]}, true
}

// Slice returns the slice s was made from, its capacity cut to its
// length.
func (s Slice32[T]) Slice() []T { return s.s }
