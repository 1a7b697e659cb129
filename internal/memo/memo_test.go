package memo

import (
	"context"
	"testing"
)

func TestCache(t *testing.T) {
	c := From(With(context.Background()))
	if c == nil {
		t.Fatal("With carries no cache")
	}
	value := []byte(`{"a":1}`)
	c.Put(value, "parsed")
	copyOf := append([]byte(nil), value...)
	tests := []struct {
		name  string
		b     []byte
		found bool
	}{
		{"the same bytes", value, true},
		{"a slice of the same bytes, shorter", value[:3], false},
		{"equal content elsewhere", copyOf, false},
		{"empty", value[:0], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, ok := c.Get(tt.b)
			if ok != tt.found || ok && v != "parsed" {
				t.Fatalf("Get = %v, %v; want found %v", v, ok, tt.found)
			}
		})
	}
	var none *Cache = From(context.Background())
	none.Put(value, "x") // a nil cache keeps nothing and does not panic
	if _, ok := none.Get(value); ok {
		t.Fatal("a nil cache found a value")
	}
}

// TestReserve: a reserved cache keeps and finds entries as any other; a
// nil cache reserves nothing.
func TestReserve(t *testing.T) {
	var none *Cache
	none.Reserve(10)
	c := From(With(context.Background()))
	c.Reserve(2)
	a, b := []byte("a"), []byte("b")
	c.Put(a, 1)
	c.Put(b, 2)
	c.Reserve(100) // after a Put: no effect, nothing lost
	if x, ok := c.Get(a); !ok || x != 1 {
		t.Fatalf("a: %v %v", x, ok)
	}
	if x, ok := c.Get(b); !ok || x != 2 {
		t.Fatalf("b: %v %v", x, ok)
	}
}
