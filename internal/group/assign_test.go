package group

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// genGroup draws a group: topics with partition counts, and members with
// unique ids, optional instance ids, subscriptions and (possibly
// overlapping, possibly stale) owned partitions.
func genGroup(t *rapid.T, uniform bool) ([]memberMeta, map[string]int32) {
	topics := map[string]int32{}
	nt := rapid.IntRange(1, 3).Draw(t, "topics")
	var names []string
	for i := range nt {
		name := fmt.Sprintf("t%d", i)
		names = append(names, name)
		topics[name] = int32(rapid.IntRange(0, 12).Draw(t, "partitions "+name))
	}
	nm := rapid.IntRange(1, 6).Draw(t, "members")
	members := make([]memberMeta, nm)
	for i := range members {
		m := memberMeta{ID: fmt.Sprintf("m%d", i), Generation: int32(rapid.IntRange(-1, 3).Draw(t, "generation")), Owned: map[string][]int32{}}
		if rapid.Bool().Draw(t, "static") {
			m.InstanceID = fmt.Sprintf("i%d", nm-i)
		}
		if uniform {
			m.Topics = slices.Clone(names)
		} else {
			for _, n := range names {
				if rapid.Bool().Draw(t, "subscribes "+n) {
					m.Topics = append(m.Topics, n)
				}
			}
		}
		for _, n := range names {
			for p := range topics[n] + 2 { // some owned partitions no longer exist
				if rapid.IntRange(0, 3).Draw(t, "owns") == 0 {
					m.Owned[n] = append(m.Owned[n], p)
				}
			}
		}
		members[i] = m
	}
	return members, topics
}

// checkPlan: every member is in the plan, a partition is assigned at most
// once, only to a member subscribed to its topic, and only if it exists.
func checkPlan(t *rapid.T, members []memberMeta, topics map[string]int32, plan map[string]map[string][]int32) map[tp]string {
	owner := map[tp]string{}
	for _, m := range members {
		a, ok := plan[m.ID]
		if !ok {
			t.Fatalf("member %s missing from the plan", m.ID)
		}
		for topic, ps := range a {
			if !subscribes(m, topic) {
				t.Fatalf("%s assigned %s it does not subscribe to", m.ID, topic)
			}
			for _, p := range ps {
				if p < 0 || p >= topics[topic] {
					t.Fatalf("%s assigned %s/%d which does not exist", m.ID, topic, p)
				}
				k := tp{topic, p}
				if o, dup := owner[k]; dup {
					t.Fatalf("%s/%d assigned to %s and %s", topic, p, o, m.ID)
				}
				owner[k] = m.ID
			}
		}
	}
	return owner
}

func planCounts(members []memberMeta, plan map[string]map[string][]int32) []int {
	var cs []int
	for _, m := range members {
		n := 0
		for _, ps := range plan[m.ID] {
			n += len(ps)
		}
		cs = append(cs, n)
	}
	return cs
}

// Every assignor assigns every partition that has a subscriber, exactly
// once, to a subscriber; with equal subscriptions the counts differ by at
// most one (range: per topic).
func TestAssignorsCompleteAndBalanced(t *testing.T) {
	for _, a := range []assignor{stickyAssignor{}, rangeAssignor{}, roundRobinAssignor{}} {
		t.Run(a.name(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				uniform := rapid.Bool().Draw(t, "uniform")
				members, topics := genGroup(t, uniform)
				plan := a.assign(members, topics)
				owner := checkPlan(t, members, topics, plan)
				for topic, n := range topics {
					subscribed := slices.ContainsFunc(members, func(m memberMeta) bool { return subscribes(m, topic) })
					for p := range n {
						if _, ok := owner[tp{topic, p}]; subscribed && !ok {
							t.Fatalf("%s/%d has subscribers but was not assigned", topic, p)
						}
					}
				}
				if !uniform {
					return
				}
				if a.name() == Range {
					for topic := range topics {
						var cs []int
						for _, m := range members {
							cs = append(cs, len(plan[m.ID][topic]))
						}
						if slices.Max(cs)-slices.Min(cs) > 1 {
							t.Fatalf("range over %s unbalanced: %v", topic, cs)
						}
					}
					return
				}
				if cs := planCounts(members, plan); slices.Max(cs)-slices.Min(cs) > 1 {
					t.Fatalf("unbalanced: %v", cs)
				}
			})
		})
	}
}

// cooperative-sticky keeps each member's valid owned partitions up to its
// fair share: with equal subscriptions, a member that validly owned k
// partitions keeps at least min(k, floor(partitions/members)) of them.
// And on heterogeneous subscriptions no single move from a member to a
// subscribed member with two fewer remains.
func TestStickyKeepsOwnedPartitions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		uniform := rapid.Bool().Draw(t, "uniform")
		members, topics := genGroup(t, uniform)
		plan := stickyAssignor{}.assign(members, topics)
		checkPlan(t, members, topics, plan)
		// the valid owner of each partition: highest generation, ties to
		// the first member in sorted order
		valid := map[tp]string{}
		gen := map[tp]int32{}
		for _, m := range sortMembers(members) {
			for topic, ps := range m.Owned {
				if !subscribes(m, topic) {
					continue
				}
				for _, p := range ps {
					k := tp{topic, p}
					if p >= topics[topic] {
						continue
					}
					if g, ok := gen[k]; ok && g >= m.Generation {
						continue
					}
					valid[k], gen[k] = m.ID, m.Generation
				}
			}
		}
		total := 0
		for _, n := range topics {
			total += int(n)
		}
		for _, m := range members {
			had, kept := 0, 0
			for k, o := range valid {
				if o != m.ID {
					continue
				}
				had++
				if slices.Contains(plan[m.ID][k.topic], k.part) {
					kept++
				}
			}
			if uniform {
				if floor := total / len(members); kept < min(had, floor) {
					t.Fatalf("%s kept %d of its %d partitions, want at least %d", m.ID, kept, had, min(had, floor))
				}
			}
		}
		cs := planCounts(members, plan)
		for i, a := range members {
			for j, b := range members {
				if cs[j] > cs[i]-2 {
					continue
				}
				for topic := range plan[a.ID] {
					if subscribes(b, topic) && len(plan[a.ID][topic]) > 0 {
						t.Fatalf("%s has %d, %s has %d and subscribes to %s: unbalanced", a.ID, cs[i], b.ID, cs[j], topic)
					}
				}
			}
		}
	})
}

