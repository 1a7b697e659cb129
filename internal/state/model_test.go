package state

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/stages"
)

// logRecord is one record of the fake changelog partition.
type logRecord struct {
	key     string
	value   []byte // nil: tombstone
	aborted bool
	open    bool // in the open transaction
}

// fakeLog is a changelog partition read read_committed: records from the
// first one of an open transaction on are above the last stable offset,
// aborted ones are skipped. It returns at most three records a read, to
// make restores take several reads. mu guards recs for a test that ends
// a transaction while a restore reads.
type fakeLog struct {
	mu       sync.Mutex
	recs     []logRecord
	logStart int64
}

func (l *fakeLog) lso() int64 {
	for i, r := range l.recs {
		if r.open {
			return int64(i)
		}
	}
	return int64(len(l.recs))
}

func (l *fakeLog) Read(_ context.Context, topic string, partition int32, offset int64) (Chunk, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := Chunk{End: l.lso(), HighWatermark: int64(len(l.recs)), LogStart: l.logStart, Next: offset}
	if offset < l.logStart || offset > int64(len(l.recs)) {
		return c, ErrOutOfRange
	}
	for c.Next < c.End && len(c.Records) < 3 {
		r := l.recs[c.Next]
		if !r.aborted {
			c.Records = append(c.Records, stages.Record{Topic: topic, Partition: partition, Offset: c.Next, Key: []byte(r.key), Value: r.value})
		}
		c.Next++
	}
	return c, nil
}

// fold is what a store restored from the committed records holds.
func (l *fakeLog) fold() map[string]string {
	m := map[string]string{}
	for _, r := range l.recs[:l.lso()] {
		switch {
		case r.aborted:
		case r.value == nil:
			delete(m, r.key)
		default:
			m[r.key] = string(r.value)
		}
	}
	return m
}

func contents(t *rapid.T, p *Partition) map[string]string {
	m := map[string]string{}
	if err := p.Scan(nil, func(k, v []byte) error { m[string(k)] = string(v); return nil }); err != nil {
		t.Fatalf("scan: %v", err)
	}
	return m
}

// TestPartitionModel runs random writes, reads, scans, changelog writes at
// both guarantees, transaction commits and aborts, and crashes followed by
// a restore, against a model: reads see the latest write; after a crash
// and restore the store equals the fold of the committed changelog, and
// never holds a change whose transaction did not commit.
func TestPartitionModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		st := &Storage{Memory: true}
		id := Identity{Group: "g", Store: "counts", Changelog: "g-counts-changelog", Partition: 3}
		p, _, err := st.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Close() }()
		log := &fakeLog{}
		view := map[string]string{} // what reads must see
		keys := rapid.SampledFrom([]string{"a", "ab", "abc", "b", "ba", "c", ""})
		inTxn := false
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); op {
			case 9: // a stage call's writes, kept or taken back
				before := maps.Clone(view)
				p.Begin()
				for range rapid.IntRange(0, 3).Draw(t, "writes") {
					k := keys.Draw(t, "key")
					if rapid.Bool().Draw(t, "put") {
						_ = p.Put([]byte(k), []byte("j"))
						view[k] = "j"
					} else {
						_ = p.Delete([]byte(k))
						delete(view, k)
					}
				}
				if rapid.Bool().Draw(t, "fails") {
					p.Rollback()
					view = before
				} else {
					p.Keep()
				}
			case 0, 1:
				k, v := keys.Draw(t, "key"), rapid.StringN(0, 4, -1).Draw(t, "value")
				if err := p.Put([]byte(k), []byte(v)); err != nil {
					t.Fatal(err)
				}
				view[k] = v
			case 2:
				k := keys.Draw(t, "key")
				_ = p.Delete([]byte(k))
				delete(view, k)
			case 3:
				k := keys.Draw(t, "key")
				v, ok, err := p.Get([]byte(k))
				want, wok := view[k]
				if err != nil || ok != wok || string(v) != want {
					t.Fatalf("Get(%q) = %q, %v, %v; want %q, %v", k, v, ok, err, want, wok)
				}
			case 4:
				prefix := keys.Draw(t, "prefix")
				start := prefix
				if rapid.Bool().Draw(t, "from") { // ScanFrom: any start, below or past the prefix too
					start = keys.Draw(t, "start")
				}
				var got []string
				if err := p.ScanFrom([]byte(prefix), []byte(start), func(k, v []byte) error { got = append(got, string(k)+"="+string(v)); return nil }); err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, k := range slices.Sorted(maps.Keys(view)) {
					if strings.HasPrefix(k, prefix) && k >= start {
						want = append(want, k+"="+view[k])
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("ScanFrom(%q, %q) = %q, want %q", prefix, start, got, want)
				}
			case 5: // at_least_once: write the changes, then apply them
				if inTxn {
					continue
				}
				for _, r := range p.Changes() {
					log.recs = append(log.recs, logRecord{key: string(r.Key), value: r.Value})
				}
				if err := p.Applied(int64(len(log.recs))); err != nil {
					t.Fatal(err)
				}
			case 6: // exactly_once: write the changes into the open transaction
				for _, r := range p.Changes() {
					log.recs = append(log.recs, logRecord{key: string(r.Key), value: r.Value, open: true})
				}
				p.Stage()
				inTxn = true
			case 7: // the transaction ends: it commits or aborts
				commit := rapid.Bool().Draw(t, "commit")
				for i := range log.recs {
					if log.recs[i].open {
						log.recs[i].open, log.recs[i].aborted = false, !commit
					}
				}
				inTxn = false
				if commit {
					if err := p.Commit(int64(len(log.recs))); err != nil {
						t.Fatal(err)
					}
				} else {
					// an abort re-processes from the committed offsets:
					// what was not committed is gone
					p.Discard()
					view = log.fold()
				}
			case 8: // crash: what was not applied is lost; the broker aborts the open transaction
				for i := range log.recs {
					if log.recs[i].open {
						log.recs[i].open, log.recs[i].aborted = false, true
					}
				}
				inTxn = false
				if rapid.Bool().Draw(t, "loseLocalFiles") {
					if err := st.Wipe(p); err != nil {
						t.Fatal(err)
					}
				} else if err := p.Close(); err != nil {
					t.Fatal(err)
				}
				if p, _, err = st.Open(id); err != nil {
					t.Fatal(err)
				}
				if p, _, err = Restore(context.Background(), st, p, log, true, nil); err != nil {
					t.Fatal(err)
				}
				view = log.fold()
				if got := contents(t, p); !maps.Equal(got, view) {
					t.Fatalf("after a crash and restore the store holds %v; the committed changelog folds to %v", got, view)
				}
				if p.Next() != log.lso() {
					t.Fatalf("restored to %d, want the last stable offset %d", p.Next(), log.lso())
				}
			}
		}
	})
}

