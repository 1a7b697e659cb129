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
//
// The cache is made for the order a chain sees records in: the stages of
// a call see them in the same order (a stage's input is, most often, the
// previous stage's output: the same records or some of them, in order).
// So the entries are kept in a slice in the order they were stored, and
// a lookup first tries the few entries after the last one found (after
// the last entry it starts over at the first): a stage reading the
// records an earlier stage stored finds each one there, without hashing.
// Bytes whose address lies outside the stored ones' are a miss at once
// (the first stage's lookups, when the values sit in one buffer in order,
// as fetched records do). Anything else (a stage that reorders, a value
// two records share, a lookup far from the last) is found by a binary
// search while the entries' addresses increase in the order they were
// stored, else by a hash index built on first need. Either way a lookup
// finds exactly what was stored for those bytes, in any order; the order
// only makes it cheaper.
package memo

import (
	"context"
	"math"
	"math/bits"
	"sort"
	"unsafe"
)

// Cache holds the derived values of one chain call. It is not safe for
// concurrent use: a chain runs its stages one after another on one
// goroutine, and the cache lives as long as that call.
type Cache struct {
	entries []entry // in the order first stored; one per key
	next    int     // the entry a lookup tries first
	// lo and hi are the least and the greatest address of the entries;
	// increasing says each entry's is greater than the one's before.
	lo, hi     uintptr
	increasing bool
	index      index // of the entries, once a lookup needs it (!increasing)
	// absent is the key the last Get missed, until the next Put: a Put
	// of it appends without looking it up again.
	absent key
}

type key struct {
	p *byte // the bytes' first: keeps their memory referenced
	n int
}

type entry struct {
	key
	v any
}

// window is how many entries from next a lookup tries before it searches:
// a stage after a filter skips the records the filter dropped.
const window = 8

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
	k := key{unsafe.SliceData(b), len(b)}
	i := c.find(k)
	if i < 0 {
		c.absent = k
		return nil, false
	}
	c.next = i + 1
	return c.entries[i].v, true
}

// Reserve makes room for n more entries at once, so a stage that is
// about to store one per record of a batch does not grow the cache step
// by step. It only matters before the first Put.
func (c *Cache) Reserve(n int) {
	if c != nil && c.entries == nil && n > 0 {
		c.entries = make([]entry, 0, n)
	}
}

// Put stores v for b, in place of what was stored for b before, if
// anything. Empty b is not stored.
func (c *Cache) Put(b []byte, v any) {
	if c == nil || len(b) == 0 {
		return
	}
	k := key{unsafe.SliceData(b), len(b)}
	if k != c.absent {
		if i := c.find(k); i >= 0 {
			c.entries[i].v = v
			c.next = i + 1
			return
		}
	}
	c.absent = key{}
	a := uintptr(unsafe.Pointer(k.p))
	if len(c.entries) == 0 {
		c.lo, c.hi, c.increasing = a, a, true
	} else {
		c.increasing = c.increasing && a > c.hi
		c.lo, c.hi = min(c.lo, a), max(c.hi, a)
	}
	c.entries = append(c.entries, entry{k, v})
	c.next = len(c.entries)
}

// find returns the index of k's entry, or -1.
func (c *Cache) find(k key) int {
	if a := uintptr(unsafe.Pointer(k.p)); len(c.entries) == 0 || a < c.lo || a > c.hi {
		return -1
	}
	from := c.next
	if from >= len(c.entries) {
		from = 0 // a new pass over the records
	}
	for i, e := range c.entries[from:min(from+window, len(c.entries))] {
		if e.key == k {
			return from + i
		}
	}
	if c.increasing {
		i := sort.Search(len(c.entries), func(i int) bool {
			return uintptr(unsafe.Pointer(c.entries[i].p)) >= uintptr(unsafe.Pointer(k.p))
		})
		if i < len(c.entries) && c.entries[i].key == k {
			return i
		}
		return -1
	}
	return c.index.find(c.entries, k)
}

// index is an open-addressing hash table of entries' positions, kept up
// to date lazily: it holds entries[:n].
type index struct {
	slots []uint32 // position+1, 0 when free; a power of two long, at most half full
	shift uint     // 64 - log2(len(slots))
	n     int
}

// find returns the position of k in entries, or -1, indexing the entries
// added since the last call first.
func (x *index) find(entries []entry, k key) int {
	for ; x.n < len(entries) && uint64(x.n) < math.MaxUint32-1; x.n++ {
		if 2*(x.n+1) > len(x.slots) {
			x.grow(entries)
		}
		x.insert(entries, x.n)
	}
	if len(x.slots) > 0 {
		mask := len(x.slots) - 1
		for s := x.slot(k); x.slots[s] != 0; s = (s + 1) & mask {
			if i := int(x.slots[s] - 1); entries[i].key == k {
				return i
			}
		}
	}
	for i := x.n; i < len(entries); i++ { // past what 32 bits index: never in practice
		if entries[i].key == k {
			return i
		}
	}
	return -1
}

// grow makes the table room for cap(entries) (reserved for a batch) or
// twice what it had, whichever is more, and indexes entries[:x.n] again.
func (x *index) grow(entries []entry) {
	size := max(64, 2*len(x.slots), 1<<bits.Len(uint(2*cap(entries)-1)))
	x.slots = make([]uint32, size)
	x.shift = uint(64 - bits.TrailingZeros(uint(size)))
	for i := range x.n {
		x.insert(entries, i)
	}
}

func (x *index) insert(entries []entry, i int) {
	mask := len(x.slots) - 1
	s := x.slot(entries[i].key)
	for x.slots[s] != 0 {
		s = (s + 1) & mask
	}
	x.slots[s] = uint32(i + 1)
}

// slot is where k's search starts: a multiplicative hash of its address
// (keys that differ in length only, a value and its prefix, are rare: they
// share a probe sequence).
func (x *index) slot(k key) int {
	return int(uint64(uintptr(unsafe.Pointer(k.p))) * 0x9e3779b97f4a7c15 >> x.shift)
}
