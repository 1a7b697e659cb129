package produce

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
)

// joinGroup joins group as a kgo consumer of topic (no auto-commit) and
// returns the member the group coordinator knows; the member leaves when
// the test ends.
func joinGroup(t *testing.T, addrs []string, group, topic string, extra ...kgo.Opt) GroupMember {
	t.Helper()
	opts := append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(6 * time.Second)}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if member, gen := cl.GroupMetadata(); gen > 0 {
			return GroupMember{Group: group, Generation: gen, MemberID: member}
		}
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatal("the kgo member did not join")
		}
	}
}

// committedOffsets returns the group's committed offsets and leader
// epochs of topic's partition 0.
func committedOffsets(t *testing.T, c *kafkatest.Cluster, group, topic string) (offset int64, leaderEpoch int32, ok bool) {
	t.Helper()
	resp, err := c.Admin.FetchOffsets(context.Background(), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return 0, 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	o, ok := resp.Lookup(topic, 0)
	if !ok || o.Err != nil || o.At < 0 {
		return 0, 0, false
	}
	return o.At, o.LeaderEpoch, true
}

// TestTransactionCommit: a committed transaction's records are visible
// to a read_committed consumer, and its offsets are the group's
// committed offsets (with the leader epoch). A second transaction of the
// same producer continues its sequences.
func TestTransactionCommit(t *testing.T) {
	c := kafkatest.New(t, 3)
	c.CreateTopic(t, "in", 1)
	c.CreateTopic(t, "out", 3)
	member := joinGroup(t, c.Addrs, "g", "in")
	ctx := context.Background()
	p := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-commit"})
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("first", 50)); err != nil {
		t.Fatal(err)
	}
	if err := p.SendOffsets(ctx, member, []Offset{{Topic: "in", Partition: 0, Offset: 10, LeaderEpoch: 0}}); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := committedOffsets(t, c, "g", "in"); ok {
		t.Fatal("offsets committed before the transaction")
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := values(consume(t, c.Addrs, "out", 50, true)); !slices.Equal(got, wantValues("first", 50)) {
		t.Fatalf("read_committed read %v", got)
	}
	at, leaderEpoch, ok := committedOffsets(t, c, "g", "in")
	if !ok || at != 10 || leaderEpoch != 0 {
		t.Fatalf("committed offset %d leader epoch %d (found %v), want 10 leader epoch 0", at, leaderEpoch, ok)
	}

	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("second", 10)); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(wantValues("first", 50), wantValues("second", 10))
	slices.Sort(want)
	if got := values(consume(t, c.Addrs, "out", 60, true)); !slices.Equal(got, want) {
		t.Fatalf("read_committed read %v", got)
	}
}

// TestTransactionAbort: an aborted transaction's records are never
// visible to read_committed consumers and its offsets are not committed;
// the producer's next transaction commits normally.
func TestTransactionAbort(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "in", 1)
	c.CreateTopic(t, "out", 2)
	ctx := context.Background()
	p := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-abort"})
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	_, producerEpoch1, _ := p.identity()
	if err := p.ForTopic("out").Produce(ctx, numbered("aborted", 20)); err != nil {
		t.Fatal(err)
	}
	// a group with no members: offsets without generation checks
	if err := p.SendOffsets(ctx, GroupMember{Group: "g", Generation: -1}, []Offset{{Topic: "in", Partition: 0, Offset: 5, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if _, producerEpoch2, _ := p.identity(); producerEpoch2 <= producerEpoch1 {
		t.Fatalf("producer epoch %d after abort, want above %d (re-initialized)", producerEpoch2, producerEpoch1)
	}
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("committed", 5)); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// the committed records come after the aborted ones: once they are
	// read, the aborted ones would have been
	if got := values(consume(t, c.Addrs, "out", 5, true)); !slices.Equal(got, wantValues("committed", 5)) {
		t.Fatalf("read_committed read %v", got)
	}
	if got := consume(t, c.Addrs, "out", 25, false); len(got) != 25 {
		t.Fatalf("read_uncommitted read %d records, want the 25 written", len(got))
	}
	if at, _, ok := committedOffsets(t, c, "g", "in"); ok {
		t.Fatalf("the aborted transaction committed offset %d", at)
	}
}

// TestTransactionFencing: a second producer with the same transactional
// id fences the first; the first's commit fails with ErrProducerFenced
// and its records are never visible; the second commits.
func TestTransactionFencing(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	p1 := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-fence"})
	if err := p1.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p1.ForTopic("out").Produce(ctx, numbered("zombie", 10)); err != nil {
		t.Fatal(err)
	}
	p2 := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-fence"})
	if err := p2.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p1.Commit(ctx); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("zombie commit: %v, want ErrProducerFenced", err)
	}
	if err := p1.Begin(ctx); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("zombie begin after fencing: %v, want ErrProducerFenced", err)
	}
	if err := p2.ForTopic("out").Produce(ctx, numbered("owner", 3)); err != nil {
		t.Fatal(err)
	}
	if err := p2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := values(consume(t, c.Addrs, "out", 3, true)); !slices.Equal(got, wantValues("owner", 3)) {
		t.Fatalf("read_committed read %v", got)
	}
}

