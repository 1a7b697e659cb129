//go:build !purego && (amd64 || arm64)

package fastjson

import (
	"reflect"
	"testing"
)

// TestDocSize: a doc takes 56 bytes with the default build (its spans a
// pointer and a 32-bit count), so slabs of them stay small.
func TestDocSize(t *testing.T) {
	if n := reflect.TypeFor[Doc]().Size(); n != 56 {
		t.Fatalf("a Doc is %d bytes, want 56", n)
	}
}
