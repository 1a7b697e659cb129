package group

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
)

// The consumer group protocol (KIP-848): one request,
// ConsumerGroupHeartbeat, joins, heartbeats, carries the coordinator's
// assignment (topic ids and partitions) and acknowledges revocations (the
// partitions the member still owns). kafka-go's protocol package has no
// ConsumerGroupHeartbeat and no OffsetCommit v9 (which a consumer-protocol
// member must use), so both are framed with kmsg.

const (
	minConsumerHeartbeat = 0
	minCommit848         = 9 // member epoch in place of the generation
	maxCommit848         = 9 // v10 names topics by id
	minMetadataIDs       = 10
)

// member848 is the consumer protocol's part of the Run goroutine's state.
type member848 struct {
	memberEpoch int32 // 0: not joined
	pending     *kmsg.ConsumerGroupHeartbeatResponseAssignment
	names       map[[16]byte]string
	ids         map[string][16]byte
}

func newMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *runState) loop848(ctx context.Context) error {
	s.memberID = newMemberID()
	var fe fatalError
	failures := 0
	for ctx.Err() == nil {
		var err error
		switch {
		case s.member848.memberEpoch == 0:
			err = s.heartbeat848(ctx)
		case s.member848.pending != nil:
			err = s.reconcile848(ctx)
		default:
			err = s.wait(ctx, waitFor{onRejoin: true})
			s.rejoin = false
		}
		switch {
		case errors.As(err, &fe):
			return fe.error
		case errors.Is(err, errLost):
			id := s.memberID
			s.lose(err)
			s.memberID, s.member848.memberEpoch, s.member848.pending = id, 0, nil
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			failures++
			if err := s.backOff(ctx, "consumer group heartbeat failed; retrying", failures, err); err != nil {
				if errors.As(err, &fe) {
					return fe.error
				}
				id := s.memberID
				s.lose(err)
				s.memberID, s.member848.memberEpoch, s.member848.pending = id, 0, nil
			}
		default:
			failures = 0
		}
	}
	return nil
}