// TestTransactionFencedProduce: a zombie's Produce after the fencing
// fails (kfake answers INVALID_TXN_STATE, Apache Kafka
// INVALID_PRODUCER_EPOCH: both abortable, since a stale epoch can also be
// a transaction timeout), and the zombie learns it is fenced when it
// aborts: the coordinator answers PRODUCER_FENCED.
func TestTransactionFencedProduce(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	p1 := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-fence-produce"})
	if err := p1.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p1.ForTopic("out").Produce(ctx, numbered("a", 1)); err != nil {
		t.Fatal(err)
	}
	p2 := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-fence-produce"})
	if err := p2.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p1.ForTopic("out").Produce(ctx, numbered("b", 1)); err == nil {
		t.Fatal("zombie produce succeeded")
	}
	if err := p1.Abort(ctx); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("zombie abort: %v, want ErrProducerFenced", err)
	}
	if err := p1.Begin(ctx); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("zombie begin: %v, want ErrProducerFenced", err)
	}
}

// TestTransactionStaleMember: offsets of a member whose generation moved
// on are refused with an AbortableError wrapping ErrStaleMember; Commit
// then refuses, Abort clears it, and the next transaction works.
func TestTransactionStaleMember(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "in", 1)
	c.CreateTopic(t, "out", 1)
	member := joinGroup(t, c.Addrs, "g", "in")
	ctx := context.Background()
	p := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-stale"})
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("x", 3)); err != nil {
		t.Fatal(err)
	}
	stale := member
	stale.Generation++
	err := p.SendOffsets(ctx, stale, []Offset{{Topic: "in", Partition: 0, Offset: 1, LeaderEpoch: -1}})
	var ab *AbortableError
	if !errors.As(err, &ab) || !errors.Is(err, ErrStaleMember) {
		t.Fatalf("stale member's offsets: %v, want an AbortableError wrapping ErrStaleMember", err)
	}
	if err := p.Commit(ctx); !errors.As(err, &ab) {
		t.Fatalf("commit after an abortable error: %v, want the AbortableError", err)
	}
	if err := p.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("y", 2)); err != nil {
		t.Fatal(err)
	}
	if err := p.SendOffsets(ctx, member, []Offset{{Topic: "in", Partition: 0, Offset: 1, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := values(consume(t, c.Addrs, "out", 2, true)); !slices.Equal(got, wantValues("y", 2)) {
		t.Fatalf("read_committed read %v", got)
	}
}

// TestTransactionProduceFailureIsAbortable: a Produce that fails inside
// a transaction makes Commit refuse (the outputs may be partly written);
// Abort and a new transaction recover.
func TestTransactionProduceFailureIsAbortable(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 2)
	ctx := context.Background()
	p := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-fail", MaxAttempts: 2, RetryBackoff: 5 * time.Millisecond})
	if err := p.ForTopic("out").Produce(ctx, numbered("early", 1)); !errors.Is(err, ErrNotInTransaction) {
		t.Fatalf("produce before Begin: %v, want ErrNotInTransaction", err)
	}
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Begin(ctx); !errors.Is(err, ErrTransactionInProgress) {
		t.Fatalf("second Begin: %v, want ErrTransactionInProgress", err)
	}
	h := c.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Partitions: []int32{1}, Err: kerr.NotEnoughReplicas, Count: -1})
	err := p.ForTopic("out").Produce(ctx, numbered("half", 20))
	h.Remove()
	if err == nil {
		t.Fatal("produce under the fault succeeded")
	}
	var ab *AbortableError
	if err := p.Commit(ctx); !errors.As(err, &ab) || !errors.Is(err, kafka.NotEnoughReplicas) {
		t.Fatalf("commit after a failed produce: %v, want an AbortableError naming the failure", err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("late", 1)); !errors.As(err, &ab) {
		t.Fatalf("produce in an abortable transaction: %v, want the AbortableError", err)
	}
	if err := p.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("ok", 20)); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := values(consume(t, c.Addrs, "out", 20, true)); !slices.Equal(got, wantValues("ok", 20)) {
		t.Fatalf("read_committed read %v", got)
	}
}

