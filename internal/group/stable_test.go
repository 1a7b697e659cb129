package group

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// openOffsetTxn does what a partition's previous owner does under
// exactly-once before its EndTxn: it begins a transaction (transactional
// id txnID) that commits offs for group (InitProducerID, AddOffsetsToTxn,
// TxnOffsetCommit with no generation, as the group is empty). end ends
// the transaction, committing or aborting it.
func openOffsetTxn(t *testing.T, k *kafkatest.Kafka, txnID, group, topic string, offs map[int32]int64) (end func(commit bool)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// retry sends a request until it is answered without a retriable
	// error (a real coordinator loads, or the previous producer epoch's
	// transaction is still ending).
	retry := func(what string, send func() (int16, error)) {
		t.Helper()
		for {
			code, err := send()
			if err == nil {
				err = kerr.ErrorForCode(code)
			}
			if err == nil {
				return
			}
			if !kerr.IsRetriable(err) && !errors.Is(err, kerr.ConcurrentTransactions) || ctx.Err() != nil {
				t.Fatalf("%s: %v", what, err)
			}
			t.Logf("%s: %v; retrying", what, err)
			time.Sleep(50 * time.Millisecond)
		}
	}
	md, err := k.Admin.Metadata(ctx, topic)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	topicID := md.Topics[topic].ID // TxnOffsetCommit v6+ names topics by id
	var pid int64
	var producerEpoch int16
	retry("InitProducerID", func() (int16, error) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(txnID), 60_000
		resp, err := req.RequestWith(ctx, k.Client)
		if err != nil {
			return 0, err
		}
		pid, producerEpoch = resp.ProducerID, resp.ProducerEpoch
		return resp.ErrorCode, nil
	})
	retry("AddOffsetsToTxn", func() (int16, error) {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, pid, producerEpoch, group
		resp, err := req.RequestWith(ctx, k.Client)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
	retry("TxnOffsetCommit", func() (int16, error) {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, group, pid, producerEpoch
		req.Generation, req.MemberID = -1, ""
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		for p, o := range offs {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, k.Client)
		if err != nil {
			return 0, err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode, nil
				}
			}
		}
		return 0, nil
	})
	ended := false
	end = func(commit bool) {
		t.Helper()
		if ended {
			return
		}
		ended = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, producerEpoch, commit
		resp, err := req.RequestWith(ctx, k.Client)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			t.Fatalf("EndTxn (commit %v): %v", commit, err)
		}
	}
	t.Cleanup(func() { end(false) })
	return end
}

// fetchLog records the OffsetFetch requests (v7 and below, whose group is
// a top-level field) the brokers receive for one group.
type fetchLog struct {
	mu   sync.Mutex
	reqs []kmsg.OffsetFetchRequest
}

func recordFetches(t *testing.T, k *kafkatest.Kafka, group string) *fetchLog {
	f := &fetchLog{}
	k.Intercept(t, kmsg.OffsetFetch, func(_ int32, req kmsg.Request) kafkatest.Action {
		if r := req.(*kmsg.OffsetFetchRequest); r.Group == group {
			f.mu.Lock()
			f.reqs = append(f.reqs, *r)
			f.mu.Unlock()
		}
		return kafkatest.Action{}
	})
	return f
}

func (f *fetchLog) all() []kmsg.OffsetFetchRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// checkFetches fails unless every recorded request went out at version
// 7 with RequireStable as wanted.
func (f *fetchLog) checkFetches(t *testing.T, requireStable bool) {
	t.Helper()
	for i, r := range f.all() {
		if r.Version != maxOffsetFetch || r.RequireStable != requireStable {
			t.Errorf("OffsetFetch %d: v%d RequireStable %v, want v%d RequireStable %v", i, r.Version, r.RequireStable, maxOffsetFetch, requireStable)
		}
	}
}

