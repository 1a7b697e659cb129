package builtin

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/stages"
)

// memStore is a stages.Store in a map.
type memStore map[string][]byte

func (m memStore) Get(k []byte) ([]byte, bool, error) {
	v, ok := m[string(k)]
	return bytes.Clone(v), ok, nil
}

func (m memStore) Put(k, v []byte) error { m[string(k)] = bytes.Clone(v); return nil }

func (m memStore) Delete(k []byte) error { delete(m, string(k)); return nil }

func (m memStore) Scan(prefix []byte, fn func(k, v []byte) error) error {
	return m.ScanFrom(prefix, prefix, fn)
}

func (m memStore) ScanFrom(prefix, start []byte, fn func(k, v []byte) error) error {
	var keys []string
	for k := range m {
		if strings.HasPrefix(k, string(prefix)) && k >= string(start) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := fn([]byte(k), m[k]); err != nil {
			return err
		}
	}
	return nil
}

// scanOnly is a store without ScanFrom.
type scanOnly struct{ m memStore }

func (s scanOnly) Get(k []byte) ([]byte, bool, error)              { return s.m.Get(k) }
func (s scanOnly) Put(k, v []byte) error                           { return s.m.Put(k, v) }
func (s scanOnly) Delete(k []byte) error                           { return s.m.Delete(k) }
func (s scanOnly) Scan(p []byte, fn func(k, v []byte) error) error { return s.m.Scan(p, fn) }

// TestTimelineDue drives the time index through sets (new entries and
// new values of entries), stream time moves (with sets while entries
// fall due) and new calls (a timeline loaded afresh from the store),
// with read-ahead batches of 1 to 4 entries, and checks that due hands
// out exactly the entries due, each once, earliest first (by key), with
// their latest values, and that the next due time kept in the meta
// never passes an entry.
func TestTimelineDue(t *testing.T) {
	defer func(n int) { scanBatch = n }(scanBatch)
	rapid.Check(t, func(t *rapid.T) {
		scanBatch = rapid.IntRange(1, 4).Draw(t, "scan batch")
		var st stages.Store = memStore{}
		if rapid.Bool().Draw(t, "without ScanFrom") { // stages.ScanFrom falls back to Scan
			st = scanOnly{memStore{}}
		}
		tl, err := loadTimeline(st, "s", 1)
		if err != nil {
			t.Fatal(err)
		}
		model := map[string]string{} // index key -> value
		stream, known := int64(0), false
		version := 0
		set := func(due int64, rest string) {
			version++
			v := strconv.Itoa(version)
			if err := tl.set(due, []byte(rest), []byte(v)); err != nil {
				t.Fatal(err)
			}
			model[string(tl.indexKey(due, []byte(rest)))] = v
		}
		for range rapid.IntRange(1, 80).Draw(t, "ops") {
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0, 1: // set, usually after stream time; many at one time
				set(stream+rapid.Int64Range(-2, 6).Draw(t, "due in"), rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(t, "rest"))
			case 2, 3: // stream time moves (or not), and what is due comes out
				t0 := stream + rapid.Int64Range(-1, 5).Draw(t, "to")
				tl.advance(t0)
				if !known || t0 > stream {
					stream, known = t0, true
				}
				upTo := stream - rapid.Int64Range(0, 2).Draw(t, "grace")
				var got, want []string
				// what is due comes out in key order, including what is
				// set meanwhile if it is due and after the entry handled
				pop := func() {
					keys := slices.Sorted(maps.Keys(model))
					k := keys[0]
					want = append(want, fmt.Sprintf("%d/%s=%s", getTime([]byte(k[1:9])), k[9:], model[k]))
					delete(model, k)
				}
				err := tl.due(upTo, func(due int64, rest, value []byte) error {
					got = append(got, fmt.Sprintf("%d/%s=%s", due, rest, value))
					pop()
					if len(rest) == 1 && rest[0] < 'c' { // sets a later entry, maybe due already
						set(due+rapid.Int64Range(0, 4).Draw(t, "later"), string(rest)+"+")
					}
					if rapid.Bool().Draw(t, "update") { // a new value for an entry
						keys := slices.Sorted(maps.Keys(model))
						if len(keys) > 0 {
							k := rapid.SampledFrom(keys).Draw(t, "updated")
							set(getTime([]byte(k[1:9])), k[9:])
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				for len(model) > 0 && getTime([]byte(slices.Sorted(maps.Keys(model))[0][1:9])) <= upTo {
					pop()
				}
				if !slices.Equal(got, want) {
					t.Fatalf("due at %d: %v, want %v", upTo, got, want)
				}
			case 4: // the call ends; the next loads the timeline afresh
				if err := tl.save(); err != nil {
					t.Fatal(err)
				}
				if tl, err = loadTimeline(st, "s", 1); err != nil {
					t.Fatal(err)
				}
				if tl.known != known || known && tl.stream != stream {
					t.Fatalf("stream time %v %d after a reload, want %v %d", tl.known, tl.stream, known, stream)
				}
			}
			for k := range model {
				if due := getTime([]byte(k[1:9])); due < tl.next {
					t.Fatalf("next due time %d passes the entry due at %d", tl.next, due)
				}
			}
			stored := map[string]string{}
			_ = st.Scan([]byte{indexPrefix}, func(k, v []byte) error { stored[string(k)] = string(v); return nil })
			if !maps.Equal(stored, model) {
				t.Fatalf("index %q, want %q", stored, model)
			}
		}
	})
}

// TestTimelineMeta: the meta value round-trips; one of another shape or
// version is refused with an error naming the store.
func TestTimelineMeta(t *testing.T) {
	st := memStore{}
	tl, _ := loadTimeline(st, "agg", 7)
	tl.advance(1234)
	_ = tl.set(5000, []byte("k"), []byte{})
	if err := tl.save(); err != nil {
		t.Fatal(err)
	}
	back, err := loadTimeline(st, "agg", 7)
	if err != nil || !back.known || back.stream != 1234 || back.next != 5000 {
		t.Fatalf("loaded %+v, %v", back, err)
	}
	if _, err := loadTimeline(st, "agg", 8); err == nil || !strings.Contains(err.Error(), `store "agg" holds the state of another configuration`) {
		t.Fatalf("another shape: %v", err)
	}
	st[metaKey] = []byte{9, 1, 2}
	if _, err := loadTimeline(st, "agg", 7); err == nil || !strings.Contains(err.Error(), `store "agg"`) {
		t.Fatalf("another version: %v", err)
	}
	empty, _ := loadTimeline(memStore{}, "agg", 7)
	if empty.known || empty.next != math.MaxInt64 {
		t.Fatalf("a new store's timeline: %+v", empty)
	}
}
