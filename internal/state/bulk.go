package state

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/fencepost-dev/fencepost/stages"
)

// A restore gathers the records of several reads (copied: a read's
// records live only until the next read) and applies them together,
// sorted by key with the latest change of each key kept. Up to
// bulkBatchBytes they go in one pebble batch; above, they are written to
// a sorted table that pebble ingests whole. The memtable's skiplist
// costs a restore most of its CPU once it is large (each of a
// changelog's keys, in no order, is searched for from the top); a sorted
// table is written in one pass and merged once by a compaction.
//
// Either way the records and the new checkpoint are applied atomically:
// the checkpoint goes in the same batch or the same table (pebble ingests
// a table in one step, above everything written before).
//
// (Variables, so tests can take both paths with little data.)
var (
	// bulkBytes is how many bytes of keys and values a restore gathers
	// before applying them.
	bulkBytes = 16 << 20
	// bulkBatchBytes is the most a restore applies in a batch rather
	// than a table: a tail restore stays a small write.
	bulkBatchBytes = 4 << 20
)

// bulk is what a restore gathered and has not applied yet.
type bulk struct {
	data   []byte      // keys and values, back to back
	ents   []bulkEntry // in changelog order
	sorted []bulkEntry // sorted's result, reused
}

type bulkEntry struct {
	// head is the key's first 8 bytes, big-endian, zero-padded: most
	// comparisons of a sort end there, without reading data
	head      uint64
	key, val  uint32 // offsets in data
	klen, vln uint32
	del       bool
}

// keyHead is the first 8 bytes of k as a big-endian number (zeros past
// its end): heads compare as the keys' starts do.
func keyHead(k []byte) uint64 {
	var h [8]byte
	copy(h[:], k)
	return binary.BigEndian.Uint64(h[:])
}

// size is the bytes of keys and values gathered.
func (b *bulk) size() int { return len(b.data) }

// add copies recs in.
func (b *bulk) add(recs []stages.Record) {
	for i := range recs {
		r := &recs[i]
		e := bulkEntry{head: keyHead(r.Key), key: uint32(len(b.data)), klen: uint32(len(r.Key)), del: r.Value == nil}
		b.data = append(b.data, r.Key...)
		e.val, e.vln = uint32(len(b.data)), uint32(len(r.Value))
		b.data = append(b.data, r.Value...)
		b.ents = append(b.ents, e)
	}
}

func (b *bulk) keyOf(e bulkEntry) []byte { return b.data[e.key : e.key+e.klen] }
func (b *bulk) valOf(e bulkEntry) []byte { return b.data[e.val : e.val+e.vln] }

// sort returns the entries in key order, the latest change of each key
// only.
func (b *bulk) sort() []bulkEntry {
	ents := append(b.sorted[:0], b.ents...)
	b.sorted = ents
	// (not a stable sort, O(n log² n) moves: entries are unique by key
	// and place in data, which follows the changelog's order)
	slices.SortFunc(ents, func(x, y bulkEntry) int {
		if x.head != y.head {
			return cmp.Compare(x.head, y.head)
		}
		if c := bytes.Compare(b.keyOf(x), b.keyOf(y)); c != 0 {
			return c
		}
		return cmp.Compare(x.key, y.key)
	})
	out := ents[:0]
	for i, e := range ents {
		if i+1 < len(ents) && bytes.Equal(b.keyOf(e), b.keyOf(ents[i+1])) {
			continue // a later change of the key follows
		}
		out = append(out, e)
	}
	return out
}

func (b *bulk) reset() { b.data, b.ents = b.data[:0], b.ents[:0] }

// applyBulk applies what b gathered and the checkpoint next to p, and empties
// b.
func (p *Partition) applyBulk(ctx context.Context, b *bulk, next int64) error {
	ents := b.sort()
	var err error
	if b.size() <= bulkBatchBytes {
		err = p.applyBatch(b, ents, next)
	} else {
		err = p.ingest(ctx, b, ents, next)
	}
	if err != nil {
		return err
	}
	b.reset()
	p.next = next
	return nil
}

func (p *Partition) applyBatch(b *bulk, ents []bulkEntry, next int64) error {
	wb := p.db.NewBatch()
	defer wb.Close()
	var k []byte
	for _, e := range ents {
		k = append(append(k[:0], userPrefix), b.keyOf(e)...)
		var err error
		if e.del {
			err = wb.Delete(k, nil)
		} else {
			err = wb.Set(k, b.valOf(e), nil)
		}
		if err != nil {
			return p.ioError("restoring into", err)
		}
	}
	var cp [8]byte
	putOffset(cp[:], next)
	if err := wb.Set(checkpointKey, cp[:], nil); err != nil {
		return p.ioError("restoring into", err)
	}
	if err := p.db.Apply(wb, pebble.NoSync); err != nil {
		return p.ioError("restoring into", err)
	}
	return nil
}

// ingest writes ents and the checkpoint to a sorted table in the store's
// directory and has pebble ingest it.
func (p *Partition) ingest(ctx context.Context, b *bulk, ents []bulkEntry, next int64) error {
	path := filepath.Join(p.dir, "restore.sst")
	_ = p.fs.Remove(path) // a crash's leftover, never ingested
	f, err := p.fs.Create(path, "")
	if err != nil {
		return p.ioError("restoring into", err)
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), p.opts.MakeWriterOptions(0, p.db.TableFormat()))
	werr := func() error {
		// the checkpoint's key sorts before every user key
		var cp [8]byte
		putOffset(cp[:], next)
		if err := w.Set(checkpointKey, cp[:]); err != nil {
			return err
		}
		var k []byte
		for _, e := range ents {
			k = append(append(k[:0], userPrefix), b.keyOf(e)...)
			var err error
			if e.del {
				err = w.Delete(k)
			} else {
				err = w.Set(k, b.valOf(e))
			}
			if err != nil {
				return err
			}
		}
		return nil
	}()
	if cerr := w.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = p.db.Ingest(ctx, []string{path})
	}
	if werr != nil {
		_ = p.fs.Remove(path)
		return p.ioError("restoring into", werr)
	}
	return nil
}
