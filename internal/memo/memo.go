// Package memo lets the stages of one chain share what they derive from a
// record's bytes: the built-in stages parse a value's JSON once, in the
// first stage that reads it, and the later stages of the same chain call
// find it here instead of parsing again.
//
// An entry is keyed by the bytes themselves (their address and length):
// records are read-only and their memory is never reused while referenced
// (see stages.Record), and an entry keeps its bytes referenced, so the
// same address and length mean the same content. A stage that replaces a
// value (map, say) gives the next stages new bytes, which miss the cache:
// nothing stale is ever found.
package memo

import (
	"context"
	"unsafe"
)

// Cache holds the derived values of one chain call. It is not safe for
// concurrent use: a chain runs its stages one after another on one
// goroutine, and the cache lives as long as that call.
type Cache struct {
	entries map[key]entry
}

type key struct {
	p *byte
	n int
}

type entry struct {
	b []byte // keeps the key's memory referenced
	v any
}

type ctxKey struct{}

// With returns ctx carrying a new, empty Cache.
func With(ctx context.Context) context.Context {
	return context.WithValue(ctx, ctxKey{}, &Cache{})
}

// From returns ctx's Cache, or nil if ctx carries none (a stage called
// outside a chain): nil is a valid Cache that finds nothing and keeps
// nothing.
func From(ctx context.Context) *Cache {
	c, _ := ctx.Value(ctxKey{}).(*Cache)
	return c
}

// Get returns the value stored for b, if any.
func (c *Cache) Get(b []byte) (any, bool) {
	if c == nil || len(b) == 0 {
		return nil, false
	}
	e, ok := c.entries[key{unsafe.SliceData(b), len(b)}]
	return e.v, ok
}

// Reserve makes room for n more entries at once, so a stage that is
// about to store one per record of a batch does not grow the cache step
// by step. It only matters before the first Put.
func (c *Cache) Reserve(n int) {
	if c != nil && c.entries == nil && n > 0 {
		c.entries = make(map[key]entry, n)
	}
}

// Put stores v for b. Empty b is not stored.
func (c *Cache) Put(b []byte, v any) {
	if c == nil || len(b) == 0 {
		return
	}
	if c.entries == nil {
		c.entries = make(map[key]entry)
	}
	c.entries[key{unsafe.SliceData(b), len(b)}] = entry{b: b, v: v}
}
