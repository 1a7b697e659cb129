package state

import (
	"context"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
)

// oneRead returns every record in one chunk.
type oneRead []stages.Record

func (r oneRead) Read(_ context.Context, _ string, _ int32, offset int64) (Chunk, error) {
	end := int64(len(r))
	if offset > end {
		return Chunk{End: end}, ErrOutOfRange
	}
	return Chunk{Records: r[offset:], Next: end, End: end}, nil
}

// TestRestoreLaterChangeWinsInOneRead: a restore sorts what it read by
// key before applying it; of several changes of one key, the last in the
// changelog still wins, a tombstone included, in a batch and in a table.
func TestRestoreLaterChangeWinsInOneRead(t *testing.T) {
	for _, table := range []bool{false, true} {
		t.Run(map[bool]string{false: "batch", true: "table"}[table], func(t *testing.T) {
			if table { // every restore's write a sorted table ingested
				defer func(bb int) { bulkBatchBytes = bb }(bulkBatchBytes)
				bulkBatchBytes = 0
			}
			laterChangeWins(t)
		})
	}
}

func laterChangeWins(t *testing.T) {
	st := &Storage{Memory: true}
	p, _, err := st.Open(Identity{Group: "g", Store: "s", Changelog: "g-s-changelog"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rec := func(k, v string) stages.Record {
		r := stages.Record{Key: []byte(k)}
		if v != "-" {
			r.Value = []byte(v)
		}
		return r
	}
	log := oneRead{rec("b", "1"), rec("a", "1"), rec("b", "-"), rec("c", "1"), rec("a", "2"), rec("c", "-"), rec("c", "3"), rec("a", "-")}
	p, res, err := Restore(context.Background(), st, p, log, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != int64(len(log)) || p.Next() != int64(len(log)) {
		t.Fatalf("restored %d records to %d, want %d to %d", res.Records, p.Next(), len(log), len(log))
	}
	for k, want := range map[string]string{"a": "-", "b": "-", "c": "3"} {
		v, ok, err := p.Get([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		got := "-"
		if ok {
			got = string(v)
		}
		if got != want {
			t.Errorf("key %s = %s, want %s", k, got, want)
		}
	}
}
