package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/fencepost-dev/fencepost/stages"
)

// ErrInUse is the error of opening a local store that a process holds
// open (pebble locks its directory): a running processor, most likely.
var ErrInUse = errors.New("the local store is open in a running process")

// ErrNoLocalStore is the error of opening a local store that does not
// exist.
var ErrNoLocalStore = errors.New("no local store")

// PartitionDir is the directory of store's partition under the state
// directory dir.
func PartitionDir(dir, store string, partition int32) string {
	return (&Storage{Dir: dir}).path(Identity{Store: store, Partition: partition})
}

// LocalStores returns the names of the stores with a directory under the
// state directory dir, sorted; none when dir does not exist. A directory
// counts as a store's only if CheckStoreDir accepts it: a state.dir
// mistyped as a home directory lists none of its folders.
func LocalStores(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && stages.ValidStoreName(e.Name()) == nil && CheckStoreDir(dir, e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// CheckStoreDir returns an error naming what, in store's directory under
// the state directory dir, is not a partition's store: an entry that is
// not a directory named by a partition number holding a pebble database.
// An empty directory passes. Check it before removing the directory.
func CheckStoreDir(dir, store string) error {
	sdir := filepath.Join(dir, store)
	entries, err := os.ReadDir(sdir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p, err := strconv.ParseInt(e.Name(), 10, 32)
		if !e.IsDir() || err != nil || p < 0 || strconv.Itoa(int(p)) != e.Name() {
			return fmt.Errorf("%s holds %s, which is not a partition's store", sdir, e.Name())
		}
		if !isPebble(filepath.Join(sdir, e.Name())) {
			return fmt.Errorf("%s is not a pebble database", filepath.Join(sdir, e.Name()))
		}
	}
	return nil
}

// isPebble says whether dir holds a pebble database (its lock or a
// manifest).
func isPebble(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if n := e.Name(); n == "LOCK" || strings.HasPrefix(n, "MANIFEST-") {
			return true
		}
	}
	return false
}

// LocalPartitions returns the partitions of store with a local store
// under the state directory dir, in order; none when there is none.
func LocalPartitions(dir, store string) ([]int32, error) {
	entries, err := os.ReadDir(filepath.Join(dir, store))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int32
	for _, e := range entries {
		p, err := strconv.ParseInt(e.Name(), 10, 32)
		if e.IsDir() && err == nil && p >= 0 && strconv.Itoa(int(p)) == e.Name() {
			out = append(out, int32(p))
		}
	}
	slices.Sort(out)
	return out, nil
}

// InUse returns the partitions of store under the state directory dir
// whose local store a process holds open. It takes and releases each
// directory's lock, so a processor starting meanwhile may find one
// taken for that instant and fail to open the store.
func InUse(dir, store string) ([]int32, error) {
	parts, err := LocalPartitions(dir, store)
	if err != nil {
		return nil, err
	}
	var busy []int32
	for _, p := range parts {
		pdir := PartitionDir(dir, store, p)
		l, err := pebble.LockDirectory(pdir, vfs.Default)
		switch {
		case err == nil:
			_ = l.Close()
		case isLocked(err):
			busy = append(busy, p)
		case errors.Is(err, fs.ErrNotExist):
		default:
			return nil, fmt.Errorf("%s: %w", pdir, err)
		}
	}
	return busy, nil
}

// isLocked says whether err is pebble's refusal to lock a directory
// another process (or this one) holds.
func isLocked(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// View is one partition's local store opened read-only, for inspection:
// what pebble holds, which is the changelog up to the checkpoint (the
// changes of a running processor not yet applied are not there).
type View struct {
	db   *pebble.DB
	dir  string
	id   Identity
	idOK bool
	next int64
}

// OpenView opens store's partition under the state directory dir
// read-only. It fails with ErrNoLocalStore when there is none, and with
// ErrInUse while a process holds it open.
func OpenView(dir, store string, partition int32) (*View, error) {
	pdir := PartitionDir(dir, store, partition)
	if fi, err := os.Stat(pdir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s: %w", pdir, ErrNoLocalStore)
	}
	db, err := pebble.Open(pdir, &pebble.Options{ReadOnly: true, Logger: pebbleLogger{}})
	switch {
	case err != nil && isLocked(err):
		return nil, fmt.Errorf("%s: %w", pdir, ErrInUse)
	case err != nil:
		return nil, fmt.Errorf("%s: opening the local store read-only: %w", pdir, err)
	}
	v := &View{db: db, dir: pdir, next: -1}
	if b, closer, err := db.Get(identityKey); err == nil {
		v.id, v.idOK = decodeIdentity(b)
		_ = closer.Close()
	}
	if b, closer, err := db.Get(checkpointKey); err == nil {
		if len(b) == 8 {
			v.next = int64(binary.BigEndian.Uint64(b))
		}
		_ = closer.Close()
	}
	return v, nil
}

// Dir is the view's directory.
func (v *View) Dir() string { return v.dir }

// Identity is what the store says it holds (group, store, changelog,
// partition); false if it says nothing readable.
func (v *View) Identity() (Identity, bool) { return v.id, v.idOK }

// Checkpoint is the changelog offset the store reflects (every changelog
// record below it is applied); false for a store with none yet.
func (v *View) Checkpoint() (int64, bool) { return v.next, v.next >= 0 }

// Get returns a copy of key's value and whether it exists.
func (v *View) Get(key []byte) ([]byte, bool, error) {
	b, closer, err := v.db.Get(userKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: reading: %w", v.dir, err)
	}
	out := append([]byte{}, b...)
	_ = closer.Close()
	return out, true, nil
}

// Scan calls fn for every key with prefix, in key order; key and value
// are valid only during fn. An error from fn ends the scan and is
// returned.
func (v *View) Scan(prefix []byte, fn func(key, value []byte) error) error {
	lower := userKey(prefix)
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upperBound(lower)})
	if err != nil {
		return fmt.Errorf("%s: scanning: %w", v.dir, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		val, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("%s: scanning: %w", v.dir, err)
		}
		if err := fn(it.Key()[1:], val); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("%s: scanning: %w", v.dir, err)
	}
	return nil
}

// Count returns the number of keys.
func (v *View) Count() (int64, error) {
	var n int64
	err := v.Scan(nil, func(_, _ []byte) error { n++; return nil })
	return n, err
}

// Close closes the view.
func (v *View) Close() error { return v.db.Close() }

// decodeIdentity is Identity.encode's inverse.
func decodeIdentity(b []byte) (Identity, bool) {
	f := bytes.Split(b, []byte{0})
	if len(f) != 5 || string(f[0]) != "v1" {
		return Identity{}, false
	}
	p, err := strconv.ParseInt(string(f[4]), 10, 32)
	if err != nil {
		return Identity{}, false
	}
	return Identity{Group: string(f[1]), Store: string(f[2]), Changelog: string(f[3]), Partition: int32(p)}, true
}
