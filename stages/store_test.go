package stages_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
)

// mapStore is a Store in a map, without ScanFrom.
type mapStore map[string]string

func (m mapStore) Get(k []byte) ([]byte, bool, error) {
	v, ok := m[string(k)]
	return []byte(v), ok, nil
}
func (m mapStore) Put(k, v []byte) error { m[string(k)] = string(v); return nil }
func (m mapStore) Delete(k []byte) error { delete(m, string(k)); return nil }
func (m mapStore) Scan(prefix []byte, fn func(k, v []byte) error) error {
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if strings.HasPrefix(k, string(prefix)) && !yield(k) {
				return
			}
		}
	}) {
		if err := fn([]byte(k), []byte(m[k])); err != nil {
			return err
		}
	}
	return nil
}

// fromStore is a mapStore with ScanFrom, counting its calls.
type fromStore struct {
	mapStore
	calls int
}

func (f *fromStore) ScanFrom(prefix, start []byte, fn func(k, v []byte) error) error {
	f.calls++
	return f.Scan(prefix, func(k, v []byte) error {
		if bytes.Compare(k, start) < 0 {
			return nil
		}
		return fn(k, v)
	})
}

// TestScanFrom: stages.ScanFrom gives the keys with the prefix from start
// on, through the store's own ScanFrom when it has one, else through
// Scan.
func TestScanFrom(t *testing.T) {
	m := mapStore{"a": "1", "b1": "2", "b2": "3", "b3": "4", "c": "5"}
	for _, tc := range []struct {
		prefix, start string
		want          []string
	}{
		{"b", "b2", []string{"b2", "b3"}},
		{"b", "b", []string{"b1", "b2", "b3"}},
		{"b", "a", []string{"b1", "b2", "b3"}}, // a start below the prefix
		{"b", "c", nil},                        // past it
		{"", "b3", []string{"b3", "c"}},
	} {
		from := &fromStore{mapStore: m}
		for _, st := range []stages.Store{m, from} {
			var got []string
			if err := stages.ScanFrom(st, []byte(tc.prefix), []byte(tc.start), func(k, _ []byte) error { got = append(got, string(k)); return nil }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ScanFrom(%T, %q, %q) = %q, want %q", st, tc.prefix, tc.start, got, tc.want)
			}
		}
		if from.calls != 1 {
			t.Errorf("a FromScanner's ScanFrom was called %d times, want once", from.calls)
		}
	}
}
