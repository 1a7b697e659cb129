package state

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"
)

// TestCrashLeavesAnEarlierCheckpoint: the stores keep no write-ahead log
// (options), so a crash loses what pebble had not flushed. What it leaves
// must still be the store as of its checkpoint: every change below the
// checkpoint there, none above it; and a restore from there must end
// with every change. A crash is a clone of a pebble memory file system
// that keeps what was synced and, at random, some of what was not, taken
// while the store is open and being written (rapid prints the seed of a
// failure).
//
// A restore applies in batches or, above bulkBatchBytes, in sorted tables
// pebble ingests: small limits here take both paths.
func TestCrashLeavesAnEarlierCheckpoint(t *testing.T) {
	recs := restoreLog(20_000) // unique keys: the fold of a prefix is that prefix
	defer func(b, bb int) { bulkBytes, bulkBatchBytes = b, bb }(bulkBytes, bulkBatchBytes)
	rapid.Check(t, func(t *rapid.T) {
		bulkBytes = rapid.IntRange(1, 1<<20).Draw(t, "bulkBytes")
		bulkBatchBytes = rapid.IntRange(0, 256<<10).Draw(t, "bulkBatchBytes")
		fs := vfs.NewCrashableMem()
		st := &Storage{Memory: true, WriteBufferBytes: 256 << 10}
		st.memOnce.Do(func() { st.memfs = fs })
		id := Identity{Group: "g", Store: "s", Changelog: "g-s-changelog"}
		p, _, err := st.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		per := rapid.IntRange(100, 5_000).Draw(t, "per")
		upTo := rapid.IntRange(0, len(recs)).Draw(t, "written")
		if _, _, err := Restore(context.Background(), st, p, chunkedLog{recs: recs[:upTo], per: per}, false, nil); err != nil {
			t.Fatal(err)
		}
		seed := rapid.Uint64().Draw(t, "crash")
		crashed := fs.CrashClone(vfs.CrashCloneCfg{
			UnsyncedDataPercent: rapid.IntRange(0, 100).Draw(t, "unsynced%"),
			RNG:                 rand.New(rand.NewPCG(seed, seed)),
		})
		_ = p.db.Close() // the process is gone: no flush

		after := &Storage{Memory: true, WriteBufferBytes: 256 << 10}
		after.memOnce.Do(func() { after.memfs = crashed })
		q, _, err := after.Open(id)
		if err != nil {
			t.Fatalf("opening the store after the crash: %v", err)
		}
		defer func() { _ = q.Close() }()
		cp := q.Next()
		if cp > int64(upTo) {
			t.Fatalf("checkpoint %d after the crash, past the %d records written", cp, upTo)
		}
		got := contents(t, q)
		if len(got) != int(cp) {
			t.Fatalf("the store holds %d keys at checkpoint %d, want %d", len(got), cp, cp)
		}
		for i := range cp {
			if v, ok := got[string(recs[i].Key)]; !ok || v != string(recs[i].Value) {
				t.Fatalf("record %d below checkpoint %d: key %s = %q (present %v), want %q", i, cp, recs[i].Key, v, ok, recs[i].Value)
			}
		}
		q, res, err := Restore(context.Background(), after, q, chunkedLog{recs: recs, per: per}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.From != cp || q.Next() != int64(len(recs)) || len(contents(t, q)) != len(recs) {
			t.Fatalf("restore after the crash went %d..%d holding %d keys, want %d..%d holding %d",
				res.From, q.Next(), len(contents(t, q)), cp, len(recs), len(recs))
		}
	})
}
