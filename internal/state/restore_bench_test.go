package state

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"syscall"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

// chunkedLog serves a changelog in reads of at most per records, as a
// fetch of about 1 MB does.
type chunkedLog struct {
	recs []stages.Record
	per  int
}

func (l chunkedLog) Read(_ context.Context, _ string, _ int32, offset int64) (Chunk, error) {
	end := int64(len(l.recs))
	if offset > end {
		return Chunk{End: end}, ErrOutOfRange
	}
	next := min(offset+int64(l.per), end)
	return Chunk{Records: l.recs[offset:next], Next: next, End: end, HighWatermark: end}, nil
}

// restoreLog is n unique keys of 92 bytes in no order (16 hex digits of a
// hash first) with 8-byte counts: the shape of statebench's changelog.
func restoreLog(n int) []stages.Record {
	recs := make([]stages.Record, n)
	for i := range recs {
		h := fnv.New64a()
		fmt.Fprint(h, i)
		k := fmt.Appendf(nil, "%016x-%075d", h.Sum64(), i)
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, uint64(i))
		recs[i] = stages.Record{Key: k, Value: v}
	}
	return recs
}

// BenchmarkRestore restores a changelog of 1,000,000 unique keys (100 MB)
// into an empty store on disk, from reads of 10,000 records: the cost of
// the restore's storage side without a broker (statebench measures the
// whole). Reported per restored record.
//
//	go test ./internal/state -run '^$' -bench Restore -benchtime 5x
func BenchmarkRestore(b *testing.B) {
	log := chunkedLog{recs: restoreLog(1_000_000), per: 10_000}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		st := &Storage{Dir: b.TempDir(), WriteBufferBytes: benchWriteBuffer}
		p, _, err := st.Open(Identity{Group: "g", Store: "s", Changelog: "g-s-changelog"})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		p, res, err := Restore(context.Background(), st, p, log, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if res.Records != int64(len(log.recs)) {
			b.Fatalf("restored %d records, want %d", res.Records, len(log.recs))
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(log.recs)), "ns/record")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*len(log.recs)), "cpu-ns/record")
}

// cpuTime is the process's user and system time so far (pebble's
// compactions run on goroutines of their own: wall time hides them on a
// busy machine).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchWriteBuffer is BenchmarkRestore's Storage.WriteBufferBytes.
var benchWriteBuffer int64 = DefaultWriteBufferBytes
