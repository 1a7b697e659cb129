package memo

import (
	"context"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
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

// op is one call on a Cache: a Put of the key's number as value, or a Get
// that must find want (nil: a miss).
type op struct {
	put  bool
	key  int
	want any
}

// keys returns n keys: distinct slices of one buffer, in increasing
// address order when ascending, else in decreasing order.
func keys(n int, ascending bool) [][]byte {
	buf := make([]byte, 8*n)
	out := make([][]byte, n)
	for i := range out {
		j := i
		if !ascending {
			j = n - 1 - i
		}
		out[i] = buf[8*j : 8*j+8 : 8*j+8]
	}
	return out
}

// puts stores key i as i for every i, in order.
func puts(n int) []op {
	ops := make([]op, n)
	for i := range ops {
		ops[i] = op{put: true, key: i}
	}
	return ops
}

// gets looks up the keys in order, each expected to hold its number.
func gets(order ...int) []op {
	ops := make([]op, len(order))
	for i, k := range order {
		ops[i] = op{key: k, want: k}
	}
	return ops
}

func reversed(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = n - 1 - i
	}
	return out
}

func every(n, step int) []int {
	var out []int
	for i := 0; i < n; i += step {
		out = append(out, i)
	}
	return out
}

// TestCacheOrders: whatever the order of Puts and Gets, and whether the
// keys' addresses increase in the order stored (binary search) or not
// (hash index), a Get finds exactly what was stored for its key.
func TestCacheOrders(t *testing.T) {
	const n = 300 // past the index's first table of 64 slots, several times
	cat := func(parts ...[]op) []op {
		var out []op
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name string
		ops  []op
	}{
		{"in order, twice", cat(puts(n), gets(every(n, 1)...), gets(every(n, 1)...))},
		{"a subsequence (after a filter)", cat(puts(n), gets(every(n, 4)...), gets(every(n, 40)...))},
		{"reverse order", cat(puts(n), gets(reversed(n)...))},
		{"repeated lookups", cat(puts(n), gets(7, 7, 7, 299, 299, 0, 0, 150, 150))},
		{"interleaved Put and Get", func() []op {
			var ops []op
			for i := range n {
				ops = append(ops, op{key: i}, op{put: true, key: i}, op{key: i, want: i}, op{key: i / 2, want: i / 2})
			}
			return ops
		}()},
		{"a miss before any Put", cat(gets(), []op{{key: 3}}, puts(n))},
		{"prefixes: same address, other length", func() []op {
			var ops []op
			for i := 0; i < n; i += 2 { // with the prefixes layout, key i+1 is the first half of key i
				ops = append(ops, op{key: i + 1}, op{put: true, key: i + 1}, op{key: i}, op{put: true, key: i})
			}
			return append(ops, gets(reversed(n)...)...)
		}()},
		{"misses among hits", cat(puts(n/2), []op{{key: n / 2}, {key: n - 1}, {key: 0, want: 0}, {key: n/2 - 1, want: n/2 - 1}})},
	}
	for _, tt := range tests {
		for _, layout := range []string{"ascending", "descending", "prefixes"} {
			t.Run(tt.name+"/"+layout, func(t *testing.T) {
				ks := keys(n, layout != "descending")
				if layout == "prefixes" {
					for i := 0; i+1 < n; i += 2 {
						ks[i+1] = ks[i][:4] // same address, other length
					}
				}
				c := From(With(context.Background()))
				for i, o := range tt.ops {
					if o.put {
						c.Put(ks[o.key], o.key)
						continue
					}
					got, ok := c.Get(ks[o.key])
					if o.want == nil && ok || o.want != nil && (!ok || got != o.want) {
						t.Fatalf("op %d: Get(key %d) = %v, %v; want %v", i, o.key, got, ok, o.want)
					}
				}
			})
		}
	}
}

