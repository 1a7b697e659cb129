package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// GlobalTable is a table every member reads whole: one local store for
// every partition of its topic, each partition with a checkpoint of its
// own (so any key is found, however the topic's writers placed it). It is
// read only, and shared by the units of every partition: reads run
// concurrently with a catch-up, one catch-up at a time.
type GlobalTable struct {
	id         Identity
	db         *pebble.DB
	partitions int32
	// every is how long a catch-up holds: units within it read without
	// asking the broker again.
	every time.Duration

	mu   sync.Mutex // one catch-up at a time; guards next and last
	next []int64
	last time.Time
}

func globalCheckpointKey(p int32) []byte {
	return append([]byte{metaPrefix, 'g'}, strconv.Itoa(int(p))...)
}

// OpenGlobal opens (creating, or wiping a foreign one) the local store of
// a global table of topic id.Changelog with the given partitions.
func (s *Storage) OpenGlobal(id Identity, partitions int32, every time.Duration) (*GlobalTable, Opened, error) {
	id.Partition = -1
	p, opened, err := s.Open(id)
	if err != nil {
		return nil, opened, err
	}
	g := &GlobalTable{id: id, db: p.db, partitions: partitions, every: every, next: make([]int64, partitions)}
	for i := range partitions {
		v, closer, err := g.db.Get(globalCheckpointKey(i))
		switch {
		case errors.Is(err, pebble.ErrNotFound):
		case err != nil:
			_ = g.db.Close()
			return nil, opened, p.ioError("reading", err)
		default:
			if len(v) == 8 {
				g.next[i] = int64(binary.BigEndian.Uint64(v))
			}
			_ = closer.Close()
		}
	}
	return g, opened, nil
}

// CatchUp brings every partition of the table to its topic's last stable
// offset, unless a catch-up ended less than the table's interval ago.
func (g *GlobalTable) CatchUp(ctx context.Context, r Reader) (records int64, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.last.IsZero() && time.Since(g.last) < g.every {
		return 0, nil
	}
	for p := range g.partitions {
		reread := false
		for {
			c, err := r.Read(ctx, g.id.Changelog, p, g.next[p])
			if errors.Is(err, ErrOutOfRange) && !reread {
				reread = true
				// the topic was truncated or recreated: read it again
				// from its start (rows of the old log stay until
				// overwritten; a reset of the table's store clears them)
				c.Next, err = max(c.LogStart, 0), nil
				g.next[p] = c.Next
				continue
			}
			if err != nil {
				return records, fmt.Errorf("table %s: reading %s partition %d at offset %d: %w", g.id.Store, g.id.Changelog, p, g.next[p], err)
			}
			if len(c.Records) > 0 || c.Next > g.next[p] {
				b := g.db.NewBatch()
				for i := range c.Records {
					k := userKey(c.Records[i].Key)
					if c.Records[i].Value == nil {
						err = b.Delete(k, nil)
					} else {
						err = b.Set(k, c.Records[i].Value, nil)
					}
					if err != nil {
						break
					}
				}
				var cp [8]byte
				putOffset(cp[:], c.Next)
				if err == nil {
					err = b.Set(globalCheckpointKey(p), cp[:], nil)
				}
				if err == nil {
					err = g.db.Apply(b, pebble.NoSync)
				}
				_ = b.Close()
				if err != nil {
					return records, fmt.Errorf("table %s: writing the local store: %w (check the disk under state.dir)", g.id.Store, err)
				}
				records += int64(len(c.Records))
				g.next[p] = c.Next
			}
			if g.next[p] >= c.End {
				break
			}
		}
	}
	g.last = time.Now()
	return records, nil
}

// Get returns a copy of key's row.
func (g *GlobalTable) Get(key []byte) ([]byte, bool, error) {
	v, closer, err := g.db.Get(userKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("table %s: reading the local store: %w", g.id.Store, err)
	}
	out := bytes.Clone(v)
	if out == nil {
		out = []byte{}
	}
	_ = closer.Close()
	return out, true, nil
}

// Scan calls fn for every row whose key starts with prefix, in key order.
func (g *GlobalTable) Scan(prefix []byte, fn func(key, value []byte) error) error {
	lower := userKey(prefix)
	it, err := g.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upperBound(lower)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := fn(it.Key()[1:], v); err != nil {
			return err
		}
	}
	return it.Error()
}

// Put fails: a table is written through its topic.
func (g *GlobalTable) Put([]byte, []byte) error {
	return fmt.Errorf("table %s mirrors topic %s: it is read-only (write to the topic)", g.id.Store, g.id.Changelog)
}

// Delete fails: a table is written through its topic.
func (g *GlobalTable) Delete([]byte) error { return g.Put(nil, nil) }

// Close closes the local store, keeping its files.
func (g *GlobalTable) Close() error { return closeFlushed(g.db) }
