package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/offsetstore"
)

// The seed interleaving (design.md): a group committed 10 on two
// partitions led by two brokers; retention moved both log starts to 40. On
// restart both fetches answer OffsetOutOfRange at different times, the
// second while the first partition's lookup is in flight. Every order in
// which those four answers (two fetches, two lookups) can arrive is
// replayed; in each, no partition may ever lack a position or request,
// each partition resets exactly once (below_log_start, 10 -> 40, 30
// skipped), and fetching resumes at 40 on both.
func TestSeedInterleavingAllOrders(t *testing.T) {
	p1 := offsetstore.TopicPartition{Topic: "orders", Partition: 1}
	p2 := offsetstore.TopicPartition{Topic: "orders", Partition: 2}
	leaders := map[offsetstore.TopicPartition]int32{p1: 1, p2: 2}

	orders := seedOrders()
	if len(orders) != 4 {
		t.Fatalf("%d orders enumerated, want 4: %v", len(orders), orders)
	}
	for _, order := range orders {
		t.Run(strings.Join(order, "-"), func(t *testing.T) {
			for _, validate := range []bool{false, true} {
				h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest, validate: validate})
				h.leaders(leaders)
				h.assign(5, newMemoryStore(5),
					assignedPartition{tp: p1, start: offsetstore.Committed(10)},
					assignedPartition{tp: p2, start: offsetstore.Committed(10)})
				h.checkStructure()
				if validate {
					// With validation the lookup catches the bad offsets
					// before any fetch: answer it and expect the same
					// outcome.
					h.answerResolve(h.takeResolve(), bounds(40, 60))
				} else {
					for _, step := range order {
						switch step {
						case "F1":
							h.answerFetch(h.takeFetch(1), outOfRange(40, 60))
						case "F2":
							h.answerFetch(h.takeFetch(2), outOfRange(40, 60))
						case "R":
							h.answerResolve(h.takeResolve(), bounds(40, 60))
						}
						h.checkStructure()
					}
				}
				for _, tp := range []offsetstore.TopicPartition{p1, p2} {
					rs := h.resets(tp)
					if len(rs) != 1 {
						t.Fatalf("validate=%v %s: %d resets, want 1: %+v", validate, tp, len(rs), rs)
					}
					r := rs[0]
					if r.Reason != offsetstore.ReasonBelowLogStart || r.From != 10 || r.To != 40 || r.Skipped != 30 {
						t.Fatalf("validate=%v %s: reset %+v, want below_log_start 10->40 skipped 30", validate, tp, r)
					}
				}
				for broker, tp := range map[int32]offsetstore.TopicPartition{1: p1, 2: p2} {
					f := h.takeFetch(broker)
					if f.Len() != 1 || f.At(0).Partition != tp || f.At(0).Position.Offset() != 40 {
						t.Fatalf("validate=%v: broker %d fetches %v, want %s at 40", validate, broker, f, tp)
					}
				}
				if len(h.resolves) != 0 || len(h.fetches) != 0 {
					t.Fatalf("left over work: %v %v", h.resolves, h.fetches)
				}
			}
		})
	}
}

// seedOrders enumerates the orders in which the answers of the seed
// scenario can arrive: the two fetches (F1, F2) in any order, and each
// lookup (R) only after a fetch made one necessary; one lookup is in
// flight at a time, so after both fetches two lookups (possibly batched)
// remain.
func seedOrders() [][]string {
	var out [][]string
	var walk func(prefix []string, f1, f2 bool, pendingLookups, inflight int)
	walk = func(prefix []string, f1, f2 bool, pending, inflight int) {
		if f1 && f2 && pending == 0 && inflight == 0 {
			out = append(out, append([]string(nil), prefix...))
			return
		}
		// a lookup goes out whenever the resolver is idle and work waits
		if inflight == 0 && pending > 0 {
			inflight, pending = 1, pending-1
			// the coordinator batches every waiting partition
			if pending > 0 {
				pending--
				inflight = 2
			}
		}
		if !f1 {
			walk(append(prefix, "F1"), true, f2, pending+1, inflight)
		}
		if !f2 {
			walk(append(prefix, "F2"), f1, true, pending+1, inflight)
		}
		if inflight > 0 {
			walk(append(prefix, "R"), f1, f2, pending, 0)
		}
	}
	walk(nil, false, false, 0, 0)
	return out
}

// A stale answer (an older epoch of the same partition) must not change
// anything: the seek after the OutOfRange makes the first lookup stale.
func TestStaleLookupAfterSeekIsDropped(t *testing.T) {
	tp := offsetstore.TopicPartition{Topic: "t", Partition: 0}
	h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest})
	h.leaders(map[offsetstore.TopicPartition]int32{tp: 1})
	h.assign(1, newMemoryStore(1), assignedPartition{tp: tp, start: offsetstore.Committed(10)})
	h.answerFetch(h.takeFetch(1), outOfRange(40, 60))
	lookup := h.takeResolve()
	h.send(&seekEvent{tp: tp, req: offsetstore.Latest(), done: make(chan error, 1)})
	h.checkStructure()
	stale0 := h.c.stats.staleDropped.Load()
	h.answerResolve(lookup, bounds(40, 60)) // the lookup for the OutOfRange, now stale
	if got := h.c.stats.staleDropped.Load(); got != stale0+1 {
		t.Fatalf("stale drops %d -> %d, want one more", stale0, got)
	}
	if n := len(h.resets(tp)); n != 0 {
		t.Fatalf("stale lookup applied: %d resets", n)
	}
	// the seek's own lookup goes out now that the partition is free
	h.answerResolve(h.takeResolve(), bounds(40, 60))
	rs := h.resets(tp)
	if len(rs) != 1 || rs[0].Reason != offsetstore.ReasonSeek || rs[0].To != 60 || rs[0].From != 10 {
		t.Fatalf("resets %+v, want one seek 10 -> 60", rs)
	}
	f := h.takeFetch(1)
	if f.At(0).Position.Offset() != 60 {
		t.Fatalf("fetching at %d, want 60", f.At(0).Position.Offset())
	}
	h.checkStructure()
}

func ExamplePartitionState() {
	for _, s := range []PartitionState{AwaitReset, AwaitValidation, Fetching, Stopped} {
		fmt.Println(s)
	}
	// Output:
	// AWAIT_RESET
	// AWAIT_VALIDATION
	// FETCHING
	// STOPPED
}