// TestRestoreSettles: a transaction left open on the changelog (its
// owner died in it) with changes another owner committed after it. A
// table's catch-up stops at the last stable offset; a store's restore
// (settle) waits for the open transaction to end and then has the later
// owner's changes, not the state from before the open transaction.
func TestRestoreSettles(t *testing.T) {
	st := &Storage{Memory: true}
	id := Identity{Group: "g", Store: "counts", Changelog: "g-counts-changelog", Partition: 0}
	log := &fakeLog{recs: []logRecord{
		{key: "a", value: []byte("1")},             // committed
		{key: "a", value: []byte("9"), open: true}, // the dead owner's, open
		{key: "a", value: []byte("2")},             // the next owner's, committed after it
		{key: "b", value: []byte("1")},
	}}
	restore := func(settle bool) (map[string]string, Restored) {
		p, _, err := st.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = st.Wipe(p) }()
		p, res, err := Restore(context.Background(), st, p, log, settle, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		if err := p.Scan(nil, func(k, v []byte) error { m[string(k)] = string(v); return nil }); err != nil {
			t.Fatal(err)
		}
		return m, res
	}
	if got, _ := restore(false); !maps.Equal(got, map[string]string{"a": "1"}) {
		t.Errorf("without settling: %v, want the state before the open transaction", got)
	}
	done := make(chan map[string]string, 1)
	var res Restored
	go func() {
		m, r := restore(true)
		res = r
		done <- m
	}()
	select {
	case got := <-done:
		t.Fatalf("the restore ended with %v while a transaction below the high watermark was open", got)
	case <-time.After(200 * time.Millisecond):
	}
	log.mu.Lock()
	log.recs[1].open, log.recs[1].aborted = false, true // the broker aborts it
	log.mu.Unlock()
	select {
	case got := <-done:
		if want := map[string]string{"a": "2", "b": "1"}; !maps.Equal(got, want) || res.Waited < 200*time.Millisecond || res.To != 4 {
			t.Errorf("settled: %v, to %d, waited %v; want %v, to 4, waited 200ms or more", got, res.To, res.Waited, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the restore did not end once the open transaction was aborted")
	}
}