// stableScenario: the previous owner of t/0 has committed offset 10 in a
// transaction that is still open (t/0's committed offset is 5, t/1's 3).
// A member with RequireStable must not be handed t/0 at 5: it waits,
// heartbeating (for hold, which should exceed its session timeout, and
// then through a rebalance when a second member joins), and once the
// transaction commits every member is handed t/0 at 10. Without
// RequireStable the member is handed the stale 5 at once: the
// duplicates this prevents.
func stableScenario(t *testing.T, k *kafkatest.Kafka, cfg func(group, topic string) Config, requireStable bool, hold time.Duration) {
	topic, group := k.Name("t"), k.Name("g")
	k.CreateTopic(t, topic, 2)
	k.CommitOffsets(t, group, topic, map[int32]int64{0: 5, 1: 3})
	end := openOffsetTxn(t, k, k.Name("txn"), group, topic, map[int32]int64{0: 10})
	fetches := recordFetches(t, k, group)
	var syncs sync.Map // the classic protocol's SyncGroup requests, by generation
	k.Intercept(t, kmsg.SyncGroup, func(_ int32, req kmsg.Request) kafkatest.Action {
		if r := req.(*kmsg.SyncGroupRequest); r.Group == group {
			syncs.Store(r.Generation, true)
		}
		return kafkatest.Action{}
	})
	l := newLedger()
	c := cfg(group, topic)
	c.RequireStable = requireStable
	t0 := offsetstore.TopicPartition{Topic: topic, Partition: 0}
	startMember(t, l, "a", c, memberOpts{commitOnRev: false})

	if !requireStable {
		l.waitFor(t, 20*time.Second, "a owns both", func(o map[string][]offsetstore.TopicPartition) bool { return len(o["a"]) == 2 })
		as, _ := lastAssigned(l.eventsOf("a"))
		for _, p := range as.Partitions {
			if p.TopicPartition == t0 && p.Committed != 5 {
				t.Errorf("without RequireStable %s was handed at %d, want the stale 5 (the transaction is open)", t0, p.Committed)
			}
		}
		fetches.checkFetches(t, false)
		return
	}

	// While the transaction is open, a is asked about t/0 and t/1
	// together: it fetches again and again, is handed neither, and is
	// still a member after more than a session timeout.
	want := map[int32]int64{0: 10, 1: 3}
	// handedRight fails the test if a member was handed t/0 (while the
	// transaction is open) or a partition at an offset other than its
	// final one. (Apache Kafka hands t/1 out, as no transaction has an
	// offset of it pending; kfake refuses every partition of the group.)
	handedRight := func(open bool) {
		t.Helper()
		for _, name := range []string{"a", "b"} {
			for _, ev := range l.eventsOf(name) {
				switch ev := ev.(type) {
				case Assigned:
					for _, p := range ev.Partitions {
						if open && p.TopicPartition == t0 {
							t.Fatalf("%s was handed %s at %d while the transaction committing its offset is open", name, t0, p.Committed)
						}
						if p.Topic != topic || p.Committed != want[p.Partition] {
							t.Fatalf("%s was handed %s at %d, want %d", name, p.TopicPartition, p.Committed, want[p.Partition])
						}
					}
				case Lost:
					t.Fatalf("%s lost its partitions while waiting for stable offsets: %v", name, ev.Err)
				}
			}
		}
	}
	for deadline := time.Now().Add(20 * time.Second); len(fetches.all()) < 5; time.Sleep(20 * time.Millisecond) {
		handedRight(true)
		if time.Now().After(deadline) {
			t.Fatalf("saw %d OffsetFetch requests in 20s, want at least 5", len(fetches.all()))
		}
	}
	time.Sleep(hold)
	handedRight(true)
	if o := l.owned(); len(o["a"]) != 0 {
		t.Fatalf("a was handed %v while the transaction is open; both of its partitions' offsets were fetched together", o["a"])
	}
	gens := 0
	syncs.Range(func(_, _ any) bool { gens++; return true })
	if c.Protocol == ProtocolClassic && gens != 1 {
		t.Errorf("a synced %d generations, want 1: it rejoined instead of waiting in its generation for stable offsets", gens)
	}
	// A second member joins while a waits: the assignment changes under
	// the wait.
	startMember(t, l, "b", c, memberOpts{commitOnRev: true})
	time.Sleep(hold)
	handedRight(true)
	end(true)
	l.waitFor(t, 30*time.Second, "both partitions owned", func(o map[string][]offsetstore.TopicPartition) bool { return total(o) == 2 })
	handedRight(false)
	fetches.checkFetches(t, true)
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}

