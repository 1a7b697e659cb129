package pipeline

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The fencing rule: bumps of the producer's epoch by the broker (a
// transaction that outlived transaction_timeout, at most one per
// transaction_timeout) never stop the run; the third fencing within half
// of transaction_timeout does, with an error naming the group_instance_id.
func TestFencingRule(t *testing.T) {
	cfg := Config{TransactionTimeout: 10 * time.Second}
	cfg.Consumer.GroupInstanceID = "pod-1"
	t0 := time.Unix(1_000_000, 0)

	timeouts := newFencingRule(cfg, "g-pod-1")
	for i := range 10 { // a stage that always holds its transaction past the timeout
		if err := timeouts.note(1, t0.Add(time.Duration(i)*cfg.TransactionTimeout)); err != nil {
			t.Fatalf("fencing %d, one transaction_timeout after the previous one, stopped the run: %v", i+1, err)
		}
	}
	// a timeout, then a broker restart 1s later: two bumps, not three
	if err := timeouts.note(2, t0.Add(100*time.Second)); err != nil {
		t.Fatalf("two fencings within half of transaction_timeout stopped the run: %v", err)
	}

	dup := newFencingRule(cfg, "g-pod-1")
	for i := range 2 {
		if err := dup.note(1, t0.Add(time.Duration(i)*10*time.Millisecond)); err != nil {
			t.Fatalf("fencing %d stopped the run: %v", i+1, err)
		}
	}
	err := dup.note(1, t0.Add(30*time.Millisecond))
	if !errors.Is(err, ErrDuplicateInstance) {
		t.Fatalf("a third fencing within 30ms did not stop the run: %v", err)
	}
	for _, want := range []string{`consumer.group_instance_id "pod-1"`, `"g-pod-1"`, "3 times"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %s: %v", want, err)
		}
	}

	// unseen: each of the producer's epoch jumps is counted once
	if n := dup.unseen(2); n != 2 {
		t.Errorf("unseen(2) on a new rule = %d, want 2", n)
	}
	if n := dup.unseen(2); n != 0 {
		t.Errorf("unseen(2) again = %d, want 0", n)
	}
	if n := dup.unseen(5); n != 3 {
		t.Errorf("unseen(5) after 2 = %d, want 3", n)
	}
}

// The transactional id is the same at every start of an instance with a
// group_instance_id (so a restart fences the crashed predecessor's open
// transaction), and new at every start of one without.
func TestTransactionalIDIdentity(t *testing.T) {
	static := ConsumerConfig{Group: "enricher", GroupInstanceID: "pod-3"}
	if a, b := transactionalID(static, ""), transactionalID(static, ""); a != "enricher-pod-3" || b != a {
		t.Errorf("static member: transactional ids %q and %q, want enricher-pod-3 both times", a, b)
	}
	dynamic := ConsumerConfig{Group: "enricher"}
	seen := map[string]bool{}
	for range 100 {
		id := transactionalID(dynamic, "")
		if !strings.HasPrefix(id, "enricher-") || seen[id] {
			t.Fatalf("dynamic member: transactional id %q repeats or lacks the group prefix (ACLs use it)", id)
		}
		seen[id] = true
	}
	// with a process id from a state directory, the same at every start
	if a, b := transactionalID(dynamic, "9f3c"), transactionalID(dynamic, "9f3c"); a != "enricher-9f3c" || b != a {
		t.Errorf("dynamic member with a state directory: transactional ids %q and %q, want enricher-9f3c both times", a, b)
	}
	if a := transactionalID(static, "9f3c"); a != "enricher-pod-3" {
		t.Errorf("static member with a state directory: transactional id %q, want the instance id's enricher-pod-3", a)
	}
}