// TestTransactionRetriesCoordinatorErrors: the coordinator errors the
// protocol says to retry (a coordinator that moved or is loading, a
// previous transaction still completing) are retried, and the
// transaction commits.
func TestTransactionRetriesCoordinatorErrors(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	faults := []kfake.Fault{
		{Keys: []kmsg.Key{kmsg.InitProducerID}, TxnID: "tx-retry", TopLevel: true, Err: kerr.CoordinatorLoadInProgress, Count: 1},
		{Keys: []kmsg.Key{kmsg.AddPartitionsToTxn}, TxnID: "tx-retry", Err: kerr.ConcurrentTransactions, Count: 2},
		{Keys: []kmsg.Key{kmsg.EndTxn}, TxnID: "tx-retry", TopLevel: true, Err: kerr.NotCoordinator, Count: 1},
		{Keys: []kmsg.Key{kmsg.EndTxn}, TxnID: "tx-retry", TopLevel: true, Err: kerr.ConcurrentTransactions, Count: 1},
	}
	h := c.Cluster.Fault(faults...)
	defer h.Remove()
	p := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-retry", RetryBackoff: 5 * time.Millisecond})
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("r", 4)); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if h.Hits() != 5 {
		t.Fatalf("the faults answered %d requests, want 5", h.Hits())
	}
	if got := values(consume(t, c.Addrs, "out", 4, true)); !slices.Equal(got, wantValues("r", 4)) {
		t.Fatalf("read_committed read %v", got)
	}
}

// TestTransactionTimeout: a transaction left open past its timeout is
// aborted by the coordinator, which bumps the producer epoch: the late Commit
// fails (kfake, like Kafka's coordinator, answers PRODUCER_FENCED), none
// of its records is visible, and a new producer with the same
// transactional id carries on.
func TestTransactionTimeout(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	p := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-timeout", TransactionTimeout: 200 * time.Millisecond})
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("late", 5)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	if err := p.Commit(ctx); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("commit after the transaction timed out: %v, want ErrProducerFenced", err)
	}
	next := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-timeout"})
	if err := next.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := next.ForTopic("out").Produce(ctx, numbered("next", 2)); err != nil {
		t.Fatal(err)
	}
	if err := next.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := values(consume(t, c.Addrs, "out", 2, true)); !slices.Equal(got, wantValues("next", 2)) {
		t.Fatalf("read_committed read %v", got)
	}
}

// TestCommitWaitsForProduce: Commit waits for a Produce under way (the
// broker holds its request back) and commits its records; a Produce
// that starts while the commit is under way is refused with
// ErrNotInTransaction rather than slipping into the next transaction.
func TestCommitWaitsForProduce(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	started := make(chan struct{}, 1)
	c.Intercept(t, kmsg.Produce, func(_ int32, _ kmsg.Request) kafkatest.Action {
		select {
		case started <- struct{}{}:
		default:
		}
		return kafkatest.Action{Delay: 300 * time.Millisecond}
	})
	p := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-wait"})
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	produced := make(chan error, 1)
	go func() { produced <- p.ForTopic("out").Produce(ctx, numbered("slow", 10)) }()
	<-started
	committed := make(chan error, 1)
	go func() { committed <- p.Commit(ctx) }()
	// the commit is waiting for the produce: new calls are refused
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		ending := p.txn.state == txnEnding
		p.mu.Unlock()
		if ending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Commit did not start")
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("late", 1)); !errors.Is(err, ErrNotInTransaction) {
		t.Fatalf("produce during the commit: %v, want ErrNotInTransaction", err)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if got := values(consume(t, c.Addrs, "out", 10, true)); !slices.Equal(got, wantValues("slow", 10)) {
		t.Fatalf("read_committed read %v", got)
	}
}