// heartbeat848 sends one ConsumerGroupHeartbeat: a join (member epoch 0)
// with the subscription, or a regular one with the partitions the member
// owns. A new assignment is kept for reconcile848.
func (s *runState) heartbeat848(ctx context.Context) error {
	m := &s.member848
	joining := m.memberEpoch == 0
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = s.cfg.Group, s.memberID, m.memberEpoch
	if s.cfg.InstanceID != "" {
		req.InstanceID = &s.cfg.InstanceID
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if joining {
		req.RebalanceTimeoutMillis = int32(s.cfg.RebalanceTimeout.Milliseconds())
		req.SubscribedTopicNames = s.cfg.Topics
		if s.cfg.RemoteAssignor != "" {
			req.ServerAssignor = &s.cfg.RemoteAssignor
		}
		if s.cfg.Rack != "" {
			req.RackID = &s.cfg.Rack
		}
	} else {
		byTopic := map[string][]int32{}
		for k := range s.owned {
			byTopic[k.topic] = append(byTopic[k.topic], k.part)
		}
		for _, t := range sortedKeys(byTopic) {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = m.ids[t], byTopic[t]
			req.Topics = append(req.Topics, rt)
		}
	}
	hctx := ctx
	if !joining {
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(ctx, s.lastAlive.Add(s.aliveFor()))
		defer cancel()
	} else {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, s.cfg.SessionTimeout)
		defer cancel()
	}
	sent := time.Now()
	s.lastHB = sent
	if err := s.connect(hctx); err != nil {
		if joining {
			return err
		}
		return nil // the next heartbeat tries again, until the session ends
	}
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	if err := s.coord.roundTripKmsg(hctx, minConsumerHeartbeat, req, resp); err != nil {
		if errors.Is(err, ErrUnsupportedBroker) {
			return fatalError{s.consumerProtocolRefused(ctx, err)}
		}
		s.dropConn()
		if joining {
			return err
		}
		s.log.Debug("heartbeat failed", zap.String("group", s.cfg.Group), zap.Error(err))
		return nil
	}
	if resp.ErrorCode != 0 {
		kerrv := kerr.ErrorForCode(resp.ErrorCode)
		detail := ""
		if resp.ErrorMessage != nil {
			detail = ": " + *resp.ErrorMessage
		}
		err := fmt.Errorf("ConsumerGroupHeartbeat for group %q: %w%s", s.cfg.Group, kerrv, detail)
		// By the shared table (kafkawire), as groupError; and
		// GROUP_ID_NOT_FOUND, which only here means a classic group in
		// the way (the tools take it as a group without offsets yet).
		switch c := kafkawire.ClassifyCode(resp.ErrorCode); {
		case errors.Is(kerrv, kerr.UnsupportedVersion):
			return fatalError{s.consumerProtocolRefused(ctx, err)}
		case c == kafkawire.StaleMember:
			return fmt.Errorf("%w: %w", errLost, err)
		case c == kafkawire.NotCoordinator:
			s.dropConn()
			if joining {
				return err
			}
			return nil
		case errors.Is(kerrv, kerr.UnreleasedInstanceID):
			return err // the previous incarnation has not left yet: retry
		case c == kafkawire.Fencing:
			return fatalError{fmt.Errorf("%w (%q): %w", ErrFencedInstance, s.cfg.InstanceID, err)}
		case memberFatal(resp.ErrorCode):
			return fatalError{s.fatalHint(err, resp.ErrorCode)}
		case errors.Is(kerrv, kerr.GroupIDNotFound):
			return fatalError{fmt.Errorf("%w: the group is a classic group with active members; stop them or use consumer.group_protocol classic", err)}
		}
		if joining {
			return err
		}
		s.log.Info("consumer group heartbeat refused", zap.String("group", s.cfg.Group), zap.Error(err))
		return nil
	}
	s.lastAlive = sent
	if resp.MemberID != nil && *resp.MemberID != "" {
		s.memberID = *resp.MemberID
	}
	if resp.HeartbeatIntervalMillis > 0 {
		s.hbInterval = time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
	}
	if resp.MemberEpoch != m.memberEpoch || joining {
		m.memberEpoch = resp.MemberEpoch
		s.gen = m.memberEpoch
		s.publish()
	}
	if resp.Assignment != nil {
		m.pending = resp.Assignment
		s.rejoin = true
	}
	return nil
}

// reconcile848 moves the owned partitions to the pending assignment:
// revokes what it no longer has (the owner drains and commits; the next
// heartbeat acknowledges), then takes what is new.
func (s *runState) reconcile848(ctx context.Context) error {
	m := &s.member848
	pending := m.pending
	target, err := s.resolve848(ctx, pending)
	if err != nil {
		return err
	}
	m.pending = nil
	s.rejoin = false // set again when a newer assignment arrives
	revoked, added := map[tp]bool{}, map[tp]bool{}
	for k := range s.owned {
		if !target[k] {
			revoked[k] = true
		}
	}
	for k := range target {
		if !s.owned[k] {
			added[k] = true
		}
	}
	if len(revoked) > 0 {
		if err := s.revoke(ctx, revoked); err != nil {
			return err
		}
		s.lastHB = time.Time{} // acknowledge at once
		if m.pending != nil {
			return nil // a newer assignment arrived meanwhile
		}
	}
	parts, err := s.assignedOffsets(ctx, added)
	if err != nil {
		if m.pending != nil && errors.Is(err, errRebalanced) {
			return nil // a newer assignment arrived meanwhile: reconcile it
		}
		// The coordinator sends an assignment only when it changes:
		// keep it (unless a newer one arrived while fetchCommitted
		// heartbeated), and retry after the backoff.
		if m.pending == nil {
			m.pending = pending
		}
		return err
	}
	for k := range added {
		s.owned[k] = true
	}
	s.publish()
	s.log.Info("consumer group assignment", zap.String("group", s.cfg.Group), zap.Int32("member_epoch", m.memberEpoch),
		zap.Int("assigned", len(target)), zap.Int("added", len(added)), zap.Int("revoked", len(revoked)))
	s.queue = append(s.queue, Assigned{Generation: offsets.Generation(m.memberEpoch), Partitions: parts})
	s.lastHB = time.Time{}
	return nil
}

