package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// TestCorruptBatchStopsThePartition: the good records before a corrupt
// batch are handed out, the corrupt batch is fetched again (a fault in
// transit heals), and when it stays corrupt the partition stops with the
// reason, visibly, instead of fetching the same bytes forever; a seek
// past it restarts the partition.
func TestCorruptBatchStopsThePartition(t *testing.T) {
	corrupt := fmt.Errorf("records of %s from offset 3: %w: CRC mismatch in the batch at offset 3", tp0, fetch.ErrCorrupt)
	for _, heals := range []bool{false, true} {
		t.Run(fmt.Sprintf("heals=%v", heals), func(t *testing.T) {
			h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest, retryBackoff: 10 * time.Millisecond})
			h.leaders(map[offsetstore.TopicPartition]int32{tp0: 1})
			h.assign(1, newMemoryStore(1), assignedPartition{tp: tp0, start: offsetstore.Committed(0)})
			// records 0-2 are good, the batch at 3 is corrupt
			h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult {
				pr := records(e, 3, 0, 10)
				pr.Outcome, pr.Err = fetch.Corrupt, corrupt
				return pr
			})
			var handed []offsets.Span
			for _, m := range h.messages {
				for _, b := range m.Batches {
					handed = append(handed, b.Span())
				}
			}
			if len(handed) != 1 || handed[0] != (offsets.Span{Start: 0, End: 3}) {
				t.Fatalf("handed out %v, want the good records [0, 3)", handed)
			}
			for attempt := 2; attempt <= corruptAttempts; attempt++ {
				h.advance(time.Second) // the backoff passes
				f := h.takeFetch(1)
				if off := f.At(0).Position.Offset(); off != 3 {
					t.Fatalf("attempt %d fetches at %d, want 3 (the corrupt batch)", attempt, off)
				}
				if heals && attempt == corruptAttempts {
					h.answerFetch(f, func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 5, 0, 10) })
					break
				}
				h.answerFetch(f, func(e offsets.FetchEntry) fetch.PartitionResult {
					return fetch.PartitionResult{Outcome: fetch.Corrupt, Err: corrupt, Next: 3, LogStart: 0, HighWatermark: 10}
				})
			}
			st := h.c.snapshot()[0]
			if heals {
				if st.State != Fetching || st.Position != 5 {
					t.Fatalf("after the batch healed: %v at %d, want FETCHING at 5", st.State, st.Position)
				}
				return
			}
			if st.State != Stopped || !errors.Is(st.Err, fetch.ErrCorrupt) || !strings.Contains(st.Err.Error(), "offset 3") {
				t.Fatalf("state %v, err %v: want STOPPED with the corrupt batch's offset", st.State, st.Err)
			}
			if n := h.c.stats.stoppedPartitions.Load(); n != 1 {
				t.Fatalf("%d stopped partitions counted, want 1", n)
			}
			stopped := 0
			for _, n := range h.notices {
				if n.Stopped != nil && n.Stopped.Partition == tp0 {
					stopped++
				}
			}
			if stopped != 1 {
				t.Fatalf("%d stop notices, want 1", stopped)
			}
			h.advance(time.Minute)
			if len(h.fetches) != 0 {
				t.Fatalf("a stopped partition is fetched again: %v", h.fetches)
			}
			// the application decides to skip the batch
			done := make(chan error, 1)
			h.send(&seekEvent{tp: tp0, req: offsetstore.Exact(4), done: done})
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n := len(h.resolves); n > 0 {
				h.answerResolve(h.takeResolve(), bounds(0, 10))
			}
			if f := h.takeFetch(1); f.At(0).Position.Offset() != 4 {
				t.Fatalf("after the seek fetching at %d, want 4", f.At(0).Position.Offset())
			}
		})
	}
}

// TestBudgetServesEveryFetcher: with a budget of one partition's share and
// two fetchers, a fetcher refused for lack of budget goes first when
// budget frees, and a long poll of a caught-up partition reserves no more
// than its fetcher's part of half the budget: the partition with records
// is fetched whatever order the fetchers were made in (the idle
// partition's long polls must not take the whole budget in turn), its
// large batch is counted whole, and no fetch starts while it is buffered.
func TestBudgetServesEveryFetcher(t *testing.T) {
	idleTP := offsetstore.TopicPartition{Topic: "events", Partition: 0}
	busyTP := offsetstore.TopicPartition{Topic: "events", Partition: 1}
	const budget = 64 << 10
	h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest, budget: budget,
		partitionMaxBytes: budget, fetchersPerBroker: 2})
	h.leaders(map[offsetstore.TopicPartition]int32{idleTP: 1, busyTP: 1})
	h.assign(1, newMemoryStore(1), assignedPartition{tp: idleTP, start: offsetstore.Committed(0)},
		assignedPartition{tp: busyTP, start: offsetstore.Committed(0)})
	take := func(tp offsetstore.TopicPartition) (offsets.FetchRequest, bool) {
		for i, f := range h.fetches {
			if f.At(0).Partition == tp {
				h.fetches = append(h.fetches[:i], h.fetches[i+1:]...)
				return f, true
			}
		}
		return offsets.FetchRequest{}, false
	}
	empty := func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 0, 0, e.Position.Offset()) }
	large := func(e offsets.FetchEntry) fetch.PartitionResult {
		pr := records(e, e.Position.Offset()+1, 0, 100)
		pr.Bytes = 600_000 // one record larger than the budget
		pr.Batch = fetch.NewBatch(e.Partition, e.Position.Generation(), e.Position.Epoch(), pr.Batch.Span(), pr.Batch.Records(), pr.Bytes)
		return pr
	}
	// The idle partition's fetcher was made first and took the budget.
	idle, ok := take(idleTP)
	if !ok || len(h.fetches) != 0 {
		t.Fatalf("fetches %v and %v: want the first partition's alone", idle, h.fetches)
	}
	// Its long poll ends empty: the refused fetcher goes first.
	h.answerFetch(idle, empty)
	busy, ok := take(busyTP)
	if !ok {
		t.Fatalf("the partition with records is not fetched after the long poll: %v", h.fetches)
	}
	for round := range 5 {
		h.answerFetch(busy, large)
		if h.c.buffered != 600_000 {
			t.Fatalf("round %d: buffered %d, want the large batch counted whole", round, h.c.buffered)
		}
		if len(h.fetches) != 0 {
			t.Fatalf("round %d: fetched while the budget is over: %v", round, h.fetches)
		}
		h.completeAll()
		if round == 0 {
			if idle, ok = take(idleTP); !ok {
				t.Fatalf("the idle partition is not fetched after the budget freed: %v", h.fetches)
			}
		}
		if idle.MaxBytes() != budget/4 {
			t.Fatalf("round %d: a long poll of a caught-up partition asks for %d bytes, want %d (half the budget, split between two fetchers)",
				round, idle.MaxBytes(), budget/4)
		}
		if busy, ok = take(busyTP); !ok {
			t.Fatalf("round %d: the busy partition waits behind a long poll of an idle one", round)
		}
		if off := busy.At(0).Position.Offset(); off != int64(round+1) {
			t.Fatalf("round %d: busy partition fetched at %d, want %d", round, off, round+1)
		}
		h.answerFetch(idle, empty) // a new long poll goes out: the budget keeps its part
		if idle, ok = take(idleTP); !ok {
			t.Fatalf("round %d: the idle partition's next long poll did not go out", round)
		}
	}
}
