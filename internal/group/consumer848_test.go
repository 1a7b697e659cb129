package group

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// new848Cluster starts kfake with the consumer protocol's heartbeat
// interval and session timeout lowered for fast tests.
func new848Cluster(t *testing.T) *kafkatest.Cluster {
	return kafkatest.New(t, 1, kfake.BrokerConfigs(map[string]string{
		"group.consumer.heartbeat.interval.ms": "100",
		"group.consumer.session.timeout.ms":    "1500",
	}))
}

func config848(c *kafkatest.Cluster, assignor string) Config {
	cfg := testConfig(c, "g", "t")
	cfg.Protocol, cfg.RemoteAssignor = ProtocolConsumer, assignor
	return cfg
}

// Members on the consumer protocol split the partitions evenly with each
// remote assignor, never own one twice, and commit with their member
// epoch.
func TestConsumerProtocolAssignsAndCommits(t *testing.T) {
	for _, assignor := range []string{"uniform", "range"} {
		t.Run(assignor, func(t *testing.T) {
			c := new848Cluster(t)
			c.CreateTopic(t, "t", 6)
			c.CommitOffsets(t, "g", "t", map[int32]int64{0: 4})
			l := newLedger()
			a := startMember(t, l, "a", config848(c, assignor), memberOpts{commitOnRev: true})
			l.waitFor(t, 10*time.Second, "a owns all 6", func(o map[string][]offsetstore.TopicPartition) bool { return len(o["a"]) == 6 })
			as, _ := lastAssigned(l.eventsOf("a"))
			for _, p := range as.Partitions {
				if want := map[bool]int64{true: 4, false: -1}[p.Partition == 0]; p.Committed != want {
					t.Errorf("%s: committed %d, want %d", p.TopicPartition, p.Committed, want)
				}
			}
			if err := a.m.Commit(context.Background(), []Offset{{TopicPartition: offsetstore.TopicPartition{Topic: "t", Partition: 1}, Offset: 11, LeaderEpoch: 0}}); err != nil {
				t.Fatal(err)
			}
			if got := c.Committed(t, "g", "t"); got[1] != 11 {
				t.Fatalf("committed %v, want 1:11", got)
			}
			startMember(t, l, "b", config848(c, assignor), memberOpts{commitOnRev: true})
			startMember(t, l, "c", config848(c, assignor), memberOpts{commitOnRev: true})
			l.waitFor(t, 15*time.Second, "2 each", func(o map[string][]offsetstore.TopicPartition) bool {
				return slices.Equal(counts(o, "a", "b", "c"), []int{2, 2, 2})
			})
			// What a revoked to the others it committed first.
			var revoked []offsetstore.TopicPartition
			for _, ev := range l.eventsOf("a") {
				if r, ok := ev.(Revoke); ok {
					revoked = append(revoked, r.Partitions...)
				}
			}
			if len(revoked) != 4 {
				t.Errorf("a revoked %v, want the 4 partitions that moved", revoked)
			}
			if err := l.err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A static member on the consumer protocol that restarts within the
// session timeout gets its partitions back; the other member revokes
// nothing.
func TestConsumerProtocolStaticRestart(t *testing.T) {
	c := new848Cluster(t)
	c.CreateTopic(t, "t", 4)
	l := newLedger()
	cfgFor := func(id string) Config {
		cfg := config848(c, "")
		cfg.InstanceID = "i-" + id
		return cfg
	}
	startMember(t, l, "a", cfgFor("a"), memberOpts{commitOnRev: true})
	b := startMember(t, l, "b", cfgFor("b"), memberOpts{commitOnRev: true})
	l.waitFor(t, 10*time.Second, "2 each", func(o map[string][]offsetstore.TopicPartition) bool {
		return slices.Equal(counts(o, "a", "b"), []int{2, 2})
	})
	before := l.owned()
	aEvents := len(l.eventsOf("a"))
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	startMember(t, l, "b2", cfgFor("b"), memberOpts{commitOnRev: true})
	l.waitFor(t, 5*time.Second, "b2 owns b's partitions", func(o map[string][]offsetstore.TopicPartition) bool {
		return slices.Equal(o["b2"], before["b"])
	})
	for _, ev := range l.eventsOf("a")[aEvents:] {
		if r, ok := ev.(Revoke); ok {
			t.Errorf("a revoked %v after b's restart", r.Partitions)
		}
	}
	if !slices.Equal(l.owned()["a"], before["a"]) {
		t.Errorf("a owns %v, want %v", l.owned()["a"], before["a"])
	}
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}

// The coordinator moves a member to a new member epoch when it answers a
// heartbeat, often with its partitions unchanged (here: another member
// joins, subscribed to another topic), and Kafka before 4.3 refuses a
// commit under any other member epoch (STALE_MEMBER_EPOCH). A commit
// refused so while the member still owns its partitions is sent again
// under the new member epoch: it succeeds, rather than reporting the
// generation ended, which would leave the owner, told of no new
// assignment, never committing again.
func TestConsumerProtocolCommitRetriesStaleEpoch(t *testing.T) {
	c := new848Cluster(t)
	c.CreateTopic(t, "t", 2)
	c.CreateTopic(t, "u", 1)
	l := newLedger()
	a := startMember(t, l, "a", config848(c, ""), memberOpts{commitOnRev: true})
	l.waitFor(t, 10*time.Second, "a owns both", func(o map[string][]offsetstore.TopicPartition) bool { return len(o["a"]) == 2 })
	as, _ := lastAssigned(l.eventsOf("a"))
	first := int32(as.Generation)
	assignedBefore := len(l.eventsOf("a"))

	// kfake accepts a commit under an older member epoch (KIP-1251); Kafka 4.1
	// does not: refuse those under the first member epoch as it would.
	var refused atomic.Int32
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if r.Generation != first {
			return nil, nil, false
		}
		refused.Add(1)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, kerr.StaleMemberEpoch.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	done := make(chan error, 1)
	go func() {
		done <- a.m.Commit(context.Background(), []Offset{{TopicPartition: offsetstore.TopicPartition{Topic: "t", Partition: 1}, Offset: 11, LeaderEpoch: 0}})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for refused.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if refused.Load() == 0 {
		t.Fatal("the commit never reached the coordinator under the first member epoch")
	}
	// b moves the group, and a at its next heartbeat, to a new member epoch
	bcfg := config848(c, "")
	bcfg.Topics = []string{"u"}
	startMember(t, l, "b", bcfg, memberOpts{commitOnRev: true})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("commit: %v (fenced: %v)", err, errors.Is(err, offsets.ErrGenerationEnded))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the commit did not return")
	}
	if got := c.Committed(t, "g", "t"); got[1] != 11 {
		t.Errorf("committed %v, want 1:11", got)
	}
	if n := len(l.eventsOf("a")); n != assignedBefore {
		t.Errorf("a had %d more events; its partitions were not to change", n-assignedBefore)
	}
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}

// On a broker without the consumer group protocol, Run fails at the first
// join, at once, with ErrConsumerProtocolUnsupported naming the broker's
// release (from the metadata.version it supports) and the setting to
// change, and hands out no partition: whether the broker lacks
// ConsumerGroupHeartbeat (Kafka 3.6) or lists it and answers
// UNSUPPORTED_VERSION (3.7 to 3.9 without the preview enabled, as real
// 3.7.2 and 3.9.1 brokers do).
func TestConsumerProtocolRefusedByOldBroker(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version *kversion.Versions
		refuse  bool // answer ConsumerGroupHeartbeat UNSUPPORTED_VERSION
		want    []string
	}{
		{"3.6 lacks the API", kversion.V3_6_0(), false,
			[]string{"Apache Kafka 3.6 (metadata.version 14)", "does not support ConsumerGroupHeartbeat"}},
		{"3.9 refuses it", kversion.V3_9_0(), true,
			[]string{"Apache Kafka 3.9 (metadata.version 21)", "UNSUPPORTED_VERSION"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafkatest.New(t, 1, kfake.MaxVersions(tc.version))
			c.CreateTopic(t, "t", 2)
			var heartbeats atomic.Int32
			c.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				heartbeats.Add(1)
				if !tc.refuse {
					return nil, nil, false
				}
				resp := req.(*kmsg.ConsumerGroupHeartbeatRequest).ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
				resp.ErrorCode = kerr.UnsupportedVersion.Code
				return resp, nil, true
			})
			l := newLedger()
			a := startMember(t, l, "a", config848(c, ""), memberOpts{})
			var err error
			select {
			case err = <-a.done:
				close(a.done) // for a.stop in the cleanup
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not fail on a broker without the consumer group protocol")
			}
			t.Log(err)
			if !errors.Is(err, ErrConsumerProtocolUnsupported) {
				t.Fatalf("Run returned %v, want ErrConsumerProtocolUnsupported", err)
			}
			for _, s := range append(tc.want, "set consumer.group_protocol: classic", `group "g"`, c.Addrs[0]) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error does not say %q", s)
				}
			}
			if n := heartbeats.Load(); tc.refuse && n != 1 || !tc.refuse && n != 0 {
				t.Errorf("%d heartbeats reached the broker, want %d (the member must give up at once, not retry)", n, map[bool]int{true: 1}[tc.refuse])
			}
			if o := l.owned(); total(o) != 0 {
				t.Fatalf("partitions handed out: %v", o)
			}
		})
	}
}