// The cooperative adjustment never assigns a partition that another
// member claims at the same or a higher generation, and everything it
// withholds is revoked by some claimant (not in its plan).
func TestAdjustCooperativeNeverAssignsAClaimedPartition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		members, topics := genGroup(t, rapid.Bool().Draw(t, "uniform"))
		plan := stickyAssignor{}.assign(members, topics)
		raw := map[string]map[string][]int32{}
		for id, a := range plan {
			raw[id] = map[string][]int32{}
			for topic, ps := range a {
				raw[id][topic] = slices.Clone(ps)
			}
		}
		adjustCooperative(plan, members)
		checkPlan(t, members, topics, plan)
		for _, m := range members {
			for topic, ps := range plan[m.ID] {
				for _, p := range ps {
					mine := int32(-2)
					if slices.Contains(m.Owned[topic], p) {
						mine = m.Generation
					}
					for _, o := range members {
						if o.ID != m.ID && slices.Contains(o.Owned[topic], p) && (mine == -2 || o.Generation >= mine) {
							t.Fatalf("%s/%d given to %s (claim gen %d) while %s claims it at %d", topic, p, m.ID, mine, o.ID, o.Generation)
						}
					}
				}
			}
			for topic, ps := range raw[m.ID] {
				for _, p := range ps {
					if slices.Contains(plan[m.ID][topic], p) {
						continue
					}
					// withheld: some other claimant must not keep it
					for _, o := range members {
						if o.ID != m.ID && slices.Contains(plan[o.ID][topic], p) {
							t.Fatalf("%s/%d withheld from %s but kept by %s", topic, p, m.ID, o.ID)
						}
					}
				}
			}
		}
	})
}

// Subscriptions and assignments round-trip through the ConsumerProtocol
// encoding, and decode as franz-go's kmsg (the encoding Java and franz-go
// clients share) reads them.
func TestConsumerProtocolEncoding(t *testing.T) {
	b := encodeSubscription([]string{"b", "a"}, map[string][]int32{"a": {2, 1}}, 7, "r1", stickyAssignor{}.userData(7))
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if meta.Version != 3 || !slices.Equal(meta.Topics, []string{"a", "b"}) || meta.Generation != 7 || meta.Rack == nil || *meta.Rack != "r1" ||
		len(meta.OwnedPartitions) != 1 || !slices.Equal(meta.OwnedPartitions[0].Partitions, []int32{1, 2}) {
		t.Fatalf("subscription decodes as %+v", meta)
	}
	m, err := decodeSubscription("m", "", b)
	if err != nil || m.Generation != 7 || !slices.Equal(m.Owned["a"], []int32{1, 2}) {
		t.Fatalf("decodeSubscription: %+v, %v", m, err)
	}
	// v0 with the generation in cooperative-sticky user data (old Java)
	old := kmsg.NewConsumerMemberMetadata()
	old.Topics, old.UserData = []string{"a"}, stickyAssignor{}.userData(4)
	if m, err := decodeSubscription("m", "", old.AppendTo(nil)); err != nil || m.Generation != 4 {
		t.Fatalf("v0 subscription: %+v, %v", m, err)
	}
	if _, err := decodeSubscription("m", "", []byte{0, 3, 0}); err == nil {
		t.Fatal("a truncated subscription decoded")
	}
	as, err := decodeAssignment(encodeAssignment(map[string][]int32{"a": {3, 1}, "b": {0}}))
	if err != nil || !slices.Equal(as["a"], []int32{1, 3}) || !slices.Equal(as["b"], []int32{0}) {
		t.Fatalf("assignment round trip: %v, %v", as, err)
	}
}

// Range and roundrobin follow Java's layouts on a fixed example.
func TestRangeAndRoundRobinLayout(t *testing.T) {
	members := []memberMeta{{ID: "b", Topics: []string{"t", "u"}}, {ID: "a", Topics: []string{"t", "u"}}}
	topics := map[string]int32{"t": 3, "u": 2}
	tests := []struct {
		a    assignor
		want map[string]map[string][]int32
	}{
		{rangeAssignor{}, map[string]map[string][]int32{"a": {"t": {0, 1}, "u": {0}}, "b": {"t": {2}, "u": {1}}}},
		{roundRobinAssignor{}, map[string]map[string][]int32{"a": {"t": {0, 2}, "u": {1}}, "b": {"t": {1}, "u": {0}}}},
	}
	for _, tt := range tests {
		got := tt.a.assign(members, topics)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: %v, want %v", tt.a.name(), got, tt.want)
		}
	}
}
