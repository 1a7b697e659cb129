package state

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// DefaultWriteBufferBytes is Storage.WriteBufferBytes' default: 16 MiB,
// the size of Kafka Streams' RocksDB write buffers.
const DefaultWriteBufferBytes = 16 << 20

// options are the pebble options of every store.
//
//   - No write-ahead log. Every write that matters carries the store's
//     checkpoint (the changelog offset it reflects) in the same batch, and
//     pebble flushes memtables whole and in order, so what a crash leaves
//     on disk is the store as of some earlier checkpoint: the restore reads
//     the changelog from there. The log would only shorten that restore,
//     at the cost of writing every change twice (Kafka Streams' RocksDB
//     stores run without one too). A close flushes (closeFlushed).
//   - Larger memtables (WriteBufferBytes) and level 0 compacted from 8
//     files (writes stall at 32, not 12): a store written fast flushes
//     fewer, larger files and merges them less often than at pebble's
//     4 MiB and 4 files. (A restore writes sorted tables of its own and
//     bypasses the memtable: bulk.go.)
//   - Bloom filters (10 bits a key) on every level: a point read, the
//     stateful stages' common case, looks into only the files that may
//     hold its key, so more level-0 files cost a read little.
//
// BenchmarkRestore, 1M keys of 92 bytes into an empty store on disk: 4.5
// µs of CPU a record at pebble's defaults with batches into the memtable,
// 0.9 µs with these and sorted tables (the same at write buffers of 4 to
// 32 MiB).
func (s *Storage) options(fs vfs.FS) *pebble.Options {
	o := &pebble.Options{
		FS:                    fs,
		Cache:                 s.Cache,
		Logger:                s.logger(),
		DisableWAL:            true,
		MemTableSize:          uint64(s.writeBufferBytes()),
		L0CompactionThreshold: 8,
		L0StopWritesThreshold: 32,
	}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	// complete now: a restore writes its tables with these (bulk.go)
	o.EnsureDefaults()
	return o
}

func (s *Storage) writeBufferBytes() int64 {
	if s.WriteBufferBytes > 0 {
		return s.WriteBufferBytes
	}
	return DefaultWriteBufferBytes
}
