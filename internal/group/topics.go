package group

import (
	"context"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// A subscribed topic can be deleted and created again under a running
// member. Two things must then happen, and this file does both:
//
//   - The group must rebalance, so that the new topic's partitions are
//     assigned. Under the classic protocol the leader watches every
//     subscribed topic (present or not) every MetadataInterval: its
//     partition count, its presence and its topic id (Metadata v10+,
//     Kafka 2.8+); any change starts a rebalance. Watching only the
//     topics that existed at its last assignment would drop a deleted
//     topic from the watch and never notice its return. Under
//     the consumer protocol (KIP-848) the coordinator recomputes the
//     assignment itself when a topic is created or deleted.
//   - The offsets the group committed for the deleted topic do not
//     belong to the new one. Kafka (and kfake) drop them when the topic
//     is deleted, but a commit that lands after the deletion (the final
//     commit of the revoke the deletion caused, or a broker that keeps
//     them) would make the new topic start at an offset of the old one
//     and skip its records. The member therefore looks at the subscribed
//     topics' ids (and presence) at every generation it joins; a topic
//     whose id changed since its previous generation, or that was absent
//     then and is present now after having been seen before, was
//     recreated, and its partitions added in this generation start from
//     the reset policy (Partition.TopicRecreated) whatever the group has
//     committed for them. That is what the Java consumer gets from the
//     broker dropping the offsets, made independent of the broker;
//     franz-go (kgo 1.22) instead refuses to adopt a new topic id until
//     the application purges and re-adds the topic.
//
// The per-generation look is bounded in time: commits for the new topic
// can only be made from the generation that first assigns its partitions,
// and every classic member joins every generation. Under the consumer
// protocol a member is sent a new assignment only when its own changes;
// one that did not take part in the recreation's reassignment and is
// given the new topic's partitions later compares with its previous
// reconciliation, and would take the group's commits of the new topic as
// stale (it starts from the reset policy instead; with earliest, records
// are processed again, never skipped).

// topicMeta is one topic as the brokers' metadata describes it.
type topicMeta struct {
	id    [16]byte // zero: the broker gives no topic ids (Metadata before v10)
	parts int32
}

// topicWatch is what the member remembers of its subscribed topics.
type topicWatch struct {
	// subs are the topics the group's members subscribe to, as the
	// leader last saw them; leader is their metadata then (an absent
	// topic has no entry).
	subs   []string
	leader map[string]topicMeta
	// seen is the subscribed topics' metadata at the last generation
	// this member joined (nil before the first).
	seen map[string]topicMeta
	// ever holds the topics the member has seen exist.
	ever map[string]bool
}

// topicsMeta returns the metadata of the existing topics among names; an
// absent topic (UNKNOWN_TOPIC_OR_PARTITION) has no entry, a topic the
// broker does not describe for another reason (no permission, no leader
// yet) is logged and left out too.
func (s *runState) topicsMeta(ctx context.Context, names []string) (map[string]topicMeta, error) {
	mctx, cancel := context.WithTimeout(ctx, s.cfg.SessionTimeout)
	defer cancel()
	if err := s.connect(mctx); err != nil {
		return nil, err
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none rather than all when names is empty
	for _, t := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp := kmsg.NewPtrMetadataResponse()
	if err := s.coord.roundTripKmsg(mctx, minMetadata, req, resp); err != nil {
		s.dropConn()
		return nil, err
	}
	out := make(map[string]topicMeta, len(names))
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		switch t.ErrorCode {
		case 0:
			out[*t.Topic] = topicMeta{id: t.TopicID, parts: int32(len(t.Partitions))}
		case kerr.UnknownTopicOrPartition.Code:
		default:
			s.log.Warn("a subscribed topic is not assignable", zap.String("topic", *t.Topic), zap.Error(kerr.ErrorForCode(t.ErrorCode)))
		}
	}
	return out, nil
}

// leaderMetadata, on the leader, reads the subscribed topics' metadata
// for an assignment, remembers it for checkPartitions and returns the
// partition count of each existing topic.
func (s *runState) leaderMetadata(ctx context.Context, names []string) (map[string]int32, error) {
	meta, err := s.topicsMeta(ctx, names)
	if err != nil {
		return nil, err
	}
	s.watch.subs, s.watch.leader = names, meta
	counts := make(map[string]int32, len(meta))
	for t, m := range meta {
		if m.parts > 0 {
			counts[t] = m.parts
		}
	}
	return counts, nil
}

// checkPartitions, on the leader, rejoins (which starts a rebalance) when
// a subscribed topic appeared, disappeared, changed its partition count
// or its topic id (it was deleted and created again) since the leader's
// last assignment.
func (s *runState) checkPartitions(ctx context.Context) {
	s.metaAt = time.Now()
	now, err := s.topicsMeta(ctx, s.watch.subs)
	if err != nil {
		s.log.Debug("checking the subscribed topics failed", zap.String("group", s.cfg.Group), zap.Error(err))
		return
	}
	if maps.Equal(now, s.watch.leader) {
		return
	}
	for _, t := range s.watch.subs {
		was, wok := s.watch.leader[t]
		is, iok := now[t]
		switch {
		case wok && !iok:
			s.log.Info("a subscribed topic was deleted; rebalancing", zap.String("group", s.cfg.Group), zap.String("topic", t))
		case !wok && iok:
			s.log.Info("a subscribed topic appeared; rebalancing", zap.String("group", s.cfg.Group), zap.String("topic", t),
				zap.Int32("partitions", is.parts))
		case wok && iok && was.id != is.id:
			s.log.Info("a subscribed topic was deleted and created again (its topic id changed); rebalancing",
				zap.String("group", s.cfg.Group), zap.String("topic", t), zap.Int32("partitions", is.parts))
		case wok && iok && was.parts != is.parts:
			s.log.Info("a subscribed topic changed partitions; rebalancing", zap.String("group", s.cfg.Group), zap.String("topic", t),
				zap.Int32("was", was.parts), zap.Int32("now", is.parts))
		}
	}
	s.rejoin = true
}

// recreatedTopics looks at the subscribed topics for a generation the
// member joined and returns those recreated since its previous one (see
// the top of this file), with what it saw, for noteTopics to remember
// once the generation's offsets are read. When the metadata cannot be
// read it logs and returns nothing (the committed offsets are used).
func (s *runState) recreatedTopics(ctx context.Context) (map[string]bool, map[string]topicMeta) {
	now, err := s.topicsMeta(ctx, s.cfg.Topics)
	if err != nil {
		s.log.Warn("reading the subscribed topics' ids failed; a topic recreated since the last generation is not detected",
			zap.String("group", s.cfg.Group), zap.Error(err))
		return nil, nil
	}
	out := map[string]bool{}
	if s.watch.seen != nil {
		for t, is := range now {
			was, wok := s.watch.seen[t]
			switch {
			case wok && was.id != is.id:
				out[t] = true
			case !wok && s.watch.ever[t]:
				out[t] = true // gone at the previous generation, back now
			}
		}
	}
	return out, now
}

// noteTopics remembers the subscribed topics' metadata of a generation
// whose offsets were read.
func (s *runState) noteTopics(now map[string]topicMeta) {
	if now == nil {
		return
	}
	s.watch.seen = now
	if s.watch.ever == nil {
		s.watch.ever = map[string]bool{}
	}
	for t := range now {
		s.watch.ever[t] = true
	}
}

// assignedOffsets is fetchCommitted for a generation the member joined:
// the committed offsets of the partitions it gained, except that those of
// a topic recreated since its previous generation are dropped (the
// partition starts from the reset policy, marked TopicRecreated).
//
// A generation that adds no partition (most cooperative rebalances)
// reads no metadata: only added partitions can start from a recreated
// topic, and the ids remembered from an earlier generation still tell a
// recreation at the next one that adds some.
func (s *runState) assignedOffsets(ctx context.Context, added map[tp]bool) ([]Partition, error) {
	if len(added) == 0 {
		return nil, nil
	}
	recreated, now := s.recreatedTopics(ctx)
	parts, err := s.fetchCommitted(ctx, added)
	if err != nil {
		return nil, err
	}
	s.noteTopics(now)
	for i := range parts {
		p := &parts[i]
		if !recreated[p.Topic] {
			continue
		}
		if p.Committed >= 0 {
			s.log.Warn("the topic was deleted and created again: the offset the group committed belongs to the deleted topic and is ignored; "+
				"the partition starts where auto_offset_reset says", zap.String("group", s.cfg.Group), zap.String("topic", p.Topic),
				zap.Int32("partition", p.Partition), zap.Int64("committed", p.Committed))
		}
		p.Committed, p.LeaderEpoch, p.Metadata, p.TopicRecreated = -1, -1, "", true
	}
	return parts, nil
}
