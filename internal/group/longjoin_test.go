package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// joinThenDie makes a member of group that joins and syncs once (with the
// given session timeout) and then never heartbeats again, as a process
// SIGKILLed right after a rebalance. It returns when the member synced.
func joinThenDie(t *testing.T, c *kafkatest.Cluster, group, topic string, session, rebalance time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	meta := encodeSubscription([]string{topic}, map[string][]int32{}, -1, "", nil)
	var memberID string
	var jr *kmsg.JoinGroupResponse
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = group, memberID, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = int32(session.Milliseconds()), int32(rebalance.Milliseconds())
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = CooperativeSticky, meta
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, c.Client)
		if err != nil {
			t.Fatalf("dead member's JoinGroup: %v", err)
		}
		if resp.ErrorCode == kerr.MemberIDRequired.Code {
			memberID = resp.MemberID
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			t.Fatalf("dead member's JoinGroup: %v", err)
		}
		jr = resp
		break
	}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Group, sreq.Generation, sreq.MemberID = group, jr.Generation, jr.MemberID
	sreq.ProtocolType, sreq.Protocol = kmsg.StringPtr("consumer"), jr.Protocol
	sresp, err := sreq.RequestWith(ctx, c.Client)
	if err != nil {
		t.Fatalf("dead member's SyncGroup: %v", err)
	}
	if err := kerr.ErrorForCode(sresp.ErrorCode); err != nil {
		t.Fatalf("dead member's SyncGroup: %v", err)
	}
}

// TestLongJoinIsNotALostSession: a member whose JoinGroup the coordinator
// holds for the rebalance timeout while it waits for a dead member, longer
// than the member may go without a heartbeat answer, and whose SyncGroup
// is then answered REBALANCE_IN_PROGRESS (on Apache Kafka: a restarted
// instance joined meanwhile, as in a kill loop), is still in the group.
// The JoinGroup and SyncGroup answers prove it: it rejoins and keeps its
// partitions, with no Lost event (which drops every in-flight record of
// its partitions and makes their next owner redo them).
//
// (kfake, unlike Apache Kafka, expires a member waiting in JoinGroup at
// its session timeout, so the hold must end inside the session timeout:
// the member's own limit is a little below it, 5.5s of a 6s session with
// 100ms heartbeats, and the rebalance timeout, 5.7s, lies between.)
func TestLongJoinIsNotALostSession(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "t", 4)
	l := newLedger()
	cfg := testConfig(c, "g", "t")
	cfg.SessionTimeout, cfg.RebalanceTimeout = 6*time.Second, 5700*time.Millisecond
	// (a revokes slowly enough for the dead member to sync first)
	startMember(t, l, "a", cfg, memberOpts{revokeDelay: 500 * time.Millisecond})
	l.waitFor(t, 10*time.Second, "a owns all 4", func(o map[string][]offsetstore.TopicPartition) bool { return len(o["a"]) == 4 })

	// The dead member joins (generation 2: the cooperative assignor moves
	// nothing to it yet, a revokes two partitions and rejoins for
	// generation 3) and dies; the coordinator holds a's JoinGroup of
	// generation 3 for the rebalance timeout, waiting for it.
	joinThenDie(t, c, "g", "t", 10*time.Second, cfg.RebalanceTimeout)
	died := time.Now()
	refused := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.SyncGroup}, Group: "g", TopLevel: true, Err: kerr.RebalanceInProgress,
		When: func(r kmsg.Request) bool { return r.(*kmsg.SyncGroupRequest).Generation >= 3 }})
	defer refused.Remove()

	l.waitFor(t, 20*time.Second, "a owns all 4 in generation 3 or later", func(o map[string][]offsetstore.TopicPartition) bool {
		return len(o["a"]) == 4 && generationOf(l.eventsOf("a")) >= 3
	})
	if held := time.Since(died); held < 5*time.Second {
		t.Fatalf("a settled %v after the dead member's last word: the JoinGroup was not held past a's limit, the test proves nothing", held)
	}
	if n := refused.Hits(); n != 1 {
		t.Fatalf("%d SyncGroup requests refused, want 1", n)
	}
	for _, ev := range l.eventsOf("a") {
		if lost, ok := ev.(Lost); ok {
			t.Fatalf("a lost %v after a long JoinGroup: %v", lost.Partitions, lost.Err)
		}
	}
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}
