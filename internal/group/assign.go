package group

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Assignor names, as they appear in JoinGroup and in Java's and
// franz-go's clients (partition.assignment.strategy).
const (
	// CooperativeSticky balances partitions while moving as few as
	// possible, and rebalances incrementally (KIP-429): a partition that
	// moves is first revoked by its owner, then assigned in a second
	// rebalance; every other partition stays where it is throughout.
	CooperativeSticky = "cooperative-sticky"
	// Range gives each member a contiguous range of each topic's
	// partitions. Eager: every rebalance revokes every partition.
	Range = "range"
	// RoundRobin deals all partitions to the members in turn. Eager.
	RoundRobin = "roundrobin"
)

// assignor computes the group's assignment on the elected leader.
type assignor interface {
	name() string
	// cooperative: members keep their partitions through a rebalance
	// and revoke only those the assignment takes away.
	cooperative() bool
	// userData is the subscription's user data for a member of
	// generation gen.
	userData(gen int32) []byte
	// assign maps each member id to its topic's partitions. topics holds
	// the partition count of every topic any member subscribes to that
	// exists.
	assign(members []memberMeta, topics map[string]int32) map[string]map[string][]int32
}

func assignorFor(name string) (assignor, error) {
	switch name {
	case CooperativeSticky:
		return stickyAssignor{}, nil
	case Range:
		return rangeAssignor{}, nil
	case RoundRobin:
		return roundRobinAssignor{}, nil
	}
	return nil, fmt.Errorf("unknown assignor %q (use %s, %s or %s): %w", name, CooperativeSticky, Range, RoundRobin, ErrConfig)
}

// memberMeta is one member's subscription as the leader reads it.
type memberMeta struct {
	ID         string
	InstanceID string // "" if dynamic
	Topics     []string
	Owned      map[string][]int32
	Generation int32 // -1 if unknown
}

// encodeSubscription encodes a ConsumerProtocol subscription (v3: owned
// partitions, generation, rack), as Java's and franz-go's clients do.
func encodeSubscription(topics []string, owned map[string][]int32, gen int32, rack string, userData []byte) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = slices.Sorted(slices.Values(topics))
	meta.UserData = userData
	for _, t := range sortedKeys(owned) {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic = t
		op.Partitions = slices.Sorted(slices.Values(owned[t]))
		meta.OwnedPartitions = append(meta.OwnedPartitions, op)
	}
	meta.Generation = gen
	if rack != "" {
		meta.Rack = &rack
	}
	return meta.AppendTo(nil)
}

// decodeSubscription decodes a subscription of any version (v0 has no
// owned partitions and no generation; older cooperative-sticky members put
// the generation in the user data).
func decodeSubscription(id, instanceID string, b []byte) (memberMeta, error) {
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(b); err != nil {
		return memberMeta{}, fmt.Errorf("member %s sent a subscription that is not the consumer protocol's: %w", id, err)
	}
	m := memberMeta{ID: id, InstanceID: instanceID, Topics: meta.Topics, Generation: -1, Owned: map[string][]int32{}}
	for _, op := range meta.OwnedPartitions {
		m.Owned[op.Topic] = append(m.Owned[op.Topic], op.Partitions...)
	}
	switch {
	case meta.Version >= 2:
		m.Generation = meta.Generation
	case len(meta.UserData) == 4:
		m.Generation = int32(binary.BigEndian.Uint32(meta.UserData))
	}
	return m, nil
}

func encodeAssignment(a map[string][]int32) []byte {
	as := kmsg.NewConsumerMemberAssignment()
	as.Version = 3
	for _, t := range sortedKeys(a) {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic = t
		at.Partitions = slices.Sorted(slices.Values(a[t]))
		as.Topics = append(as.Topics, at)
	}
	return as.AppendTo(nil)
}