// TestTransactionStaticMember: a static member's offsets commit with its
// group instance id; offsets naming another instance id are refused as
// a stale member (FENCED_INSTANCE_ID).
func TestTransactionStaticMember(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "in", 1)
	c.CreateTopic(t, "out", 1)
	member := joinGroup(t, c.Addrs, "static", "in", kgo.InstanceID("instance-1"))
	member.InstanceID = "instance-1"
	ctx := context.Background()
	p := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-static"})
	for _, tt := range []struct {
		instance string
		stale    bool
	}{{"instance-2", true}, {"instance-1", false}} {
		if err := p.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		m := member
		m.InstanceID = tt.instance
		err := p.SendOffsets(ctx, m, []Offset{{Topic: "in", Partition: 0, Offset: 7, LeaderEpoch: -1}})
		if tt.stale {
			if !errors.Is(err, ErrStaleMember) {
				t.Fatalf("offsets of instance %s: %v, want ErrStaleMember", tt.instance, err)
			}
			if err := p.Abort(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if at, _, ok := committedOffsets(t, c, "static", "in"); !ok || at != 7 {
		t.Fatalf("committed offset %d (found %v), want 7", at, ok)
	}
}

// TestRecoverAfterTransactionTimeout: a transaction left open past its
// timeout is aborted by the coordinator, which bumps the producer
// epoch; the producer then finds itself fenced, Recover takes the
// transactional id back (KIP-360), and the next transaction commits. The
// timed-out transaction's records are never visible.
func TestRecoverAfterTransactionTimeout(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	p := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-timeout", TransactionTimeout: time.Second})
	if err := p.Recover(ctx); err != nil {
		t.Fatalf("Recover of a producer that is not fenced: %v, want nil", err)
	}
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("late", 5)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // past the transaction timeout
	if err := p.Commit(ctx); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("Commit of a transaction past its timeout: %v, want ErrProducerFenced (the coordinator bumped the producer epoch)", err)
	}
	if err := p.Begin(ctx); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("Begin of a fenced producer: %v, want ErrProducerFenced", err)
	}
	if n := p.ProducerEpochJumps(); n != 0 {
		t.Fatalf("ProducerEpochJumps before the recovery = %d, want 0", n)
	}
	if err := p.Recover(ctx); err != nil {
		t.Fatalf("Recover after a transaction timeout: %v", err)
	}
	if n := p.ProducerEpochJumps(); n != 1 {
		t.Fatalf("ProducerEpochJumps after recovering from the coordinator's bump = %d, want 1", n)
	}
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("next", 5)); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := values(consume(t, c.Addrs, "out", 5, true)); !slices.Equal(got, wantValues("next", 5)) {
		t.Fatalf("read_committed read %v, want only the next transaction's records", got)
	}
}

// ProducerEpochJumps counts the producer epoch bumps others made (another
// producer's InitProducerID here), not the producer's own
// re-initializations after its aborts.
func TestProducerEpochJumps(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	p := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-jumps"})
	for range 3 { // own aborts: each re-initializes, one producer epoch up
		if err := p.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.ForTopic("out").Produce(ctx, numbered("a", 2)); err != nil {
			t.Fatal(err)
		}
		if err := p.Abort(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.ProducerEpochJumps(); n != 0 {
		t.Fatalf("ProducerEpochJumps after the producer's own aborts = %d, want 0", n)
	}
	other := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-jumps"})
	if err := other.Begin(ctx); err != nil { // fences p
		t.Fatal(err)
	}
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("b", 2)); err == nil {
		if err := p.Commit(ctx); !errors.Is(err, ErrProducerFenced) {
			t.Fatalf("Commit after another producer initialized the id: %v, want ErrProducerFenced", err)
		}
	}
	_ = p.Abort(ctx)
	if err := p.Recover(ctx); err != nil {
		t.Fatalf("Recover: %v (the embedded broker grants a stale producer epoch)", err)
	}
	if n := p.ProducerEpochJumps(); n != 1 {
		t.Fatalf("ProducerEpochJumps after another producer fenced this one = %d, want 1", n)
	}
}
