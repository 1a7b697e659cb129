package state

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestView: a store written and closed opens read-only with what was
// applied (not the changes left unapplied), its identity and checkpoint;
// the stores and partitions on disk are listed; a store held open is
// ErrInUse, one that does not exist ErrNoLocalStore.
func TestView(t *testing.T) {
	dir := t.TempDir()
	st := &Storage{Dir: dir}
	id := Identity{Group: "g", Store: "counts", Changelog: ChangelogTopic("g", "counts"), Partition: 3}
	p, _, err := st.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"a": "1", "ab": "2", "b": "3", "": "empty key"} {
		if err := p.Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Applied(42); err != nil {
		t.Fatal(err)
	}
	_ = p.Put([]byte("unapplied"), []byte("x"))
	if busy, err := InUse(dir, "counts"); err != nil || !slices.Equal(busy, []int32{3}) {
		t.Errorf("InUse while open: %v, %v; want [3]", busy, err)
	}
	if _, err := OpenView(dir, "counts", 3); !errors.Is(err, ErrInUse) {
		t.Errorf("OpenView while open: %v, want ErrInUse", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if busy, err := InUse(dir, "counts"); err != nil || len(busy) != 0 {
		t.Errorf("InUse once closed: %v, %v", busy, err)
	}
	writeEmpty := func(store string, p int32) {
		q, _, err := st.Open(Identity{Group: "g", Store: store, Changelog: ChangelogTopic("g", store), Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		_ = q.Close()
	}
	writeEmpty("other", 0)
	for _, d := range []string{"documents/notes", "plain/0", "empty"} { // not stores: a partition directory is a pebble one
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := LocalStores(dir); err != nil || !slices.Equal(got, []string{"counts", "empty", "other"}) {
		t.Errorf("LocalStores: %v, %v", got, err)
	}
	if err := CheckStoreDir(dir, "documents"); err == nil || !strings.Contains(err.Error(), "holds notes, which is not a partition's store") {
		t.Errorf("CheckStoreDir(documents): %v", err)
	}
	if err := CheckStoreDir(dir, "plain"); err == nil || !strings.Contains(err.Error(), "is not a pebble database") {
		t.Errorf("CheckStoreDir(plain): %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "counts", "notapartition"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckStoreDir(dir, "counts"); err == nil {
		t.Error("CheckStoreDir accepts a store directory holding something else")
	}
	if got, err := LocalPartitions(dir, "counts"); err != nil || !slices.Equal(got, []int32{3}) {
		t.Errorf("LocalPartitions: %v, %v", got, err)
	}
	if got, err := LocalPartitions(dir, "absent"); err != nil || got != nil {
		t.Errorf("LocalPartitions of no store: %v, %v", got, err)
	}

	v, err := OpenView(dir, "counts", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if got, ok := v.Identity(); !ok || got != id {
		t.Errorf("identity %+v %v, want %+v", got, ok, id)
	}
	if next, ok := v.Checkpoint(); !ok || next != 42 {
		t.Errorf("checkpoint %d %v, want 42", next, ok)
	}
	if val, ok, err := v.Get([]byte("ab")); err != nil || !ok || string(val) != "2" {
		t.Errorf("Get(ab) = %q %v %v", val, ok, err)
	}
	if _, ok, err := v.Get([]byte("unapplied")); err != nil || ok {
		t.Errorf("Get(unapplied) = %v %v: a change never applied is not in the store", ok, err)
	}
	var keys []string
	if err := v.Scan([]byte("a"), func(k, _ []byte) error { keys = append(keys, string(k)); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"a", "ab"}) {
		t.Errorf("Scan(a): %q", keys)
	}
	if n, err := v.Count(); err != nil || n != 4 {
		t.Errorf("Count = %d %v, want 4 (the identity and checkpoint are not keys)", n, err)
	}
	if _, err := OpenView(dir, "counts", 4); !errors.Is(err, ErrNoLocalStore) {
		t.Errorf("OpenView of a partition with no store: %v", err)
	}
}

// TestOpenRefusesAStoreInUse: a store another Storage holds open (a
// second processor on the same state.dir) is ErrInUse, at once, and the
// holder's store is left as it was: never wiped under it.
func TestOpenRefusesAStoreInUse(t *testing.T) {
	dir := t.TempDir()
	id := Identity{Group: "g", Store: "counts", Changelog: ChangelogTopic("g", "counts"), Partition: 0}
	p, _, err := (&Storage{Dir: dir}).Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := p.Applied(5); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := (&Storage{Dir: dir}).Open(id)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "one running processor per state.dir") {
			t.Errorf("second Open: %v, want ErrInUse", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second Open did not return")
	}
	if v, ok, err := p.Get([]byte("k")); err != nil || !ok || string(v) != "v" {
		t.Errorf("the holder reads %q %v %v", v, ok, err)
	}
	if _, err := os.Stat(filepath.Join(PartitionDir(dir, "counts", 0), "LOCK")); err != nil {
		t.Errorf("the holder's directory was touched: %v", err)
	}
}
