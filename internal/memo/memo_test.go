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
