package process

import (
	"errors"
	"slices"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestSchedulerKeyGroups: with key ordering every batch, one-record
// batches included, is cut by key group, so two records of one key are
// never handed out at once, while other keys of the partition run; the
// waiting pieces of one key group run together.
func TestSchedulerKeyGroups(t *testing.T) {
	s := NewScheduler(4, true)
	same := "k"
	for s.keyGroup([]byte(same)) == s.keyGroup([]byte("other-key-x")) {
		same += "k"
	}
	key := func(int64) string { return same }
	one := batch(p0, 1, 0, 1, key) // a one-record batch
	s.Accept(Message{Batches: []*fetch.Batch{one}})
	first, ok := s.Next()
	if !ok || !slices.Equal(first.Batches(), []*fetch.Batch{one}) {
		t.Fatalf("first unit %v, want the one-record batch", first)
	}
	three := batch(p0, 1, 1, 4, key) // three more records of the same key
	four := batch(p0, 1, 4, 8, key)  // and four
	other := batch(p0, 1, 8, 9, func(int64) string { return "other-key-x" })
	s.Accept(Message{Batches: []*fetch.Batch{three, four, other}})
	u, ok := s.Next()
	if !ok || !slices.Equal(u.Batches(), []*fetch.Batch{other}) {
		t.Fatalf("while the first runs got %v, want only the other key's batch", u)
	}
	if u, ok := s.Next(); ok {
		t.Fatalf("records of key %q were handed out while the one-record batch of that key runs: %v", same, u.Batches())
	}
	s.Finish(first, nil)
	u, ok = s.Next()
	if !ok || !slices.Equal(u.Batches(), []*fetch.Batch{three, four}) || len(u.Records()) != 7 {
		t.Fatalf("after the first finished got %v, want the two waiting batches of the key in one unit", u)
	}
	for i, r := range u.Records() {
		if r.Offset != int64(1+i) {
			t.Fatalf("records %v out of order", u.Records())
		}
	}
}

// TestSchedulerCoalescesUpToMaxUnitRecords: the batches waiting in a
// queue run as one unit up to MaxUnitRecords records; a stop in the
// middle of a unit finishes the batches below it, stops the batch holding
// it and finishes nothing of the batches after it.
func TestSchedulerCoalescesUpToMaxUnitRecords(t *testing.T) {
	s := NewScheduler(1, false)
	block := batch(p0, 1, 0, 1, sameKey)
	s.Accept(Message{Batches: []*fetch.Batch{block}})
	first, _ := s.Next()
	size := int64(MaxUnitRecords / 2)
	var waiting []*fetch.Batch
	for i := int64(0); i < 3; i++ {
		waiting = append(waiting, batch(p0, 1, 1+i*size, 1+(i+1)*size, sameKey))
	}
	s.Accept(Message{Batches: waiting})
	s.Finish(first, nil)
	u, ok := s.Next()
	if !ok || !slices.Equal(u.Batches(), waiting[:2]) || len(u.Records()) != MaxUnitRecords {
		t.Fatalf("unit of %d batches, %d records; want the first 2 waiting batches, %d records", len(u.Batches()), len(u.Records()), MaxUnitRecords)
	}
	stopAt := waiting[1].Span().Start + 5
	s.Finish(u, &stages.StoppedError{Stage: "s", Offset: stopAt, Failed: stopAt, Err: errors.New("bad")})
	got := map[*fetch.Batch]Completion{}
	for _, c := range s.TakeReport().Completions {
		got[c.Batch] = c
	}
	if c := got[waiting[0]]; !c.Finished() || c.Err != nil {
		t.Fatalf("the batch below the stop: %+v, want finished", c)
	}
	if c := got[waiting[1]]; c.FinishedBelow != stopAt || c.Err == nil {
		t.Fatalf("the batch holding the stop: %+v, want finished below %d with the stop", c, stopAt)
	}
	if c := got[waiting[2]]; !dropped(c) {
		t.Fatalf("the batch after the unit: %+v, want dropped (its partition stopped)", c)
	}
}

// TestSchedulerFinishedBelow: what a batch reports when one of its key
// groups stops: everything below the first unfinished record, whichever
// group it is in.
func TestSchedulerFinishedBelow(t *testing.T) {
	s := NewScheduler(2, true)
	keys := []string{"a", "b", "a", "b", "a"} // offsets 10..14
	b := batch(p0, 1, 10, 15, func(o int64) string { return keys[o-10] })
	s.Accept(Message{Batches: []*fetch.Batch{b}})
	u1, _ := s.Next()
	u2, ok := s.Next()
	if !ok || s.keyGroup([]byte("a")) == s.keyGroup([]byte("b")) {
		t.Fatal("keys a and b share a key group: pick other keys")
	}
	byKey := map[string]*Unit{string(u1.Records()[0].Key): u1, string(u2.Records()[0].Key): u2}
	stop := &stages.StoppedError{Stage: "s", Offset: 13, Failed: 13, Err: errors.New("bad")} // key b's 13 failed; 11 finished
	s.Finish(byKey["b"], stop)
	if r := s.TakeReport(); r != nil {
		t.Fatalf("reported %+v while key a still runs", r)
	}
	s.Finish(byKey["a"], nil)
	r := s.TakeReport()
	if r == nil || len(r.Completions) != 1 {
		t.Fatalf("report %+v, want one completion", r)
	}
	c := r.Completions[0]
	if c.FinishedBelow != 13 || !errors.As(c.Err, new(*stages.StoppedError)) {
		t.Fatalf("completion finished below %d (err %v), want 13 with the stop", c.FinishedBelow, c.Err)
	}
	// the partition is stopped for this epoch: a later batch is dropped
	s.Accept(Message{Batches: []*fetch.Batch{batch(p0, 1, 15, 16, sameKey)}})
	if _, ok := s.Next(); ok {
		t.Fatal("a batch of the stopped epoch was handed out")
	}
	if c := s.TakeReport().Completions[0]; !dropped(c) {
		t.Fatalf("batch of the stopped epoch: %+v, want dropped", c)
	}
}
