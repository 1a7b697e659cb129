package process

import (
	"errors"
	"testing"

	"github.com/fencepost-dev/fencepost/stages/fetch"
)

// TestSchedulerKeyGroups: with key ordering every batch, one-record
// batches included, is cut by key group, so two records of one key are
// never handed out at once, while other keys of the partition run.
func TestSchedulerKeyGroups(t *testing.T) {
	s := NewScheduler(4, true)
	same := "k"
	for s.keyGroup([]byte(same)) == 0 { // not the group a whole batch would go to
		same += "k"
	}
	key := func(int64) string { return same }
	one := batch(p0, 1, 0, 1, key)   // a one-record batch
	three := batch(p0, 1, 1, 4, key) // three more records of the same key
	other := batch(p0, 1, 4, 5, func(int64) string { return "other-key-x" })
	s.Accept(Message{Batches: []*fetch.Batch{one, three, other}})
	first, ok := s.Next()
	if !ok || first.Batch() != one {
		t.Fatalf("first unit %v, want the one-record batch", first)
	}
	for {
		u, ok := s.Next()
		if !ok {
			break
		}
		if u.Batch() == three {
			t.Fatalf("records of key %q were handed out while the one-record batch of that key runs", same)
		}
	}
	s.Finish(first, nil)
	u, ok := s.Next()
	if !ok || u.Batch() != three {
		t.Fatalf("after the first finished got %v, want the batch of the same key", u)
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
	stop := &StoppedError{Stage: "s", Offset: 13, Failed: 13, Err: errors.New("bad")} // key b's 13 failed; 11 finished
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
	if c.FinishedBelow != 13 || !errors.As(c.Err, new(*StoppedError)) {
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
