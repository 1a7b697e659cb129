package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Storage is where the local stores live: a directory on disk, or memory
// (a pebble on an in-memory file system: the same code, nothing kept
// across a restart of the process).
type Storage struct {
	// Dir is the state directory; ignored in memory.
	Dir string
	// Memory keeps every store in memory.
	Memory bool
	// Cache is pebble's block cache, shared by every store (nil: pebble's
	// own small default per store).
	Cache *pebble.Cache
	// WriteBufferBytes is how large one store partition's memtable grows
	// (pebble's MemTableSize; from 256 KiB, doubling as it fills):
	// writes and restores go to disk in sorted files of about this size.
	// A store partition written fast holds up to twice this (one
	// memtable filling, one being flushed). 0: DefaultWriteBufferBytes.
	WriteBufferBytes int64
	// Log, if set, gets pebble's error messages.
	Log func(msg string)

	memOnce sync.Once
	memfs   vfs.FS
}

// Opened says what an open found locally, for the log.
type Opened struct {
	// Reason is why the local store was not used as it was: "" (used),
	// "empty", "foreign" (another group, store or partition), "corrupt".
	Reason string
	// Detail explains Reason.
	Detail string
}

// path is the directory of one partition's store.
func (s *Storage) path(id Identity) string {
	return filepath.Join(s.Dir, id.Store, strconv.Itoa(int(id.Partition)))
}

func (s *Storage) fs() vfs.FS {
	if s.Memory {
		// partitions open their stores concurrently
		s.memOnce.Do(func() { s.memfs = vfs.NewMem() })
		return s.memfs
	}
	return vfs.Default
}

// Open opens (creating or wiping as needed) the local store of id. The
// store is ready for a restore from its Next offset. A store another
// process (or another Storage of this one) holds open is ErrInUse: one
// running processor per state directory.
func (s *Storage) Open(id Identity) (*Partition, Opened, error) { return s.open(id, true) }

// open is Open; wipe says whether a store pebble cannot open may be
// removed and created again (once: a store that cannot be opened even
// empty is an error).
func (s *Storage) open(id Identity, wipe bool) (*Partition, Opened, error) {
	dir := s.path(id)
	opts := s.options(s.fs())
	db, err := s.openDB(dir, opts)
	switch {
	case err != nil && isLocked(err):
		// another processor's: never wipe it under it
		return nil, Opened{}, fmt.Errorf("state store %s, partition %d: %s: %w (one running processor per state.dir: give each its own)",
			id.Store, id.Partition, dir, ErrInUse)
	case err != nil && (!wipe || !pebble.IsCorruptionError(err)):
		// only a store pebble finds corrupt is rebuilt
		return nil, Opened{}, fmt.Errorf("state store %s, partition %d: the local store in %s cannot be opened: %w (check the disk under state.dir: space, permissions)",
			id.Store, id.Partition, dir, err)
	case err != nil:
		// a store pebble finds corrupt is rebuilt from the changelog
		if werr := s.wipe(dir); werr != nil {
			return nil, Opened{}, fmt.Errorf("state store %s, partition %d: the local store in %s cannot be opened (%v) nor removed: %w",
				id.Store, id.Partition, dir, err, werr)
		}
		p, _, err2 := s.open(id, false)
		return p, Opened{Reason: "corrupt", Detail: err.Error()}, err2
	}
	p := &Partition{id: id, db: db, fs: s.fs(), dir: dir, opts: opts, dirty: map[string]change{}, next: -1}
	got, closer, err := db.Get(identityKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if err := db.Set(identityKey, id.encode(), pebble.NoSync); err != nil {
			_ = db.Close()
			return nil, Opened{}, p.ioError("writing", err)
		}
		return p, Opened{Reason: "empty"}, nil
	case err != nil:
		_ = db.Close()
		return nil, Opened{}, p.ioError("reading", err)
	}
	same := bytes.Equal(got, id.encode())
	detail := string(got)
	_ = closer.Close()
	if !same {
		_ = db.Close()
		if err := s.wipe(dir); err != nil {
			return nil, Opened{}, p.ioError("removing a foreign", err)
		}
		p, _, err := s.open(id, false)
		return p, Opened{Reason: "foreign", Detail: fmt.Sprintf("it held %q", detail)}, err
	}
	cp, closer, err := db.Get(checkpointKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		_ = db.Close()
		return nil, Opened{}, p.ioError("reading", err)
	case len(cp) != 8:
		_ = closer.Close()
		_ = db.Close()
		if err := s.wipe(dir); err != nil {
			return nil, Opened{}, p.ioError("removing a corrupt", err)
		}
		p, _, err := s.open(id, false)
		return p, Opened{Reason: "corrupt", Detail: "its checkpoint is not 8 bytes"}, err
	default:
		p.next = int64(binary.BigEndian.Uint64(cp))
		_ = closer.Close()
	}
	return p, Opened{}, nil
}

func (s *Storage) openDB(dir string, opts *pebble.Options) (*pebble.DB, error) {
	if err := opts.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return pebble.Open(dir, opts)
}

// logger is pebble's logger: its errors go to Log (when set), its
// information messages (every WAL replayed, every compaction) nowhere.
func (s *Storage) logger() pebble.Logger { return pebbleLogger{s.Log} }

type pebbleLogger struct{ log func(msg string) }

func (l pebbleLogger) Infof(string, ...any) {}

func (l pebbleLogger) Errorf(format string, args ...any) {
	if l.log != nil {
		l.log(fmt.Sprintf(format, args...))
	}
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

func (s *Storage) wipe(dir string) error {
	if s.Memory {
		return s.fs().RemoveAll(dir)
	}
	return os.RemoveAll(dir)
}

// Wipe closes p and removes its local files: the next Open starts empty.
func (s *Storage) Wipe(p *Partition) error {
	_ = p.db.Close()
	return s.wipe(s.path(p.id))
}

// Close closes p, keeping its local files (and its applied state): the
// changes not applied are dropped, the applied ones flushed to disk (the
// stores keep no write-ahead log: see options).
func (p *Partition) Close() error {
	p.Discard()
	return closeFlushed(p.db)
}

// closeFlushed flushes db's memtables to disk and closes it: without a
// write-ahead log, what a store has not flushed is gone at a close.
func closeFlushed(db *pebble.DB) error {
	ferr := db.Flush()
	if err := db.Close(); err != nil {
		return err
	}
	return ferr
}