// resolve848 names the assignment's topics, asking for metadata when an
// id is new.
func (s *runState) resolve848(ctx context.Context, a *kmsg.ConsumerGroupHeartbeatResponseAssignment) (map[tp]bool, error) {
	m := &s.member848
	for _, t := range a.Topics {
		if _, ok := m.names[t.TopicID]; !ok {
			if err := s.refreshTopicIDs(ctx); err != nil {
				return nil, err
			}
			break
		}
	}
	out := map[tp]bool{}
	for _, t := range a.Topics {
		name, ok := m.names[t.TopicID]
		if !ok {
			return nil, fmt.Errorf("the coordinator assigned topic id %x, which metadata does not know", t.TopicID)
		}
		for _, p := range t.Partitions {
			out[tp{name, p}] = true
		}
	}
	return out, nil
}

func (s *runState) refreshTopicIDs(ctx context.Context) error {
	mctx, cancel := context.WithTimeout(ctx, s.cfg.SessionTimeout)
	defer cancel()
	if err := s.connect(mctx); err != nil {
		return err
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range s.cfg.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp := kmsg.NewPtrMetadataResponse()
	if err := s.coord.roundTripKmsg(mctx, minMetadataIDs, req, resp); err != nil {
		s.dropConn()
		return err
	}
	m := &s.member848
	if m.names == nil {
		m.names, m.ids = map[[16]byte]string{}, map[string][16]byte{}
	}
	for _, t := range resp.Topics {
		if t.ErrorCode == 0 && t.Topic != nil {
			m.names[t.TopicID], m.ids[*t.Topic] = *t.Topic, t.TopicID
		}
	}
	return nil
}

// shutdown848 revokes every partition and leaves: member epoch -1, or -2
// for a static member (the coordinator keeps its assignment for the
// session timeout) unless LeaveOnClose.
func (s *runState) shutdown848(parent context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), s.cfg.RebalanceTimeout)
	defer cancel()
	if len(s.owned) > 0 && s.member848.memberEpoch > 0 {
		if err := s.revoke(ctx, s.owned); err != nil && errors.Is(err, errLost) {
			s.lose(err)
		}
	}
	if len(s.owned) > 0 {
		s.lose(errors.New("the member stopped before the owner finished revoking"))
	}
	_ = s.wait(ctx, waitFor{flushed: true})
	if s.member848.memberEpoch <= 0 {
		return
	}
	lctx, lcancel := context.WithTimeout(ctx, min(s.cfg.SessionTimeout, 5*time.Second))
	defer lcancel()
	if err := s.connect(lctx); err != nil {
		return
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = s.cfg.Group, s.memberID, -1
	if s.cfg.InstanceID != "" {
		req.InstanceID = &s.cfg.InstanceID
		if !s.cfg.LeaveOnClose {
			req.MemberEpoch = -2
		}
	}
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	if err := s.coord.roundTripKmsg(lctx, minConsumerHeartbeat, req, resp); err != nil {
		s.log.Info("leaving the consumer group failed", zap.String("group", s.cfg.Group), zap.Error(err))
	}
	s.gen, s.member848.memberEpoch = -1, 0
	s.publish()
}