func decodeAssignment(b []byte) (map[string][]int32, error) {
	out := map[string][]int32{}
	if len(b) == 0 {
		return out, nil // a member the leader gave nothing
	}
	var as kmsg.ConsumerMemberAssignment
	if err := as.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("the leader sent an assignment that is not the consumer protocol's: %w", err)
	}
	for _, t := range as.Topics {
		out[t.Topic] = append(out[t.Topic], t.Partitions...)
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// sortMembers orders members as Java's assignors do: members with an
// instance id first, by instance id, then the others by member id.
func sortMembers(ms []memberMeta) []memberMeta {
	out := slices.Clone(ms)
	slices.SortFunc(out, func(a, b memberMeta) int {
		switch {
		case a.InstanceID != "" && b.InstanceID != "":
			return strings.Compare(a.InstanceID, b.InstanceID)
		case a.InstanceID != "":
			return -1
		case b.InstanceID != "":
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

func subscribes(m memberMeta, topic string) bool { return slices.Contains(m.Topics, topic) }

func emptyPlan(ms []memberMeta) map[string]map[string][]int32 {
	plan := make(map[string]map[string][]int32, len(ms))
	for _, m := range ms {
		plan[m.ID] = map[string][]int32{}
	}
	return plan
}

type rangeAssignor struct{}

func (rangeAssignor) name() string          { return Range }
func (rangeAssignor) cooperative() bool     { return false }
func (rangeAssignor) userData(int32) []byte { return nil }

// assign: per topic, the subscribed members in order each take
// n/members partitions, the first n%members one more.
func (rangeAssignor) assign(members []memberMeta, topics map[string]int32) map[string]map[string][]int32 {
	plan := emptyPlan(members)
	sorted := sortMembers(members)
	for _, t := range sortedKeys(topics) {
		var subs []memberMeta
		for _, m := range sorted {
			if subscribes(m, t) {
				subs = append(subs, m)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := int(topics[t])
		per, extra := n/len(subs), n%len(subs)
		start := 0
		for i, m := range subs {
			size := per
			if i < extra {
				size++
			}
			for p := start; p < start+size; p++ {
				plan[m.ID][t] = append(plan[m.ID][t], int32(p))
			}
			start += size
		}
	}
	return plan
}

type roundRobinAssignor struct{}

func (roundRobinAssignor) name() string          { return RoundRobin }
func (roundRobinAssignor) cooperative() bool     { return false }
func (roundRobinAssignor) userData(int32) []byte { return nil }

// assign deals every partition (topics in name order) to the members in
// turn, skipping members not subscribed to its topic.
func (roundRobinAssignor) assign(members []memberMeta, topics map[string]int32) map[string]map[string][]int32 {
	plan := emptyPlan(members)
	sorted := sortMembers(members)
	if len(sorted) == 0 {
		return plan
	}
	next := 0
	for _, t := range sortedKeys(topics) {
		for p := int32(0); p < topics[t]; p++ {
			for range sorted {
				m := sorted[next%len(sorted)]
				next++
				if subscribes(m, t) {
					plan[m.ID][t] = append(plan[m.ID][t], p)
					break
				}
			}
		}
	}
	return plan
}

// stickyAssignor is cooperative-sticky: a balanced assignment that keeps
// every member's valid owned partitions up to its fair share.
type stickyAssignor struct{}

func (stickyAssignor) name() string      { return CooperativeSticky }
func (stickyAssignor) cooperative() bool { return true }

// userData is Java's CooperativeStickyAssignor's: the generation, for
// leaders that read subscriptions older than v2.
func (stickyAssignor) userData(gen int32) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(gen))
}

type tp struct {
	topic string
	part  int32
}

func cmpTP(a, b tp) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return cmp.Compare(a.part, b.part)
}

// assign keeps each partition with its valid owner (a member that
// subscribes to its topic and claims it at the highest generation any
// member claims it), deals the rest to the least loaded subscribed
// member, then moves partitions from a member to one with at least two
// fewer (preferring partitions the member did not own) until no such move
// exists. With equal subscriptions every member then has the floor or
// ceiling of partitions/members and keeps at least min(owned, floor) of
// what it owned.
func (stickyAssignor) assign(members []memberMeta, topics map[string]int32) map[string]map[string][]int32 {
	sorted := sortMembers(members)
	owner := map[tp]int{}      // partition -> index into sorted
	ownerGen := map[tp]int32{} // generation of the winning claim
	for i, m := range sorted {
		for t, ps := range m.Owned {
			n, ok := topics[t]
			if !ok || !subscribes(m, t) {
				continue
			}
			for _, p := range ps {
				if p < 0 || p >= n {
					continue
				}
				k := tp{t, p}
				if g, claimed := ownerGen[k]; claimed && g >= m.Generation {
					continue
				}
				owner[k], ownerGen[k] = i, m.Generation
			}
		}
	}
	had := make([]map[tp]bool, len(sorted)) // what each member keeps from before
	sets := make([]map[tp]bool, len(sorted))
	for i := range sorted {
		had[i], sets[i] = map[tp]bool{}, map[tp]bool{}
	}
	for k, i := range owner {
		had[i][k], sets[i][k] = true, true
	}
	var free []tp
	for _, t := range sortedKeys(topics) {
		for p := int32(0); p < topics[t]; p++ {
			if _, ok := owner[tp{t, p}]; !ok {
				free = append(free, tp{t, p})
			}
		}
	}
	for _, k := range free {
		best := -1
		for i, m := range sorted {
			if subscribes(m, k.topic) && (best < 0 || len(sets[i]) < len(sets[best])) {
				best = i
			}
		}
		if best >= 0 {
			sets[best][k] = true
		}
	}
	// Balance: each move lowers the sum of squared counts, so this ends.
	for moved := true; moved; {
		moved = false
		order := make([]int, len(sorted))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(sets[b]), len(sets[a])) })
	search:
		for _, a := range order {
			for j := len(order) - 1; j >= 0; j-- {
				b := order[j]
				if len(sets[b]) > len(sets[a])-2 {
					continue
				}
				if k, ok := movable(sets[a], had[a], sorted[b]); ok {
					delete(sets[a], k)
					sets[b][k] = true
					moved = true
					break search
				}
			}
		}
	}
	plan := emptyPlan(members)
	for i, m := range sorted {
		for _, k := range slices.SortedFunc(mapKeys(sets[i]), cmpTP) {
			plan[m.ID][k.topic] = append(plan[m.ID][k.topic], k.part)
		}
	}
	return plan
}

// movable picks a partition of set that member b subscribes to, one the
// member did not own before if there is one, the highest otherwise.
func movable(set, had map[tp]bool, b memberMeta) (tp, bool) {
	var pick tp
	found, pickHad := false, true
	for k := range set {
		if !subscribes(b, k.topic) {
			continue
		}
		h := had[k]
		if !found || (pickHad && !h) || (pickHad == h && cmpTP(k, pick) > 0) {
			pick, pickHad, found = k, h, true
		}
	}
	return pick, found
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// adjustCooperative withholds, from a cooperative plan, every partition
// planned for a member that another member claims at the same or a higher
// generation than it does: the claimant revokes it (it is not in its
// plan) and rejoins, and the next rebalance assigns it. So no partition is
// ever assigned while another member may still be consuming it.
func adjustCooperative(plan map[string]map[string][]int32, members []memberMeta) {
	claims := map[tp][]memberMeta{}
	for _, m := range members {
		for t, ps := range m.Owned {
			for _, p := range ps {
				claims[tp{t, p}] = append(claims[tp{t, p}], m)
			}
		}
	}
	for _, m := range members {
		for t, ps := range plan[m.ID] {
			kept := ps[:0]
			for _, p := range ps {
				mine := int32(-2) // our claim's generation; -2: no claim
				for _, c := range claims[tp{t, p}] {
					if c.ID == m.ID {
						mine = c.Generation
					}
				}
				withhold := false
				for _, c := range claims[tp{t, p}] {
					if c.ID != m.ID && (mine == -2 || c.Generation >= mine) {
						withhold = true
					}
				}
				if !withhold {
					kept = append(kept, p)
				}
			}
			if len(kept) == 0 {
				delete(plan[m.ID], t)
			} else {
				plan[m.ID][t] = kept
			}
		}
	}
}