// requireStableCases are both protocols, with and without RequireStable.
var requireStableCases = []struct {
	name          string
	protocol      string
	requireStable bool
}{
	{"classic/require stable", ProtocolClassic, true},
	{"classic/without", ProtocolClassic, false},
	{"consumer/require stable", ProtocolConsumer, true},
	{"consumer/without", ProtocolConsumer, false},
}

// kfake answers UNSTABLE_OFFSET_COMMIT to a RequireStable fetch of a group
// any open transaction has offsets for (all its partitions; Apache Kafka
// only those with pending offsets).
func TestRequireStableWaitsForPendingTransaction(t *testing.T) {
	for _, tc := range requireStableCases {
		t.Run(tc.name, func(t *testing.T) {
			var c *kafkatest.Cluster
			if tc.protocol == ProtocolConsumer {
				c = new848Cluster(t)
			} else {
				c = kafkatest.New(t, 1)
			}
			cfg := testConfig(c, "g", "t")
			stableScenario(t, c.Kafka, func(group, topic string) Config {
				cfg := testConfig(c, group, topic)
				cfg.Protocol = tc.protocol
				return cfg
			}, tc.requireStable, cfg.SessionTimeout+cfg.SessionTimeout/2)
		})
	}
}

// A coordinator may answer UNSTABLE_OFFSET_COMMIT for the whole request
// (the top-level error code) rather than per partition: the member waits
// and asks again in its generation, and is handed the offsets once they
// are stable. A heartbeat's connection cut while it waits is dialled
// again for the next fetch.
func TestRequireStableRetriesTopLevelUnstable(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "t", 2)
	c.CommitOffsets(t, "g", "t", map[int32]int64{1: 4})
	fetches := recordFetches(t, c.Kafka, "g") // runs before the refusals below
	const refusals = 8
	var mu sync.Mutex
	answered, cut := 0, false
	c.ControlKey(int16(kmsg.OffsetFetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.OffsetFetchRequest)
		mu.Lock()
		defer mu.Unlock()
		if req.Group != "g" || answered >= refusals {
			return nil, nil, false
		}
		answered++
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.UnstableOffsetCommit.Code
		return resp, nil, true
	})
	c.Intercept(t, kmsg.Heartbeat, func(_ int32, req kmsg.Request) kafkatest.Action {
		mu.Lock()
		defer mu.Unlock()
		if req.(*kmsg.HeartbeatRequest).Group == "g" && answered > 0 && answered < refusals && !cut {
			cut = true
			return kafkatest.Action{Cut: true}
		}
		return kafkatest.Action{}
	})
	var syncs sync.Map // SyncGroup requests, by generation
	c.Intercept(t, kmsg.SyncGroup, func(_ int32, req kmsg.Request) kafkatest.Action {
		syncs.Store(req.(*kmsg.SyncGroupRequest).Generation, true)
		return kafkatest.Action{}
	})
	l := newLedger()
	cfg := testConfig(c, "g", "t")
	cfg.RequireStable = true
	cfg.RetryBackoff = 100 * time.Millisecond // a heartbeat (every 100ms) falls between refusals
	startMember(t, l, "a", cfg, memberOpts{})
	l.waitFor(t, 10*time.Second, "a owns both", func(o map[string][]offsetstore.TopicPartition) bool { return len(o["a"]) == 2 })
	mu.Lock()
	n, wasCut := answered, cut
	mu.Unlock()
	if n != refusals {
		t.Fatalf("%d fetches refused, want %d", n, refusals)
	}
	if !wasCut {
		t.Fatal("no heartbeat was sent (and cut) while the member waited")
	}
	var assigned []Assigned
	for _, ev := range l.eventsOf("a") {
		if as, ok := ev.(Assigned); ok && len(as.Partitions) > 0 {
			assigned = append(assigned, as)
		}
	}
	if len(assigned) != 1 {
		t.Fatalf("assigned %v, want one Assigned with both partitions", assigned)
	}
	for _, p := range assigned[0].Partitions {
		if want := map[int32]int64{0: -1, 1: 4}[p.Partition]; p.Committed != want {
			t.Errorf("%s handed at %d, want %d", p.TopicPartition, p.Committed, want)
		}
	}
	// It waited in its generation: no rejoin, no rebalance.
	gens := 0
	syncs.Range(func(_, _ any) bool { gens++; return true })
	if gens != 1 {
		t.Errorf("synced %d generations, want 1: the member rejoined instead of waiting for stable offsets", gens)
	}
	if got := len(fetches.all()); got != refusals+1 {
		t.Fatalf("saw %d OffsetFetch requests, want %d refused and one answered", got, refusals)
	}
	fetches.checkFetches(t, true)
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}

