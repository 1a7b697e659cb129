package state

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/fencepost-dev/fencepost/stages"
)

// Keys in pebble: a user key k is stored as userPrefix+k; the store's own
// facts (identity, checkpoint) under metaPrefix, so a Scan never sees them.
const (
	metaPrefix = 'm'
	userPrefix = 'u'
)

var (
	identityKey   = []byte{metaPrefix, 'i'}
	checkpointKey = []byte{metaPrefix, 'c'}
)

// change is a Put (value not nil) or a Delete (value nil) not yet in
// pebble.
type change struct {
	value []byte
}

// Partition is one store's state for one input partition: pebble holds
// what the changelog held at the checkpoint; the changes since are in
// memory until they are applied.
//
// Ownership: the process step's worker running the partition's unit uses
// it (Get, Put, Delete, Scan, then Flush or Stage); under exactly_once the
// commit step applies or drops the staged changes while processing is
// drained (the transaction barrier). mu guards the overlays for the one
// case that barrier does not cover: a stage call that ignores its
// cancellation while an abort drops them.
type Partition struct {
	id Identity
	db *pebble.DB
	// fs, dir and opts are where the store lives and how it was opened,
	// for the sorted tables a restore writes (bulk.go).
	fs   vfs.FS
	dir  string
	opts *pebble.Options

	mu sync.Mutex
	// dirty are the changes of the calls since the last Flush or Stage.
	dirty map[string]change
	// staged are the changes written to the changelog in the open
	// transaction (exactly_once), the latest of each key: read through,
	// applied to pebble when it commits, dropped when it aborts. nil when
	// none.
	staged map[string]change
	// journal holds, while a stage call runs, each key's dirty change
	// from before the call (nil: none), to take the call's changes back
	// if it fails. nil when no call is journaled.
	journal map[string]*change
	// next is the changelog offset pebble reflects: every changelog
	// record below it is applied. -1: none (an empty store).
	next int64
}

// Identity names what a local store holds: a store of a group, for one
// partition of its changelog. A local store of another identity is
// foreign and is wiped before a restore.
type Identity struct {
	Group     string
	Store     string
	Changelog string
	Partition int32
}

func (id Identity) encode() []byte {
	return fmt.Appendf(nil, "v1\x00%s\x00%s\x00%s\x00%d", id.Group, id.Store, id.Changelog, id.Partition)
}

// Next is the changelog offset the store's applied state reflects: the
// next changelog record to restore from (0 for an empty store).
func (p *Partition) Next() int64 { return max(p.next, 0) }

// Get returns a copy of key's value, reading the unapplied changes first.
func (p *Partition) Get(key []byte) ([]byte, bool, error) {
	p.mu.Lock()
	if c, ok := p.lookup(string(key)); ok {
		p.mu.Unlock()
		if c.value == nil {
			return nil, false, nil
		}
		return bytes.Clone(c.value), true, nil
	}
	p.mu.Unlock()
	v, closer, err := p.db.Get(userKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, p.ioError("reading", err)
	}
	out := bytes.Clone(v)
	if out == nil {
		out = []byte{}
	}
	_ = closer.Close()
	return out, true, nil
}

// lookup finds key's latest unapplied change; p.mu is held.
func (p *Partition) lookup(key string) (change, bool) {
	if c, ok := p.dirty[key]; ok {
		return c, true
	}
	c, ok := p.staged[key]
	return c, ok
}

// Put sets key to a copy of value.
func (p *Partition) Put(key, value []byte) error {
	if value == nil {
		return errors.New("state: Put with a nil value (use Delete to remove a key; an empty value is fine)")
	}
	p.mu.Lock()
	p.note(string(key))
	p.dirty[string(key)] = change{value: bytes.Clone(value)}
	p.mu.Unlock()
	return nil
}

// note journals key's dirty change before a write; p.mu is held.
func (p *Partition) note(key string) {
	if p.journal == nil {
		return
	}
	if _, seen := p.journal[key]; seen {
		return
	}
	if c, ok := p.dirty[key]; ok {
		p.journal[key] = &c
	} else {
		p.journal[key] = nil
	}
}

// Begin starts journaling a stage call's writes.
func (p *Partition) Begin() {
	p.mu.Lock()
	p.journal = map[string]*change{}
	p.mu.Unlock()
}

// Rollback takes back the writes since Begin.
func (p *Partition) Rollback() {
	p.mu.Lock()
	for k, prev := range p.journal {
		if prev == nil {
			delete(p.dirty, k)
		} else {
			p.dirty[k] = *prev
		}
	}
	p.journal = nil
	p.mu.Unlock()
}

// Keep keeps the writes since Begin.
func (p *Partition) Keep() {
	p.mu.Lock()
	p.journal = nil
	p.mu.Unlock()
}

// Delete removes key.
func (p *Partition) Delete(key []byte) error {
	p.mu.Lock()
	p.note(string(key))
	p.dirty[string(key)] = change{}
	p.mu.Unlock()
	return nil
}

// Scan calls fn for every key with prefix, in key order, merging the
// unapplied changes over pebble.
func (p *Partition) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return p.ScanFrom(prefix, prefix, fn)
}

// The stages' time indexes rely on the seek (stages.ScanFrom).
var _ stages.FromScanner = (*Partition)(nil)