// TestCacheSameBytes: bytes stored twice hold the second value; a prefix
// of stored bytes (same address, shorter), bytes two records share, and
// empty bytes are told apart.
func TestCacheSameBytes(t *testing.T) {
	buf := []byte(`{"a":1}{"b":2}`)
	first, second := buf[:7], buf[7:]
	tests := []struct {
		name string
		run  func(c *Cache) (any, bool)
		want any // nil: a miss
	}{
		{"stored twice: the second value", func(c *Cache) (any, bool) {
			c.Put(first, 1)
			c.Put(second, 2)
			c.Put(first, 3)
			return c.Get(first)
		}, 3},
		{"stored twice after a miss", func(c *Cache) (any, bool) {
			c.Put(first, 1)
			c.Get(second)
			c.Put(first, 3)
			return c.Get(first)
		}, 3},
		{"stored twice, one entry", func(c *Cache) (any, bool) {
			c.Put(first, 1)
			c.Put(first, 2)
			return len(c.entries), true
		}, 1},
		{"a record sharing another's bytes", func(c *Cache) (any, bool) {
			c.Put(first, 1)
			c.Put(second, 2)
			c.Get(second)
			return c.Get(first[:len(first):len(first)])
		}, 1},
		{"a prefix of stored bytes", func(c *Cache) (any, bool) {
			c.Put(first, 1)
			return c.Get(first[:3])
		}, nil},
		{"a prefix stored too", func(c *Cache) (any, bool) {
			c.Put(first, 1)
			c.Put(first[:3], 2)
			c.Get(first[:3])
			return c.Get(first)
		}, 1},
		{"empty bytes are not stored", func(c *Cache) (any, bool) {
			c.Put(first[:0], 1)
			c.Put([]byte{}, 1)
			return c.Get(first[:0])
		}, nil},
		{"nil bytes", func(c *Cache) (any, bool) {
			c.Put(nil, 1)
			return c.Get(nil)
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.run(From(With(context.Background())))
			if tt.want == nil && ok || tt.want != nil && (!ok || got != tt.want) {
				t.Fatalf("got %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
}

// TestCacheProperty: any sequence of Puts and Gets, over keys that share
// addresses (prefixes), lie in one buffer in any order or in buffers of
// their own, gives what a map keyed by address and length gives. A
// failure prints the seed (-rapid.seed=N) that replays it.
func TestCacheProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		buf := make([]byte, 512)
		n := rapid.IntRange(1, 150).Draw(t, "keys")
		ks := make([][]byte, n)
		for i := range ks {
			switch rapid.IntRange(0, 4).Draw(t, "kind") {
			case 0: // the next slot of the buffer: addresses increase
				off := min(4*i, len(buf)-4)
				ks[i] = buf[off : off+4]
			case 1: // the next slot from the buffer's end: addresses decrease
				off := max(len(buf)-4-4*i, 0)
				ks[i] = buf[off : off+4]
			case 2: // few places, any length (prefixes, overlaps, empty)
				off := 4 * rapid.IntRange(0, 7).Draw(t, "offset")
				ks[i] = buf[off : off+rapid.IntRange(0, 8).Draw(t, "length")]
			case 3: // another key's bytes again
				if i == 0 {
					ks[i] = buf[:1]
				} else {
					ks[i] = ks[rapid.IntRange(0, i-1).Draw(t, "same as")]
				}
			default: // bytes of their own
				ks[i] = make([]byte, rapid.IntRange(1, 4).Draw(t, "own length"))
			}
		}
		type mkey struct {
			p *byte
			n int
		}
		model := map[mkey]int{}
		c := From(With(context.Background()))
		if rapid.Bool().Draw(t, "reserve") {
			c.Reserve(n)
		}
		steps := rapid.IntRange(0, 600).Draw(t, "steps")
		cursor := 0 // the in-order walk most Gets follow, as stages do
		for step := range steps {
			k := cursor % n
			if !rapid.Bool().Draw(t, "in order") {
				k = rapid.IntRange(0, n-1).Draw(t, "key")
			}
			cursor = k + rapid.IntRange(1, 3).Draw(t, "stride")
			b := ks[k]
			mk := mkey{n: len(b)}
			if len(b) > 0 {
				mk.p = &b[0]
			}
			if rapid.IntRange(0, 2).Draw(t, "op") == 0 {
				c.Put(b, step)
				if len(b) > 0 {
					model[mk] = step
				}
				continue
			}
			got, ok := c.Get(b)
			want, wantOK := model[mk]
			if ok != wantOK || ok && got != want {
				t.Fatalf("step %d: Get(key %d, %d bytes) = %v, %v; the model holds %v, %v", step, k, len(b), got, ok, want, wantOK)
			}
		}
	})
}

// BenchmarkChainPattern: the lookups of a json -> filter -> map chain
// call over 1000 records (the first stage misses and stores each, the
// second finds each, the third every fourth), for values in one buffer
// in order (as fetched) and for values allocated one by one, in an
// order their addresses do not follow.
func BenchmarkChainPattern(b *testing.B) {
	const n = 1000
	inOrder := keys(n, true)
	scattered := make([][]byte, n)
	for i := range scattered {
		scattered[i] = make([]byte, 200)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { scattered[i], scattered[j] = scattered[j], scattered[i] })
	docs := make([]any, n) // what is stored: boxed beforehand
	for i := range docs {
		docs[i] = &i
	}
	for _, layout := range []struct {
		name string
		ks   [][]byte
	}{{"one_buffer", inOrder}, {"scattered", scattered}} {
		b.Run(layout.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c := From(With(context.Background()))
				c.Reserve(n)
				for i, k := range layout.ks {
					if _, ok := c.Get(k); !ok {
						c.Put(k, docs[i])
					}
				}
				for _, k := range layout.ks {
					c.Get(k)
				}
				for i := 0; i < n; i += 4 {
					c.Get(layout.ks[i])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		})
	}
}
