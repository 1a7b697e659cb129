package unsafeconv

import (
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// checkBoxed fails t unless got is exactly any(want): the same dynamic
// type, equal by ==, and the same to reflect.
func checkBoxed[T comparable](t *testing.T, got any, want T) {
	t.Helper()
	if reflect.TypeOf(got) != reflect.TypeOf(any(want)) {
		t.Fatalf("boxed %v: dynamic type %v, want %v", want, reflect.TypeOf(got), reflect.TypeOf(any(want)))
	}
	if got != any(want) {
		t.Fatalf("boxed %v: %#v != any(%#v)", want, got, want)
	}
	if v, ok := got.(T); !ok || v != want {
		t.Fatalf("boxed %v: asserted back as %v, %v", want, v, ok)
	}
	if !reflect.DeepEqual(got, any(want)) || !reflect.ValueOf(got).Equal(reflect.ValueOf(want)) {
		t.Fatalf("boxed %v: reflect sees %#v", want, got)
	}
}

// TestBoxes: each Box function gives what any(x) gives, for every kind
// it boxes and values at their edges (a map keyed by them finds them
// too: the same hash as any(x)).
func TestBoxes(t *testing.T) {
	for _, s := range []string{"", "a", "purchase", strings.Repeat("x", 1000), "é\x00\xff"} {
		checkBoxed(t, BoxString(&s), s)
	}
	for _, i := range []int{0, 1, -1, 255, 256, math.MaxInt, math.MinInt} {
		checkBoxed(t, BoxInt(&i), i)
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1.5, -2.25e300, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1)} {
		checkBoxed(t, BoxFloat64(&f), f)
	}
	nan := math.NaN()
	if got := BoxFloat64(&nan); reflect.TypeOf(got) != reflect.TypeOf(0.0) || !math.IsNaN(got.(float64)) {
		t.Fatalf("boxed NaN: %#v", got)
	}
	s, i, f := "k", 300, 2.5
	m := map[any]int{"k": 1, 300: 2, 2.5: 3}
	if m[BoxString(&s)] != 1 || m[BoxInt(&i)] != 2 || m[BoxFloat64(&f)] != 3 {
		t.Fatal("a boxed value is not found as a map key by any(x)")
	}
}

// TestBoxesKeepTheirValues: a boxed value stays what it was after the
// garbage collector ran (the any keeps what it points to reachable),
// boxed one after another from one backing array as a slab hands them
// out.
func TestBoxesKeepTheirValues(t *testing.T) {
	strs := make([]string, 100)
	ints := make([]int, 100)
	var boxed []any
	for k := range strs {
		strs[k] = strings.Repeat("v", k)
		ints[k] = 1000 + k
		boxed = append(boxed, BoxString(&strs[k]), BoxInt(&ints[k]))
	}
	strs, ints = nil, nil
	for range 3 {
		runtime.GC()
	}
	for k := range 100 {
		checkBoxed(t, boxed[2*k], strings.Repeat("v", k))
		checkBoxed(t, boxed[2*k+1], 1000+k)
	}
}

// TestStringBytesRoundTrip: String and Bytes give the bytes they were
// given, and either way back gives the original.
func TestStringBytesRoundTrip(t *testing.T) {
	for _, s := range []string{"", "a", "hello, world", "é\x00\xff", strings.Repeat("ab", 5000)} {
		b := Bytes(s)
		if string(b) != s || len(b) != len(s) || cap(b) != len(s) {
			t.Fatalf("Bytes(%.20q) = %.20q, len %d cap %d", s, b, len(b), cap(b))
		}
		if s == "" && b != nil {
			t.Fatalf("Bytes(\"\") = %#v, want nil", b)
		}
		if got := String(b); got != s {
			t.Fatalf("String(Bytes(%.20q)) = %.20q", s, got)
		}
		in := []byte(s)
		if got := String(in); got != s || !slices.Equal(Bytes(got), in) {
			t.Fatalf("String(%.20q) = %.20q", in, got)
		}
	}
	if String(nil) != "" || String([]byte{}) != "" {
		t.Fatal("String of an empty slice is not \"\"")
	}
}

// TestSlice32: a Slice32 gives back the slice it was made from, its
// capacity cut to its length.
func TestSlice32(t *testing.T) {
	if s := (Slice32[uint16]{}).Slice(); len(s) != 0 {
		t.Fatalf("zero Slice32: %v", s)
	}
	backing := []uint16{1, 2, 3, 4, 5, 6}
	for _, in := range [][]uint16{nil, {}, backing[:0], backing[:1], backing[2:5], backing} {
		s, ok := MakeSlice32(in)
		if !ok {
			t.Fatalf("MakeSlice32(%v) refused", in)
		}
		got := s.Slice()
		if !slices.Equal(got, in) || cap(got) != len(in) {
			t.Fatalf("MakeSlice32(%v).Slice() = %v, cap %d", in, got, cap(got))
		}
		if len(in) > 0 && &got[0] != &in[0] {
			t.Fatalf("MakeSlice32(%v).Slice() does not share its elements", in)
		}
	}
}
