// Package unsafeconv holds every conversion of the module that goes
// around Go's type system: strings and byte slices that share memory,
// scalars boxed into an any without an allocation of their own, and a
// slice kept as a pointer and a 32-bit length. The rest of the module
// calls these functions instead of importing unsafe, so what relies on
// the runtime's memory layout is in one place, tested directly
// (unsafeconv_test.go) and replaceable: built with the purego tag, the
// package is plain Go with the same API and the same results, every
// conversion a copy (purego.go), and `go test -tags purego` runs a
// package's tests without unsafe.
//
// The contracts are those of sharing memory: what is handed in must not
// be written again while what was handed out is in use. Each function
// says which side that is. The purego build copies, so it keeps every
// contract trivially; code that is correct with the default build is
// correct with purego, not the other way round (a caller that writes
// shared bytes passes its tests with purego only).
package unsafeconv
