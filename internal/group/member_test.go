package group

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

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
	startMember(t, l, "a", cfg, memberOpts{commitOnRev: true})
	startMember(t, l, "b", cfg, memberOpts{commitOnRev: true})
	l.waitFor(t, 10*time.Second, "a and b own 3 each", func(o map[string][]offsetstore.TopicPartition) bool {
		return slices.Equal(counts(o, "a", "b"), []int{3, 3})
	})
	before := l.owned()
	startMember(t, l, "c", cfg, memberOpts{commitOnRev: true})
	l.waitFor(t, 10*time.Second, "2 each", func(o map[string][]offsetstore.TopicPartition) bool {
		return slices.Equal(counts(o, "a", "b", "c"), []int{2, 2, 2})
	})
	after := l.owned()
	for _, name := range []string{"a", "b"} {
		var revoked []offsetstore.TopicPartition
		for _, ev := range l.eventsOf(name) {
			if r, ok := ev.(Revoke); ok {
				revoked = append(revoked, r.Partitions...)
			}
		}
		if len(revoked) != 1 {
			t.Errorf("%s revoked %v, want exactly the one partition that moved", name, revoked)
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