// ScanFrom is Scan of the keys with prefix from start on. Pebble seeks
// to start: the keys and deletions before it are not read.
func (p *Partition) ScanFrom(prefix, start []byte, fn func(key, value []byte) error) error {
	upper := upperBound(userKey(prefix))
	lower := userKey(prefix)
	if bytes.Compare(start, prefix) > 0 {
		lower = userKey(start)
		if upper != nil && bytes.Compare(lower, upper) >= 0 {
			return nil // start is past every key with prefix
		}
	}
	from := string(lower[1:])
	// the unapplied changes in range, latest per key, sorted
	p.mu.Lock()
	over := map[string]change{}
	for _, m := range []map[string]change{p.staged, p.dirty} {
		for k, c := range m {
			if len(k) >= len(prefix) && k[:len(prefix)] == string(prefix) && k >= from {
				over[k] = c
			}
		}
	}
	p.mu.Unlock()
	keys := make([]string, 0, len(over))
	for k := range over {
		keys = append(keys, k)
	}
	slices.Sort(keys)

	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return p.ioError("scanning", err)
	}
	defer it.Close()
	emit := func(k string) error {
		if v := over[k].value; v != nil {
			return fn([]byte(k), v)
		}
		return nil
	}
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[1:]
		for i < len(keys) && keys[i] < string(k) {
			if err := emit(keys[i]); err != nil {
				return err
			}
			i++
		}
		if i < len(keys) && keys[i] == string(k) {
			if err := emit(keys[i]); err != nil {
				return err
			}
			i++
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return p.ioError("scanning", err)
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return p.ioError("scanning", err)
	}
	for ; i < len(keys); i++ {
		if err := emit(keys[i]); err != nil {
			return err
		}
	}
	return nil
}

// Changes returns the changelog records of the dirty changes (latest per
// key, in key order; a Delete is a tombstone, a nil Value), for the
// changelog partition. nil when nothing changed.
func (p *Partition) Changes() []stages.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.dirty) == 0 {
		return nil
	}
	keys := make([]string, 0, len(p.dirty))
	for k := range p.dirty {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	recs := make([]stages.Record, len(keys))
	for i, k := range keys {
		recs[i] = stages.Record{Topic: p.id.Changelog, Partition: p.id.Partition, Offset: -1, Key: []byte(k), Value: p.dirty[k].value}
	}
	return recs
}

// Applied applies the dirty changes to pebble (at_least_once, once they
// are in the changelog), with next as the new checkpoint when it is known
// (>= 0), in one atomic write.
func (p *Partition) Applied(next int64) error {
	p.mu.Lock()
	dirty := p.dirty
	p.dirty = map[string]change{}
	p.mu.Unlock()
	return p.apply([]map[string]change{dirty}, next)
}

// Stage moves the dirty changes to the staged ones (exactly_once: they
// are in the open transaction now).
func (p *Partition) Stage() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case len(p.dirty) == 0:
	case p.staged == nil:
		p.staged, p.dirty = p.dirty, map[string]change{}
	default:
		// one map for the transaction, the latest change of each key: a
		// read looks once, however many units the transaction holds
		maps.Copy(p.staged, p.dirty)
		p.dirty = map[string]change{}
	}
}

// HasStaged reports whether changes are staged: written to the
// changelog in the open transaction, not applied yet.
func (p *Partition) HasStaged() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.staged) > 0
}

// Commit applies the staged changes to pebble (their transaction
// committed), with next as the new checkpoint when it is known (>= 0).
func (p *Partition) Commit(next int64) error {
	p.mu.Lock()
	staged := p.staged
	p.staged = nil
	p.mu.Unlock()
	return p.apply([]map[string]change{staged}, next)
}

// DiscardDirty drops the changes since the last Flush or Stage: the
// records that made them are processed again.
func (p *Partition) DiscardDirty() {
	p.mu.Lock()
	p.dirty = map[string]change{}
	p.journal = nil
	p.mu.Unlock()
}

// Discard drops every change not applied (their transaction aborted, or
// the records that made them will be processed again).
func (p *Partition) Discard() {
	p.mu.Lock()
	p.staged = nil
	p.dirty = map[string]change{}
	p.mu.Unlock()
}

// apply writes changes (oldest first) and the checkpoint in one batch.
func (p *Partition) apply(changes []map[string]change, next int64) error {
	b := p.db.NewBatch()
	defer b.Close()
	n := 0
	for _, m := range changes {
		for k, c := range m {
			uk := userKey([]byte(k))
			var err error
			if c.value == nil {
				err = b.Delete(uk, nil)
			} else {
				err = b.Set(uk, c.value, nil)
			}
			if err != nil {
				return p.ioError("writing", err)
			}
			n++
		}
	}
	if next >= 0 && next != p.next {
		var cp [8]byte
		putOffset(cp[:], next)
		if err := b.Set(checkpointKey, cp[:], nil); err != nil {
			return p.ioError("writing", err)
		}
	} else if n == 0 {
		return nil
	}
	if err := p.db.Apply(b, pebble.NoSync); err != nil {
		return p.ioError("writing", err)
	}
	if next >= 0 {
		p.next = next
	}
	return nil
}

func (p *Partition) ioError(what string, err error) error {
	return fmt.Errorf("state store %s, partition %d: %s the local store: %w (check the disk under state.dir: space, permissions)",
		p.id.Store, p.id.Partition, what, err)
}

func userKey(k []byte) []byte {
	out := make([]byte, 1+len(k))
	out[0] = userPrefix
	copy(out[1:], k)
	return out
}

// upperBound is the smallest key above every key with prefix b.
func upperBound(b []byte) []byte {
	end := bytes.Clone(b)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
