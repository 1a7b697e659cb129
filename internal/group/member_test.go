package group

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

func TestJoinAssignsEveryPartitionWithCommittedOffsets(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "t", 4)
	c.CommitOffsets(t, "g", "t", map[int32]int64{2: 5})
	l := newLedger()
	a := startMember(t, l, "a", testConfig(c, "g", "t"), memberOpts{})
	l.waitFor(t, 10*time.Second, "a owns all 4", func(o map[string][]offsetstore.TopicPartition) bool { return len(o["a"]) == 4 })
	as, _ := lastAssigned(l.eventsOf("a"))
	for _, p := range as.Partitions {
		want := int64(-1)
		if p.Partition == 2 {
			want = 5
		}
		if p.Committed != want {
			t.Errorf("%s: committed %d, want %d", p.TopicPartition, p.Committed, want)
		}
	}
	// A commit under the generation lands, with its leader epoch.
	if err := a.m.Commit(context.Background(), []Offset{{TopicPartition: offsetstore.TopicPartition{Topic: "t", Partition: 1}, Offset: 9, LeaderEpoch: 0}}); err != nil {
		t.Fatal(err)
	}
	if got := c.Committed(t, "g", "t"); got[1] != 9 || got[2] != 5 {
		t.Fatalf("committed %v, want 1:9 2:5", got)
	}
	// A partition not assigned to the member is refused locally.
	err := a.m.Commit(context.Background(), []Offset{{TopicPartition: offsetstore.TopicPartition{Topic: "t", Partition: 9}, Offset: 1}})
	if !errors.Is(err, offsets.ErrGenerationEnded) {
		t.Fatalf("commit of an unassigned partition: %v, want ErrGenerationEnded", err)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}