// On a broker without OffsetFetch v7 (Kafka 2.4, the oldest the member
// supports) the member fetches at v6 as before, unless RequireStable is
// set: then Run fails with ErrUnsupportedBroker rather than hand out
// offsets a transaction may be about to move.
func TestRequireStableNeedsOffsetFetchV7(t *testing.T) {
	for _, requireStable := range []bool{false, true} {
		t.Run(map[bool]string{false: "without", true: "require stable"}[requireStable], func(t *testing.T) {
			c := kafkatest.New(t, 1, kfake.MaxVersions(kversion.V2_4_0()))
			c.CreateTopic(t, "t", 1)
			c.CommitOffsets(t, "g", "t", map[int32]int64{0: 6})
			var mu sync.Mutex
			var versions []int16
			c.Intercept(t, kmsg.OffsetFetch, func(_ int32, req kmsg.Request) kafkatest.Action {
				if r := req.(*kmsg.OffsetFetchRequest); r.Group == "g" {
					mu.Lock()
					versions = append(versions, r.Version)
					mu.Unlock()
				}
				return kafkatest.Action{}
			})
			l := newLedger()
			cfg := testConfig(c, "g", "t")
			cfg.RequireStable = requireStable
			a := startMember(t, l, "a", cfg, memberOpts{})
			if !requireStable {
				l.waitFor(t, 10*time.Second, "a owns t/0", func(o map[string][]offsetstore.TopicPartition) bool { return len(o["a"]) == 1 })
				as, _ := lastAssigned(l.eventsOf("a"))
				if len(as.Partitions) != 1 || as.Partitions[0].Committed != 6 {
					t.Fatalf("assigned %v, want t/0 at 6", as.Partitions)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(versions) == 0 || slices.ContainsFunc(versions, func(v int16) bool { return v != 6 }) {
					t.Fatalf("OffsetFetch versions %v, want v6", versions)
				}
				return
			}
			select {
			case err := <-a.done:
				close(a.done) // for a.stop in the cleanup
				if !errors.Is(err, ErrUnsupportedBroker) {
					t.Fatalf("Run returned %v, want ErrUnsupportedBroker", err)
				}
				t.Log(err)
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not fail on a broker without OffsetFetch v7")
			}
			if o := l.owned(); total(o) != 0 {
				t.Fatalf("partitions handed out: %v", o)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(versions) != 0 {
				t.Fatalf("OffsetFetch sent at versions %v, want none", versions)
			}
		})
	}
}
