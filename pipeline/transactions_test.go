package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/group"
	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/internal/produce"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// A cooperative rebalance moves the member to a new generation a moment
// before the coordinator hears of it: a transaction committed through the
// old generation's store, for partitions the member keeps, commits under
// the member's current generation instead of aborting. One for a
// partition the member no longer owns aborts.
func TestTxnStoreCommitsKeptPartitionsAcrossGenerations(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "in", 4)
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	join := func(name string) (*group.Member, <-chan group.Assigned) { return joinTxnTestGroup(t, c, "g", name) }
	a, aAssigned := join("a")
	first := <-aAssigned
	if len(first.Partitions) != 4 {
		t.Fatalf("a was assigned %d partitions, want 4", len(first.Partitions))
	}
	tr := &kafka.Transport{MetadataTTL: 200 * time.Millisecond}
	defer tr.CloseIdleConnections()
	prod := produce.New(kafkawire.New(tr, kafka.TCP(c.Addrs...)), produce.Config{TransactionalID: "g-a"})
	if err := prod.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	store := &txnStore{prod: prod, gm: a, group: "g", gen: first.Generation}

	_, _ = join("b") // a keeps two partitions, under a new generation
	var kept, moved []offsetstore.TopicPartition
	deadline := time.After(20 * time.Second)
	for kept == nil {
		select {
		case e := <-aAssigned:
			if e.Generation == first.Generation {
				continue
			}
		case <-deadline:
			t.Fatal("no new generation for a")
		case <-time.After(50 * time.Millisecond):
		}
		gen, _, _, err := a.Identity(nil)
		if err != nil || offsets.Generation(gen) == first.Generation {
			continue
		}
		for _, p := range first.Partitions {
			if _, _, _, err := a.Identity([]offsetstore.TopicPartition{p.TopicPartition}); err == nil {
				kept = append(kept, p.TopicPartition)
			} else {
				moved = append(moved, p.TopicPartition)
			}
		}
		if len(moved) == 0 {
			kept = nil // the second round has not moved anything yet
		}
	}
	entries := []offsets.CommitEntry{{Partition: kept[0], Offset: 7, LeaderEpoch: -1}}
	if err := store.Commit(ctx, offsets.NewCommitRequest(first.Generation, entries)); err != nil {
		t.Fatalf("commit of kept %s through generation %d's store: %v", kept[0], first.Generation, err)
	}
	if got := c.Committed(t, "g", "in"); got[kept[0].Partition] != 7 {
		t.Fatalf("committed %v, want %s at 7", got, kept[0])
	}
	entries = []offsets.CommitEntry{{Partition: moved[0], Offset: 9, LeaderEpoch: -1}}
	err := store.Commit(ctx, offsets.NewCommitRequest(first.Generation, entries))
	if !errors.Is(err, offsets.ErrTransactionAborted) {
		t.Fatalf("commit of moved %s: %v, want the transaction aborted", moved[0], err)
	}
}

// TestTxnStoreBrokerAbortedCommit: the broker aborts the open transaction
// on its own (it outlived transaction_timeout; a broker restart does the
// same) and bumps the producer's epoch. The producer learns nothing until
// the commit, whose offsets and EndTxn are refused. The store must report
// the transaction aborted (so the coordinator rewinds every partition to
// its committed offset), not committed, even though it takes the
// transactional id back; and the group's offsets must not move.
func TestTxnStoreBrokerAbortedCommit(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "in", 1)
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	gm, assigned := joinTxnTestGroup(t, c, "g-abort", "a")
	first := <-assigned
	tr := &kafka.Transport{MetadataTTL: 200 * time.Millisecond}
	defer tr.CloseIdleConnections()
	prod := produce.New(kafkawire.New(tr, kafka.TCP(c.Addrs...)), produce.Config{TransactionalID: "g-abort-a", TransactionTimeout: time.Second})
	if err := prod.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	store := &txnStore{prod: prod, gm: gm, group: "g-abort", gen: first.Generation}
	if err := prod.ForTopic("out").Produce(ctx, []stages.Record{{Value: []byte("lost-with-its-transaction")}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // the broker aborts the transaction past its timeout
	tp := offsetstore.TopicPartition{Topic: "in", Partition: 0}
	err := store.Commit(ctx, offsets.NewCommitRequest(first.Generation, []offsets.CommitEntry{{Partition: tp, Offset: 1, LeaderEpoch: -1}}))
	if !errors.Is(err, offsets.ErrTransactionAborted) {
		t.Fatalf("commit of a transaction the broker aborted: %v, want ErrTransactionAborted", err)
	}
	if got := c.Committed(t, "g-abort", "in"); got[0] > 0 {
		t.Fatalf("committed %v after the broker aborted the transaction, want nothing", got)
	}
	// the store goes on: the next transaction commits
	if err := prod.ForTopic("out").Produce(ctx, []stages.Record{{Value: []byte("next")}}); err != nil {
		t.Fatal(err)
	}
	if err := store.Commit(ctx, offsets.NewCommitRequest(first.Generation, []offsets.CommitEntry{{Partition: tp, Offset: 1, LeaderEpoch: -1}})); err != nil {
		t.Fatalf("commit of the next transaction: %v", err)
	}
	if got := c.Committed(t, "g-abort", "in"); got[0] != 1 {
		t.Fatalf("committed %v, want in/0 at 1", got)
	}
}

// joinTxnTestGroup runs a group member (client id name) of group on topic
// "in" until the test ends: it delivers the member's assignments and
// finishes its revokes at once.
func joinTxnTestGroup(t *testing.T, c *kafkatest.Cluster, groupName, name string) (*group.Member, <-chan group.Assigned) {
	t.Helper()
	gm, err := group.New(group.Config{Brokers: c.Addrs, Group: groupName, Topics: []string{"in"}, ClientID: name,
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	assigned := make(chan group.Assigned, 16)
	done := make(chan struct{})
	go func() { _ = gm.Run(ctx); close(done) }()
	go func() {
		for ev := range gm.Events() {
			switch e := ev.(type) {
			case group.Assigned:
				assigned <- e
			case group.Revoke:
				e.Done()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return gm, assigned
}