func TestAssignorsBalanceTwoAndThreeMembers(t *testing.T) {
	for _, assignor := range []string{CooperativeSticky, Range, RoundRobin} {
		for _, n := range []int{2, 3} {
			t.Run(assignor+"/"+string(rune('0'+n)), func(t *testing.T) {
				c := kafkatest.New(t, 1)
				c.CreateTopic(t, "t", 6)
				c.CreateTopic(t, "u", 3)
				l := newLedger()
				var names []string
				for i := range n {
					name := string(rune('a' + i))
					names = append(names, name)
					cfg := testConfig(c, "g", "t", "u")
					cfg.Assignors = []string{assignor}
					startMember(t, l, name, cfg, memberOpts{commitOnRev: true})
				}
				l.waitFor(t, 20*time.Second, "9 partitions balanced", func(o map[string][]offsetstore.TopicPartition) bool {
					cs := counts(o, names...)
					return total(o) == 9 && slices.Max(cs)-slices.Min(cs) <= 1+boolInt(assignor == Range)
				})
				if err := l.err(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A third member joining a cooperative group takes partitions from the
// others; they revoke only what moves and keep the rest without a revoke.
func TestCooperativeRebalanceRevokesOnlyWhatMoves(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "t", 6)
	l := newLedger()
	cfg := testConfig(c, "g", "t")
	// Nobody leaves in this test: a session far longer than the test
	// keeps a member starved of CPU (the race detector on a loaded
	// 2-core machine) from losing its session, which would release its
	// partitions without the revoke the test checks for.
	cfg.SessionTimeout, cfg.RebalanceTimeout = 15*time.Second, 15*time.Second
	startMember(t, l, "a", cfg, memberOpts{commitOnRev: true})
	startMember(t, l, "b", cfg, memberOpts{commitOnRev: true})
	l.waitFor(t, 10*time.Second, "a and b own 3 each", func(o map[string][]offsetstore.TopicPartition) bool {
		return slices.Equal(counts(o, "a", "b"), []int{3, 3})
	})
	time.Sleep(300 * time.Millisecond) // let a second cooperative round settle
	before := l.owned()
	seen := map[string]int{"a": len(l.eventsOf("a")), "b": len(l.eventsOf("b"))}
	startMember(t, l, "c", cfg, memberOpts{commitOnRev: true})
	l.waitFor(t, 10*time.Second, "2 each", func(o map[string][]offsetstore.TopicPartition) bool {
		return slices.Equal(counts(o, "a", "b", "c"), []int{2, 2, 2})
	})
	after := l.owned()
	for _, name := range []string{"a", "b"} {
		var revoked []offsetstore.TopicPartition
		for _, ev := range l.eventsOf(name)[seen[name]:] {
			if r, ok := ev.(Revoke); ok {
				revoked = append(revoked, r.Partitions...)
			}
		}
		if len(revoked) != 1 {
			t.Errorf("%s revoked %v, want exactly the one partition that moved; its events since c joined: %v",
				name, revoked, l.eventsOf(name)[seen[name]:])
		}
		for _, p := range after[name] {
			if !slices.Contains(before[name], p) {
				t.Errorf("%s gained %s; a sticky rebalance only moves partitions to the new member", name, p)
			}
		}
	}
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
	// Commits made while revoking landed.
	got := c.Committed(t, "g", "t")
	for _, p := range after["c"] {
		if got[p.Partition] != 7 {
			t.Errorf("%s: committed %d on revoke, want 7", p, got[p.Partition])
		}
	}
}

// A static member that restarts within the session timeout gets its
// partitions back, and the other member revokes nothing. With an eager
// assignor (whose subscription does not change across a restart) the
// restart is invisible: same generation, no event at all for the other
// member. With cooperative-sticky the restarted member's subscription no
// longer lists owned partitions; Apache Kafka still skips the rebalance
// (it compares only the selected protocol), but kfake compares the
// subscription bytes and runs one, so on kfake the check is that the
// rebalance moves nothing and revokes nothing.
func TestStaticMemberRestartKeepsAssignment(t *testing.T) {
	for _, assignor := range []string{Range, CooperativeSticky} {
		for _, restart := range []string{"a", "b"} {
			t.Run(assignor+"/restart "+restart, func(t *testing.T) {
				c := kafkatest.New(t, 1)
				c.CreateTopic(t, "t", 4)
				l := newLedger()
				cfgFor := func(id string) Config {
					cfg := testConfig(c, "g", "t")
					cfg.SessionTimeout = 6 * time.Second
					cfg.InstanceID = "i-" + id
					cfg.Assignors = []string{assignor}
					return cfg
				}
				members := map[string]*running{}
				for _, n := range []string{"a", "b"} {
					members[n] = startMember(t, l, n, cfgFor(n), memberOpts{commitOnRev: true})
				}
				l.waitFor(t, 10*time.Second, "2 each", func(o map[string][]offsetstore.TopicPartition) bool {
					return slices.Equal(counts(o, "a", "b"), []int{2, 2})
				})
				time.Sleep(300 * time.Millisecond) // let any second round settle
				before := l.owned()
				other := map[string]string{"a": "b", "b": "a"}[restart]
				otherEvents := len(l.eventsOf(other))
				gen := generationOf(l.eventsOf(restart))
				if err := members[restart].stop(t); err != nil {
					t.Fatal(err)
				}
				again := restart + "2"
				startMember(t, l, again, cfgFor(restart), memberOpts{commitOnRev: true})
				l.waitFor(t, 5*time.Second, "the restarted member owns its partitions", func(o map[string][]offsetstore.TopicPartition) bool {
					return slices.Equal(o[again], before[restart])
				})
				time.Sleep(500 * time.Millisecond)
				if !slices.Equal(l.owned()[other], before[other]) {
					t.Errorf("%s owns %v after the restart, want %v", other, l.owned()[other], before[other])
				}
				after := l.eventsOf(other)[otherEvents:]
				if assignor == Range {
					if g := generationOf(l.eventsOf(again)); g != gen {
						t.Errorf("restarted member joined generation %d, want %d (no rebalance)", g, gen)
					}
					if len(after) != 0 {
						t.Errorf("%s saw events after the restart, want none (no rebalance): %v", other, after)
					}
				}
				for _, ev := range after {
					if r, ok := ev.(Revoke); ok {
						t.Errorf("%s revoked %v after the restart", other, r.Partitions)
					}
				}
				if err := l.err(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// A static member that stops without leaving keeps its partitions until
// its session expires; then they move. With LeaveOnClose they move at
// once.
func TestSessionExpiryMovesPartitions(t *testing.T) {
	for _, leave := range []bool{false, true} {
		name := "no leave"
		if leave {
			name = "leave on close"
		}
		t.Run(name, func(t *testing.T) {
			c := kafkatest.New(t, 1)
			c.CreateTopic(t, "t", 4)
			l := newLedger()
			cfg := testConfig(c, "g", "t")
			// a session long enough that a leave (well under a second)
			// and an expiry cannot be confused, even on a loaded machine
			cfg.SessionTimeout, cfg.RebalanceTimeout = 6*time.Second, 6*time.Second
			a := startMember(t, l, "a", cfg, memberOpts{})
			cfgB := cfg
			cfgB.InstanceID, cfgB.LeaveOnClose = "i-b", leave
			b := startMember(t, l, "b", cfgB, memberOpts{})
			l.waitFor(t, 10*time.Second, "2 each", func(o map[string][]offsetstore.TopicPartition) bool {
				return slices.Equal(counts(o, "a", "b"), []int{2, 2})
			})
			stopped := time.Now()
			if err := b.stop(t); err != nil {
				t.Fatal(err)
			}
			l.waitFor(t, 10*time.Second, "a owns all 4", func(o map[string][]offsetstore.TopicPartition) bool { return len(o["a"]) == 4 })
			took := time.Since(stopped)
			if leave && took > 3*time.Second {
				t.Errorf("partitions moved %v after a leave, want well under the 6s session timeout", took)
			}
			if !leave && took < 5*time.Second {
				t.Errorf("partitions moved %v after a static member stopped, want about the 6s session timeout", took)
			}
			_ = a
			if err := l.err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A commit made while the coordinator is already in the next generation
// is fenced with ErrGenerationEnded.
func TestCommitFencedAfterRebalance(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "t", 4)
	l := newLedger()
	cfg := testConfig(c, "g", "t")
	cfg.InstanceID = "i-a"
	a := startMember(t, l, "a", cfg, memberOpts{})
	l.waitFor(t, 10*time.Second, "a owns all 4", func(o map[string][]offsetstore.TopicPartition) bool { return len(o["a"]) == 4 })
	held := make(chan struct{}, 1)
	c.Intercept(t, kmsg.SyncGroup, func(_ int32, req kmsg.Request) kafkatest.Action {
		if r := req.(*kmsg.SyncGroupRequest); r.InstanceID != nil && *r.InstanceID == "i-a" && r.Generation > 1 {
			select {
			case held <- struct{}{}:
				return kafkatest.Action{Delay: time.Second}
			default:
			}
		}
		return kafkatest.Action{}
	})
	startMember(t, l, "b", testConfig(c, "g", "t"), memberOpts{})
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("a never synced a second generation")
	}
	err := a.m.Commit(context.Background(), []Offset{{TopicPartition: offsetstore.TopicPartition{Topic: "t", Partition: 0}, Offset: 3, LeaderEpoch: 0}})
	if !errors.Is(err, offsets.ErrGenerationEnded) {
		t.Fatalf("commit under the old generation: %v, want ErrGenerationEnded", err)
	}
	t.Log(err)
	if got := c.Committed(t, "g", "t"); got[0] == 3 {
		t.Fatal("the fenced commit landed")
	}
	l.waitFor(t, 10*time.Second, "2 each", func(o map[string][]offsetstore.TopicPartition) bool {
		return slices.Equal(counts(o, "a", "b"), []int{2, 2})
	})
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}

// Partitions added to a subscribed topic are assigned without a restart:
// the leader notices the new count and rebalances.
func TestAddedPartitionsAreAssigned(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "t", 2)
	l := newLedger()
	cfg := testConfig(c, "g", "t")
	cfg.MetadataInterval = 100 * time.Millisecond
	startMember(t, l, "a", cfg, memberOpts{commitOnRev: true})
	startMember(t, l, "b", cfg, memberOpts{commitOnRev: true})
	l.waitFor(t, 10*time.Second, "1 each", func(o map[string][]offsetstore.TopicPartition) bool {
		return slices.Equal(counts(o, "a", "b"), []int{1, 1})
	})
	if _, err := c.Admin.CreatePartitions(context.Background(), 2, "t"); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, 10*time.Second, "2 each of 4", func(o map[string][]offsetstore.TopicPartition) bool {
		return slices.Equal(counts(o, "a", "b"), []int{2, 2})
	})
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}