// commit848 is Commit for the consumer protocol: OffsetCommit v9 with the
// member epoch.
//
// The coordinator moves a member to a new member epoch when it answers
// one of its heartbeats, often with its partitions unchanged, and until
// Kafka 4.3 (KIP-1251) it refuses a commit under any other member epoch
// with STALE_MEMBER_EPOCH. A commit sent while that heartbeat's answer is
// on its way is refused so, though the member still owns its partitions:
// commit848 then waits (up to the session timeout, within ctx) for the
// member to publish its new member epoch, and if it still owns every
// partition of offs, commits them again under it (so too when the member
// moved to a new member epoch while the commit was being prepared).
// Without that the owner would take the commit as fenced and, its
// partitions unchanged, hear of no new assignment that lets it commit
// again.
func (m *Member) commit848(ctx context.Context, snap *snapshot, offs []Offset) error {
	for attempt := 0; ; attempt++ {
		err := m.commit848Once(ctx, snap, offs)
		if err == nil || !(errors.Is(err, kerr.StaleMemberEpoch) || errors.Is(err, errMemberEpochMoved)) || attempt == 2 {
			return err
		}
		next, ok := m.newerSnapshot(ctx, snap, m.cfg.SessionTimeout)
		if !ok || next.gen < 0 || next.memberID != snap.memberID || !ownsAll(next, offs) {
			return err
		}
		m.cfg.Logger.Debug("commit refused under the member's previous member epoch; committing again under its new one",
			zap.String("group", m.cfg.Group), zap.Int32("member_epoch", snap.gen), zap.Int32("new_member_epoch", next.gen))
		snap = next
	}
}

// newerSnapshot waits up to d (and within ctx) for a snapshot of another
// generation or member epoch (or member id) than snap's to be published,
// and returns it.
func (m *Member) newerSnapshot(ctx context.Context, snap *snapshot, d time.Duration) (*snapshot, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for cur := snap; ; {
		select {
		case <-cur.replaced:
			cur = m.snap.Load()
			if cur.gen != snap.gen || cur.memberID != snap.memberID {
				return cur, true
			}
		case <-ctx.Done():
			return nil, false
		case <-t.C:
			return nil, false
		}
	}
}

// ownsAll reports whether every partition of offs is assigned in snap.
func ownsAll(snap *snapshot, offs []Offset) bool {
	for _, o := range offs {
		if !snap.owned[tp{o.Topic, o.Partition}] {
			return false
		}
	}
	return true
}

// commit848Once sends one commit of offs under snap's member epoch.
func (m *Member) commit848Once(ctx context.Context, snap *snapshot, offs []Offset) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = m.cfg.Group, snap.gen, snap.memberID
	if m.cfg.InstanceID != "" {
		req.InstanceID = &m.cfg.InstanceID
	}
	byTopic := map[string][]kmsg.OffsetCommitRequestTopicPartition{}
	for _, o := range offs {
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = o.Partition, o.Offset, o.LeaderEpoch
		if o.Metadata != "" {
			p.Metadata = kmsg.StringPtr(o.Metadata)
		}
		byTopic[o.Topic] = append(byTopic[o.Topic], p)
	}
	for _, t := range sortedKeys(byTopic) {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.Partitions = t, byTopic[t]
		req.Topics = append(req.Topics, rt)
	}
	return m.commitWith(ctx, snap, "member epoch", func(ctx context.Context, c *conn) ([]partitionCode, error) {
		resp := kmsg.NewPtrOffsetCommitResponse()
		if err := c.roundTripKmsgUpTo(ctx, minCommit848, maxCommit848, req, resp); err != nil {
			return nil, err
		}
		var codes []partitionCode
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, partitionCode{t.Topic, p.Partition, p.ErrorCode})
			}
		}
		return codes, nil
	})
}

// consumerProtocolRefused returns the error Run ends with when the group
// coordinator lacks ConsumerGroupHeartbeat or answers it
// UNSUPPORTED_VERSION (cause): the consumer group protocol is not
// offered (Kafka before 4.0, or a 4.x cluster whose group.version is 0).
// It names the coordinator, its release if ApiVersions tells it, and the
// setting to change.
func (s *runState) consumerProtocolRefused(ctx context.Context, cause error) error {
	coord := "the group coordinator"
	if s.coord != nil {
		coord += " at " + s.coord.addr
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if release := s.coord.describeRelease(dctx); release != "" {
			coord += " runs " + release + " and"
		}
		cancel()
	}
	return fmt.Errorf("%w: %s does not accept consumer.group_protocol: consumer for group %q (%v); "+
		"set consumer.group_protocol: classic, or upgrade the brokers to Apache Kafka 4.0 or later with the group.version feature at 1 or more",
		ErrConsumerProtocolUnsupported, coord, s.cfg.Group, cause)
}
