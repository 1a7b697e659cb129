package group

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/joingroup"
	"github.com/segmentio/kafka-go/protocol/offsetcommit"
	"github.com/segmentio/kafka-go/protocol/syncgroup"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// Event is what the member tells its owner: Assigned, Revoke or Lost.
type Event interface{ isEvent() }

// Partition is an assigned partition with its committed offset.
type Partition struct {
	offsetstore.TopicPartition
	// Committed is the group's committed offset, -1 if none.
	Committed int64
	// LeaderEpoch is the leader epoch committed with it, -1 if unknown.
	LeaderEpoch int32
	// Metadata is the commit's metadata string.
	Metadata string
	// TopicRecreated says the partition's topic was deleted and created
	// again since the member's previous generation: what the group had
	// committed for it (if anything) belonged to the deleted topic and
	// was dropped, so Committed is -1.
	TopicRecreated bool
}

// Assigned is sent once for every generation the member joins: the
// partitions it gained (possibly none, when a cooperative rebalance left
// its partitions as they were) and the generation its commits now carry.
// Partitions assigned earlier and not revoked stay assigned.
type Assigned struct {
	Generation offsets.Generation
	Partitions []Partition
}

// Revoke asks the owner to stop the partitions, drain them, commit their
// final offsets (Commit still accepts them) and then call Done. The
// member heartbeats meanwhile and rejoins only after Done, so no other
// member is given the partitions before then. The owner must call Done
// within the rebalance timeout, or the coordinator removes the member.
type Revoke struct {
	Generation offsets.Generation
	Partitions []offsetstore.TopicPartition
	done       *doneOnce
}

// Done reports that the partitions are drained and committed. It may be
// called more than once.
func (r Revoke) Done() { r.done.close() }

// Lost says the partitions were taken away without a revoke: the member's
// session expired or the coordinator fenced it (Err says which). The owner
// must stop them without committing; their commits would be refused and
// another member may already own them.
type Lost struct {
	Partitions []offsetstore.TopicPartition
	Err        error
}

func (Assigned) isEvent() {}
func (Revoke) isEvent()   {}
func (Lost) isEvent()     {}

type doneOnce struct {
	once sync.Once
	ch   chan struct{}
}

func (d *doneOnce) close() { d.once.Do(func() { close(d.ch) }) }

// Offset is a partition's offset to commit: the next offset to consume and
// the leader epoch of the last record consumed (-1 if unknown).
type Offset struct {
	offsetstore.TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// Member is one consumer-group member speaking the classic group
// protocol. Run drives it; Events delivers what it was assigned and must
// revoke; Commit commits offsets under its current generation.
type Member struct {
	cfg     Config
	events  chan Event
	snap    atomic.Pointer[snapshot]
	commit  chan *conn // the commit connection, held by the Commit using it
	started atomic.Bool
}

// snapshot is what Commit needs from the Run goroutine: published whole,
// never modified.
type snapshot struct {
	gen      int32
	memberID string
	owned    map[tp]bool
	// replaced is closed when a newer snapshot is published.
	replaced chan struct{}
}

// setSnap publishes snap in place of the current snapshot, and tells
// whoever waits on the old one (only New and the Run goroutine publish).
func (m *Member) setSnap(snap *snapshot) {
	snap.replaced = make(chan struct{})
	if old := m.snap.Swap(snap); old != nil {
		close(old.replaced)
	}
}

// New returns a member for cfg; it joins when Run starts.
func New(cfg Config) (*Member, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Member{cfg: cfg, events: make(chan Event), commit: make(chan *conn, 1)}
	m.commit <- nil
	m.setSnap(&snapshot{gen: -1})
	return m, nil
}

// Events delivers the member's events in order. The owner must read it
// until it is closed (Run closes it when it returns): the member waits for
// each event to be taken, heartbeating meanwhile.
func (m *Member) Events() <-chan Event { return m.events }

// Run joins the group and stays in it until ctx ends; then it revokes
// every partition (the owner drains and commits them, within
// RebalanceTimeout), leaves the group unless the member is static (see
// Config.LeaveOnClose), closes Events and returns nil. It returns an error
// early only for what retrying cannot fix (a configuration the
// coordinator refuses, a fenced instance id). Run may be called once.
func (m *Member) Run(ctx context.Context) error {
	if !m.started.CompareAndSwap(false, true) {
		return errors.New("group: Run called twice on one Member")
	}
	defer close(m.events)
	s := &runState{m: m, cfg: m.cfg, log: m.cfg.Logger, gen: -1, joinedGen: -1, owned: map[tp]bool{}, hbInterval: m.cfg.HeartbeatInterval}
	var err error
	if m.cfg.Protocol == ProtocolConsumer {
		s.consumer = true
		err = s.loop848(ctx)
		s.shutdown848(ctx)
	} else {
		err = s.loop(ctx)
		s.shutdown(ctx)
	}
	s.coord.close()
	c := <-m.commit // wait for a Commit in flight
	c.close()
	m.commit <- nil
	return err
}

// runState is the member's state, owned by the Run goroutine.
type runState struct {
	m        *Member
	cfg      Config
	log      *zap.Logger
	coord    *conn
	memberID string
	gen      int32
	proto    assignor // the group's assignor, nil before the first join
	owned    map[tp]bool
	queue    []Event
	revoking *pendingRevoke // a Revoke the owner has not finished
	rejoin   bool           // the coordinator started a rebalance, or we revoked

	consumer   bool          // the consumer group protocol (KIP-848)
	hbInterval time.Duration // the heartbeat interval in use
	member848  member848     // the consumer protocol's state

	// leaderTopics are the partition counts the last assignment this
	// member computed as leader used (nil: not the leader); metaAt is
	// when they were last checked.
	leaderTopics map[string]int32
	metaAt       time.Time
	// watch is what the member knows of its subscribed topics (see
	// topics.go).
	watch topicWatch

	lastAlive time.Time // the coordinator last renewed our session no earlier than this
	lastHB    time.Time // when the last heartbeat was sent
	// joinedGen is the generation of the coordinator's last JoinGroup
	// answer (classic protocol; -1: none since the member was lost).
	// Heartbeats carry it: between a JoinGroup answer and the SyncGroup
	// that completes it (or a SyncGroup refused because yet another
	// rebalance began) the coordinator knows the member only in it, and
	// would answer a heartbeat of the generation before with
	// ILLEGAL_GENERATION.
	joinedGen int32
}

var errLost = errors.New("the member's session ended")

// errMemberEpochMoved: the member published a new generation (member
// epoch) while a commit under the previous one was being prepared.
var errMemberEpochMoved = errors.New("the member moved to a new member epoch")

type fatalError struct{ error }

func (e fatalError) Unwrap() error { return e.error }

func (s *runState) loop(ctx context.Context) error {
	failures := 0
	for ctx.Err() == nil {
		err := s.joinAndSync(ctx)
		var fe fatalError
		switch {
		case errors.As(err, &fe):
			return fe.error
		case errors.Is(err, errLost):
			s.lose(err)
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			failures++
			if errors.Is(err, kafka.RebalanceInProgress) && failures <= 3 {
				// The coordinator began another rebalance before it
				// answered our SyncGroup: join that one at once, as
				// Kafka's own clients do (a wait would only make the
				// whole group wait for this member).
				s.log.Debug("a new rebalance began before the assignment; rejoining", zap.String("group", s.cfg.Group), zap.Error(err))
				continue
			}
			if err := s.backOff(ctx, "joining the consumer group failed; retrying", failures, err); err != nil {
				if errors.As(err, &fe) {
					return fe.error
				}
				s.lose(err)
			}
			continue
		}
		failures = 0
		// Steady: heartbeat until a rebalance, a loss or the end.
		for !s.rejoin && ctx.Err() == nil {
			if err := s.wait(ctx, waitFor{onRejoin: true}); err != nil {
				if errors.As(err, &fe) {
					return fe.error
				}
				s.lose(err)
				break
			}
		}
	}
	return nil
}

// backOff logs a failed attempt (at debug level for the first three, then
// warn) and waits RetryBackoff, heartbeating meanwhile; it returns what
// the wait returns (a fatal error, or the loss of the session).
func (s *runState) backOff(ctx context.Context, msg string, attempt int, err error) error {
	lvl := zap.DebugLevel
	if attempt > 3 {
		lvl = zap.WarnLevel
	}
	s.log.Check(lvl, msg).Write(zap.String("group", s.cfg.Group), zap.Int("attempt", attempt), zap.Error(err))
	return s.wait(ctx, waitFor{until: time.Now().Add(s.cfg.RetryBackoff)})
}

// publish makes the current generation and assignment visible to Commit.
func (s *runState) publish() {
	owned := make(map[tp]bool, len(s.owned))
	for k := range s.owned {
		owned[k] = true
	}
	s.m.setSnap(&snapshot{gen: s.gen, memberID: s.memberID, owned: owned})
}

// lose gives up every partition without a revoke and forgets the
// generation and member id, so the next join starts afresh.
func (s *runState) lose(err error) {
	s.log.Info("consumer group membership lost; rejoining", zap.String("group", s.cfg.Group), zap.Error(err))
	if r := s.revoking; r != nil {
		select {
		case <-r.done.ch: // the owner finished this revoke: not lost
			for k := range r.set {
				delete(s.owned, k)
			}
		default:
		}
	}
	if len(s.owned) > 0 {
		s.queue = append(s.queue, Lost{Partitions: toTPs(s.owned), Err: err})
	}
	s.owned = map[tp]bool{}
	s.revoking = nil
	s.gen, s.joinedGen, s.memberID = -1, -1, ""
	s.publish()
}

func toTPs(set map[tp]bool) []offsetstore.TopicPartition {
	out := make([]offsetstore.TopicPartition, 0, len(set))
	for _, k := range slices.SortedFunc(mapKeys(set), cmpTP) {
		out = append(out, offsetstore.TopicPartition{Topic: k.topic, Partition: k.part})
	}
	return out
}

func (s *runState) dropConn() {
	s.coord.close()
	s.coord = nil
}

func (s *runState) connect(ctx context.Context) error {
	if s.coord != nil && s.coord.err == nil {
		return nil
	}
	s.dropConn()
	c, err := findCoordinator(ctx, s.cfg.Dial, s.cfg.Brokers, s.cfg.ClientID, s.cfg.Group)
	if err != nil {
		return err
	}
	s.coord = c
	return nil
}

func (s *runState) joinAndSync(ctx context.Context) error {
	if err := s.wait(ctx, waitFor{flushed: true}); err != nil {
		return err
	}
	if s.proto != nil && !s.proto.cooperative() && len(s.owned) > 0 {
		// Eager: give everything up before joining.
		if err := s.revoke(ctx, s.owned); err != nil {
			return err
		}
	}
	if err := s.connect(ctx); err != nil {
		return err
	}
	jr, err := s.join(ctx)
	if err != nil {
		return err
	}
	if jr.GenerationID != s.gen && s.gen >= 0 {
		// The group moved to a new generation: a commit of ours under
		// the old one would be refused from now on. Refuse them here,
		// and let one in flight finish before we sync, so that no
		// commit of an older generation follows our SyncGroup (the
		// owner commits again once it has the new generation).
		// (Not cut short by ctx: a commit in flight is bounded by its
		// own deadline, and a member stopping between JoinGroup and
		// SyncGroup is what the group would wait on.)
		s.m.setSnap(&snapshot{gen: -1})
		c := <-s.m.commit
		s.m.commit <- c
	}
	s.rejoin = false
	proto, err := assignorFor(jr.ProtocolName)
	if err != nil {
		return fatalError{fmt.Errorf("the group chose assignor %q, which this member did not offer: %w", jr.ProtocolName, err)}
	}
	var plan []syncgroup.RequestAssignment
	s.leaderTopics = nil
	if jr.LeaderID == jr.MemberID {
		plan, err = s.lead(ctx, proto, jr.Members)
		if err != nil {
			return err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, s.cfg.RebalanceTimeout+s.cfg.SessionTimeout)
	defer cancel()
	resp, err := s.coord.roundTrip(sctx, minSyncGroup, &syncgroup.Request{
		GroupID: s.cfg.Group, GenerationID: jr.GenerationID, MemberID: s.memberID, GroupInstanceID: s.cfg.InstanceID,
		ProtocolType: "consumer", ProtocolName: jr.ProtocolName, Assignments: plan,
	})
	if err != nil {
		s.dropConn()
		return err
	}
	sr := resp.(*syncgroup.Response)
	if sr.ErrorCode == 0 || kafka.Error(sr.ErrorCode) == kafka.RebalanceInProgress {
		// The coordinator renews the session of every member it
		// answers a SyncGroup, also to say that a new rebalance began.
		s.renewed(time.Now())
	}
	if err := s.groupError("SyncGroup", sr.ErrorCode); err != nil {
		return err
	}
	assigned, err := decodeAssignment(sr.Assignments)
	if err != nil {
		return err
	}
	s.gen, s.proto = jr.GenerationID, proto
	next := map[tp]bool{}
	for t, ps := range assigned {
		for _, p := range ps {
			next[tp{t, p}] = true
		}
	}
	added, revoked := map[tp]bool{}, map[tp]bool{}
	for k := range next {
		if !s.owned[k] {
			added[k] = true
			s.owned[k] = true
		}
	}
	for k := range s.owned {
		if !next[k] {
			revoked[k] = true
		}
	}
	s.publish()
	s.log.Info("joined the consumer group", zap.String("group", s.cfg.Group), zap.Int32("generation", s.gen),
		zap.String("assignor", proto.name()), zap.Int("assigned", len(next)), zap.Int("added", len(added)), zap.Int("revoked", len(revoked)))
	parts, err := s.assignedOffsets(ctx, added)
	if err != nil {
		// Without their offsets the owner cannot start them: give them
		// back (the next rebalance sees them unowned) and rejoin.
		for k := range added {
			delete(s.owned, k)
		}
		s.publish()
		if errors.Is(err, errLost) || errors.As(err, new(fatalError)) {
			return err
		}
		s.log.Warn("fetching committed offsets failed; rejoining", zap.String("group", s.cfg.Group), zap.Error(err))
		s.rejoin = true
		return nil
	}
	s.queue = append(s.queue, Assigned{Generation: offsets.Generation(s.gen), Partitions: parts})
	if len(revoked) > 0 {
		if err := s.revoke(ctx, revoked); err != nil {
			return err
		}
		s.rejoin = true // the revoked partitions wait for us to rejoin
	}
	return nil
}

// join sends JoinGroup until it succeeds or fails for good.
func (s *runState) join(ctx context.Context) (*joingroup.Response, error) {
	var protos []joingroup.RequestProtocol
	for _, name := range s.cfg.Assignors {
		a, _ := assignorFor(name)
		var owned map[string][]int32
		gen := int32(-1)
		if a.cooperative() {
			owned = map[string][]int32{}
			for k := range s.owned {
				owned[k.topic] = append(owned[k.topic], k.part)
			}
			gen = s.gen
		}
		protos = append(protos, joingroup.RequestProtocol{Name: name,
			Metadata: encodeSubscription(s.cfg.Topics, owned, gen, s.cfg.Rack, a.userData(gen))})
	}
	for {
		jctx, cancel := context.WithTimeout(ctx, s.cfg.RebalanceTimeout+s.cfg.SessionTimeout)
		resp, err := s.coord.roundTrip(jctx, minJoinGroup, &joingroup.Request{
			GroupID: s.cfg.Group, SessionTimeoutMS: int32(s.cfg.SessionTimeout.Milliseconds()),
			RebalanceTimeoutMS: int32(s.cfg.RebalanceTimeout.Milliseconds()), MemberID: s.memberID,
			GroupInstanceID: s.cfg.InstanceID, ProtocolType: "consumer", Protocols: protos,
		})
		cancel()
		if err != nil {
			s.dropConn()
			return nil, err
		}
		r := resp.(*joingroup.Response)
		if kafka.Error(r.ErrorCode) == kafka.MemberIDRequired {
			s.memberID = r.MemberID
			continue
		}
		if err := s.groupError("JoinGroup", r.ErrorCode); err != nil {
			return nil, err
		}
		// The answer is proof of life: the coordinator held the
		// JoinGroup until the join phase ended (up to the rebalance
		// timeout, while it waits for a member that may be dead) and
		// then renewed the session of every member it answers. Time
		// spent in it is not time without heartbeats.
		s.renewed(time.Now())
		s.memberID, s.joinedGen = r.MemberID, r.GenerationID
		return r, nil
	}
}

// groupError classifies a JoinGroup, SyncGroup or Heartbeat error code
// by the shared table (kafkawire). REBALANCE_IN_PROGRESS is StaleMember
// there (a commit under the ending generation is refused), but the member
// itself is not lost: it keeps its partitions and joins the new
// generation.
func (s *runState) groupError(req string, code int16) error {
	if code == 0 {
		return nil
	}
	err := fmt.Errorf("%s for group %q: %w", req, s.cfg.Group, kafka.Error(code))
	switch c := kafkawire.ClassifyCode(code); {
	case code == int16(kafka.RebalanceInProgress):
		s.rejoin = true
		return err
	case c == kafkawire.StaleMember:
		return fmt.Errorf("%w: %w", errLost, err)
	case c == kafkawire.Fencing:
		return fatalError{fmt.Errorf("%w (%q): %w", ErrFencedInstance, s.cfg.InstanceID, err)}
	case c == kafkawire.NotCoordinator:
		s.dropConn()
		return err
	case memberFatal(code):
		return fatalError{s.fatalHint(err, code)}
	}
	return err
}

// memberFatal reports the codes that end the member: the Fatal ones
// (kafkawire) but TOPIC_AUTHORIZATION_FAILED, which concerns one
// subscribed topic, not the group: it is retried (and the fetch step
// reports the topic).
func memberFatal(code int16) bool {
	return kafkawire.ClassifyCode(code) == kafkawire.Fatal && code != int16(kafka.TopicAuthorizationFailed)
}

// fatalHint adds to err, a group request's Fatal error, what to check.
func (s *runState) fatalHint(err error, code int16) error {
	switch kafka.Error(code) {
	case kafka.InconsistentGroupProtocol:
		return fmt.Errorf("%w: the group's members share no assignor (this member offers %v)", err, s.cfg.Assignors)
	case kafka.InvalidSessionTimeout:
		return fmt.Errorf("%w: session timeout %v is outside the broker's group.min/max.session.timeout.ms", err, s.cfg.SessionTimeout)
	case kafka.GroupAuthorizationFailed:
		return fmt.Errorf("%w: the principal may not use this group; check the group ACLs", err)
	case kafka.GroupMaxSizeReached:
		return fmt.Errorf("%w: the group is at the broker's group.max.size", err)
	case kafka.Error(kerr.UnsupportedAssignor.Code):
		return fmt.Errorf("%w: consumer.remote_assignor %q is not enabled on the brokers", err, s.cfg.RemoteAssignor)
	case kafka.UnsupportedVersion:
		if s.cfg.Protocol == ProtocolConsumer {
			return fmt.Errorf("%w: the consumer group protocol needs Kafka 4.0 or later", err)
		}
	}
	return err
}

// lead runs the assignor on the members' subscriptions.
func (s *runState) lead(ctx context.Context, a assignor, members []joingroup.ResponseMember) ([]syncgroup.RequestAssignment, error) {
	metas := make([]memberMeta, 0, len(members))
	topicSet := map[string]bool{}
	for _, jm := range members {
		mm, err := decodeSubscription(jm.MemberID, jm.GroupInstanceID, jm.Metadata)
		if err != nil {
			return nil, err
		}
		metas = append(metas, mm)
		for _, t := range mm.Topics {
			topicSet[t] = true
		}
	}
	topics, err := s.leaderMetadata(ctx, sortedKeys(topicSet))
	if err != nil {
		return nil, err
	}
	s.leaderTopics, s.metaAt = topics, time.Now()
	plan := a.assign(metas, topics)
	if a.cooperative() {
		adjustCooperative(plan, metas)
	}
	out := make([]syncgroup.RequestAssignment, 0, len(metas))
	for _, mm := range metas {
		out = append(out, syncgroup.RequestAssignment{MemberID: mm.ID, Assignment: encodeAssignment(plan[mm.ID])})
	}
	return out, nil
}

// errRebalanced ends a wait for stable offsets: the coordinator started a
// rebalance (classic) or sent a newer assignment (consumer protocol).
var errRebalanced = errors.New("the assignment changed while waiting for stable offsets")

// fetchCommitted reads the committed offsets of the partitions. With
// Config.RequireStable, while the coordinator answers that a transaction
// has offsets pending for them (UNSTABLE_OFFSET_COMMIT) it waits
// RetryBackoff and asks again, heartbeating and delivering queued events
// meanwhile, for up to RebalanceTimeout; it stops with an error wrapping
// errRebalanced when the assignment changes meanwhile, or with what the
// wait returns (the session's loss, a fatal error).
func (s *runState) fetchCommitted(ctx context.Context, set map[tp]bool) ([]Partition, error) {
	if len(set) == 0 {
		return nil, nil
	}
	began := time.Now()
	for attempt := 1; ; attempt++ {
		parts, err := s.fetchOnce(ctx, set)
		if !errors.Is(err, kerr.UnstableOffsetCommit) {
			return parts, err
		}
		waited := time.Since(began)
		if waited >= s.cfg.RebalanceTimeout {
			return nil, fmt.Errorf("%w; still pending after %v (the rebalance timeout): a transaction with their offsets is still open", err, waited.Round(time.Millisecond))
		}
		lvl := zap.DebugLevel
		if attempt > 20 {
			lvl = zap.WarnLevel
		}
		s.log.Check(lvl, "committed offsets are pending in a transaction; waiting until they are stable").Write(
			zap.String("group", s.cfg.Group), zap.Int("attempt", attempt), zap.Duration("waited", waited), zap.Error(err))
		if err := s.wait(ctx, waitFor{until: time.Now().Add(s.cfg.RetryBackoff), onRejoin: true}); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if s.rejoin {
			return nil, fmt.Errorf("%w: %w", errRebalanced, err)
		}
	}
}

// fetchOnce sends one OffsetFetch for the partitions; an error wraps
// kerr.UnstableOffsetCommit when the coordinator answered that for the
// group or for a partition (and no other error).
func (s *runState) fetchOnce(ctx context.Context, set map[tp]bool) ([]Partition, error) {
	byTopic := map[string][]int32{}
	for k := range set {
		byTopic[k.topic] = append(byTopic[k.topic], k.part)
	}
	// Framed with kmsg: kafka-go's offsetfetch stops at v5, before
	// RequireStable.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = s.cfg.Group, s.cfg.RequireStable
	for _, t := range sortedKeys(byTopic) {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = t, byTopic[t]
		req.Topics = append(req.Topics, rt)
	}
	minVersion := int16(minOffsetFetch)
	if s.cfg.RequireStable {
		minVersion = minOffsetFetchStable
	}
	fctx, cancel := context.WithTimeout(ctx, s.cfg.SessionTimeout)
	defer cancel()
	if err := s.connect(fctx); err != nil {
		return nil, err
	}
	r := kmsg.NewPtrOffsetFetchResponse()
	if err := s.coord.roundTripKmsgUpTo(fctx, minVersion, maxOffsetFetch, req, r); err != nil {
		s.dropConn()
		if s.cfg.RequireStable && errors.Is(err, ErrUnsupportedBroker) {
			return nil, fatalError{fmt.Errorf("%w (RequireStable, set for exactly-once, needs OffsetFetch v7: Kafka 2.5 or later)", err)}
		}
		return nil, err
	}
	if r.ErrorCode != 0 {
		if isCoordinatorError(r.ErrorCode) {
			s.dropConn()
		}
		if r.ErrorCode == kerr.UnstableOffsetCommit.Code {
			return nil, fmt.Errorf("OffsetFetch for group %q: %w", s.cfg.Group, kerr.UnstableOffsetCommit)
		}
		return nil, fmt.Errorf("OffsetFetch for group %q: %w", s.cfg.Group, kafka.Error(r.ErrorCode))
	}
	got := map[tp]Partition{}
	var unstable []string
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == kerr.UnstableOffsetCommit.Code {
				unstable = append(unstable, fmt.Sprintf("%s/%d", t.Topic, p.Partition))
				continue
			}
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("OffsetFetch for group %q, %s/%d: %w", s.cfg.Group, t.Topic, p.Partition, kafka.Error(p.ErrorCode))
			}
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			got[tp{t.Topic, p.Partition}] = Partition{
				TopicPartition: offsetstore.TopicPartition{Topic: t.Topic, Partition: p.Partition},
				Committed:      p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: meta,
			}
		}
	}
	if len(unstable) > 0 {
		return nil, fmt.Errorf("OffsetFetch for group %q, %s: %w", s.cfg.Group, strings.Join(unstable, ", "), kerr.UnstableOffsetCommit)
	}
	out := make([]Partition, 0, len(set))
	for _, k := range slices.SortedFunc(mapKeys(set), cmpTP) {
		p, ok := got[k]
		if !ok {
			return nil, fmt.Errorf("OffsetFetch for group %q did not answer for %s/%d", s.cfg.Group, k.topic, k.part)
		}
		if p.Committed < 0 {
			p.Committed, p.LeaderEpoch = -1, -1
		}
		out = append(out, p)
	}
	return out, nil
}

// revoke asks the owner to give up set and waits for it, heartbeating;
// the partitions stay committable until then. A revoke interrupted (ctx
// ended) stays pending: the next revoke waits for it rather than asking
// twice.
func (s *runState) revoke(ctx context.Context, set map[tp]bool) error {
	if s.revoking == nil {
		d := &doneOnce{ch: make(chan struct{})}
		s.revoking = &pendingRevoke{set: maps.Clone(set), done: d}
		s.queue = append(s.queue, Revoke{Generation: offsets.Generation(s.gen), Partitions: toTPs(set), done: d})
	}
	r := s.revoking
	if err := s.wait(ctx, waitFor{done: r.done.ch}); err != nil {
		return err
	}
	select {
	case <-r.done.ch:
	default:
		return context.Cause(ctx)
	}
	s.revoking = nil
	rest := map[tp]bool{}
	for k := range set {
		if !r.set[k] {
			rest[k] = true
		}
	}
	for k := range r.set {
		delete(s.owned, k)
	}
	s.publish()
	if len(rest) > 0 {
		return s.revoke(ctx, rest)
	}
	return nil
}

type pendingRevoke struct {
	set  map[tp]bool
	done *doneOnce
}

// waitFor says what ends a wait.
type waitFor struct {
	until    time.Time     // a time (zero: none)
	done     chan struct{} // a channel closing
	onRejoin bool          // the coordinator starting a rebalance
	flushed  bool          // every queued event delivered
}

// wait blocks until what w names happens or ctx ends. Meanwhile it
// delivers queued events and, while the member is in a generation,
// heartbeats; it returns an error wrapping errLost when the session ended
// (the coordinator fenced the member, or no heartbeat was answered for a
// session timeout), a fatalError, or nil.
func (s *runState) wait(ctx context.Context, w waitFor) error {
	var until <-chan time.Time
	if !w.until.IsZero() {
		t := time.NewTimer(time.Until(w.until))
		defer t.Stop()
		until = t.C
	}
	for {
		if w.flushed && len(s.queue) == 0 {
			return nil
		}
		if w.onRejoin && s.rejoin {
			return nil
		}
		var out chan Event
		var next Event
		if len(s.queue) > 0 {
			out, next = s.m.events, s.queue[0]
		}
		var hb, lost <-chan time.Time
		var hbTimer, lostTimer *time.Timer
		if s.gen >= 0 {
			left := time.Until(s.lastAlive.Add(s.aliveFor()))
			if left <= 0 {
				return fmt.Errorf("%w: no heartbeat answered for %v (the session or rebalance timeout, less a margin)", errLost, s.aliveFor())
			}
			lostTimer = time.NewTimer(left)
			lost = lostTimer.C
			hbTimer = time.NewTimer(time.Until(s.lastHB.Add(s.hbInterval)))
			hb = hbTimer.C
		}
		var meta <-chan time.Time
		var metaTimer *time.Timer
		if w.onRejoin && !s.consumer && s.leaderTopics != nil {
			metaTimer = time.NewTimer(time.Until(s.metaAt.Add(s.cfg.MetadataInterval)))
			meta = metaTimer.C
		}
		var err error
		stop := false
		select {
		case <-ctx.Done():
			stop = true
		case <-until:
			stop = true
		case <-w.done:
			stop = true
		case out <- next:
			s.queue = s.queue[1:]
		case <-hb:
			if s.consumer {
				err = s.heartbeat848(ctx)
			} else {
				err = s.heartbeat(ctx)
			}
		case <-lost: // checked at the top of the loop
		case <-meta:
			s.checkPartitions(ctx)
		}
		if metaTimer != nil {
			metaTimer.Stop()
		}
		if hbTimer != nil {
			hbTimer.Stop()
			lostTimer.Stop()
		}
		if stop || err != nil {
			return err
		}
	}
}

// aliveFor is how long after the coordinator last renewed the session the
// member may still be sure it is in the generation: the coordinator
// removes it a session timeout after that, or a rebalance timeout after a
// rebalance it did not hear of began (which was after that renewal).
// A margin (a tenth, at most two heartbeat intervals) absorbs timer and
// scheduling delays.
func (s *runState) aliveFor() time.Duration {
	d := min(s.cfg.SessionTimeout, s.cfg.RebalanceTimeout)
	if s.consumer {
		// The consumer protocol's broker sets the heartbeat interval
		// (group.consumer.heartbeat.interval.ms) and its own session
		// timeout, which is at least a few intervals: a local bound
		// shorter than that would declare a healthy member lost.
		d = max(d, 3*s.hbInterval)
	}
	return d - min(d/10, 2*s.hbInterval)
}

// renewed notes that the coordinator renewed the session no earlier than
// at: an answer that proves the member is in the group (a heartbeat's, a
// JoinGroup's, a SyncGroup's). The next heartbeat is due an interval
// later.
func (s *runState) renewed(at time.Time) {
	if at.After(s.lastAlive) {
		s.lastAlive = at
	}
	s.lastHB = at
}

// heartbeat sends one heartbeat, bounded by the session's end.
func (s *runState) heartbeat(ctx context.Context) error {
	hctx, cancel := context.WithDeadline(ctx, s.lastAlive.Add(s.aliveFor()))
	defer cancel()
	sent := time.Now()
	s.lastHB = sent
	if err := s.connect(hctx); err != nil {
		return nil // the next heartbeat tries again, until the session ends
	}
	// Framed with kmsg: kafka-go's heartbeat.Response decodes v1+ with
	// ErrorCode and ThrottleTimeMs swapped, reading every error as 0.
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.Generation, req.MemberID = s.cfg.Group, max(s.gen, s.joinedGen), s.memberID
	if s.cfg.InstanceID != "" {
		req.InstanceID = &s.cfg.InstanceID
	}
	resp := kmsg.NewPtrHeartbeatResponse()
	if err := s.coord.roundTripKmsg(hctx, minHeartbeat, req, resp); err != nil {
		s.dropConn()
		s.log.Debug("heartbeat failed", zap.String("group", s.cfg.Group), zap.Error(err))
		return nil
	}
	code := resp.ErrorCode
	if code == 0 || kafka.Error(code) == kafka.RebalanceInProgress {
		s.lastAlive = sent // the coordinator renewed the session on receipt
	}
	err := s.groupError("Heartbeat", code)
	if err != nil && (errors.Is(err, errLost) || errors.As(err, new(fatalError))) {
		return err
	}
	return nil
}

// shutdown revokes every partition and leaves the group (dynamic members,
// or static ones with LeaveOnClose). It runs after ctx ended, on a context
// of its own bounded by the rebalance timeout.
func (s *runState) shutdown(parent context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), s.cfg.RebalanceTimeout)
	defer cancel()
	if len(s.owned) > 0 && s.gen >= 0 {
		if err := s.revoke(ctx, s.owned); err != nil {
			if errors.Is(err, errLost) {
				s.lose(err)
			}
		}
	}
	if len(s.owned) > 0 {
		s.lose(errors.New("the member stopped before the owner finished revoking"))
	}
	_ = s.wait(ctx, waitFor{flushed: true})
	if s.memberID == "" || (s.cfg.InstanceID != "" && !s.cfg.LeaveOnClose) {
		return
	}
	lctx, lcancel := context.WithTimeout(ctx, min(s.cfg.SessionTimeout, 5*time.Second))
	defer lcancel()
	if err := s.connect(lctx); err != nil {
		return
	}
	// Framed with kmsg: kafka-go's leavegroup.Response has the same
	// field-order bug as its heartbeat.Response.
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = s.cfg.Group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = s.memberID
	if s.cfg.InstanceID != "" {
		lm.InstanceID = &s.cfg.InstanceID
	}
	req.Members = append(req.Members, lm)
	resp := kmsg.NewPtrLeaveGroupResponse()
	if err := s.coord.roundTripKmsg(lctx, minLeaveGroup, req, resp); err != nil {
		s.log.Info("leaving the consumer group failed; the coordinator removes the member after the session timeout",
			zap.String("group", s.cfg.Group), zap.Error(err))
		return
	}
	code := resp.ErrorCode
	for _, m := range resp.Members {
		if code == 0 {
			code = m.ErrorCode
		}
	}
	if code != 0 {
		s.log.Info("leaving the consumer group failed", zap.String("group", s.cfg.Group), zap.Error(kafka.Error(code)))
	}
	s.gen, s.joinedGen = -1, -1
	s.publish()
}

// Commit commits offs under the member's current generation, member id
// and instance id (OffsetCommit v7+, with each offset's leader epoch).
// Every partition must be assigned to the member (a partition being
// revoked still is, until Revoke.Done). It returns an error wrapping
// offsets.ErrGenerationEnded if the member is not in a generation, a
// partition is not assigned to it, or the coordinator fenced the commit
// (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS,
// FENCED_INSTANCE_ID; with the consumer protocol FENCED_MEMBER_EPOCH, and
// STALE_MEMBER_EPOCH unless the member, moved to a new member epoch,
// still owns the partitions: then they are committed again under it):
// those offsets must not be committed again. Safe for concurrent use;
// calls are serialized.
func (m *Member) Commit(ctx context.Context, offs []Offset) error {
	return m.commitOffsets(ctx, offs)
}

// Identity returns what a transaction's offset commit (KIP-447) carries
// for this member: its generation (the member epoch under the consumer
// protocol), member id and instance id, once it checked that every one of
// tps is assigned to it in that generation. Its error wraps
// offsets.ErrGenerationEnded, as Commit's does, when the member is in no
// generation or does not own one of tps. Safe for concurrent use.
func (m *Member) Identity(tps []offsetstore.TopicPartition) (gen int32, memberID, instanceID string, err error) {
	snap := m.snap.Load()
	if snap.gen < 0 {
		return 0, "", "", fmt.Errorf("group %q: the member is in no generation: %w", m.cfg.Group, offsets.ErrGenerationEnded)
	}
	for _, p := range tps {
		if !snap.owned[tp{p.Topic, p.Partition}] {
			return 0, "", "", fmt.Errorf("group %q: %s is not assigned to this member in generation %d: %w",
				m.cfg.Group, p, snap.gen, offsets.ErrGenerationEnded)
		}
	}
	return snap.gen, snap.memberID, m.cfg.InstanceID, nil
}

func (m *Member) commitOffsets(ctx context.Context, offs []Offset) error {
	if len(offs) == 0 {
		return nil
	}
	snap := m.snap.Load()
	if snap.gen < 0 {
		return fmt.Errorf("commit to group %q: the member is in no generation: %w", m.cfg.Group, offsets.ErrGenerationEnded)
	}
	byTopic := map[string][]offsetcommit.RequestPartition{}
	for _, o := range offs {
		if !snap.owned[tp{o.Topic, o.Partition}] {
			return fmt.Errorf("commit to group %q: %s is not assigned to this member in generation %d: %w",
				m.cfg.Group, o.TopicPartition, snap.gen, offsets.ErrGenerationEnded)
		}
		byTopic[o.Topic] = append(byTopic[o.Topic], offsetcommit.RequestPartition{
			PartitionIndex: o.Partition, CommittedOffset: o.Offset, CommittedLeaderEpoch: o.LeaderEpoch, CommittedMetadata: o.Metadata,
		})
	}
	if m.cfg.Protocol == ProtocolConsumer {
		return m.commit848(ctx, snap, offs)
	}
	req := &offsetcommit.Request{GroupID: m.cfg.Group, GenerationID: snap.gen, MemberID: snap.memberID, GroupInstanceID: m.cfg.InstanceID}
	for _, t := range sortedKeys(byTopic) {
		req.Topics = append(req.Topics, offsetcommit.RequestTopic{Name: t, Partitions: byTopic[t]})
	}
	return m.commitWith(ctx, snap, "generation", func(ctx context.Context, c *conn) ([]partitionCode, error) {
		resp, err := c.roundTrip(ctx, minOffsetCommit, req)
		if err != nil {
			return nil, err
		}
		var codes []partitionCode
		for _, t := range resp.(*offsetcommit.Response).Topics {
			for _, p := range t.Partitions {
				codes = append(codes, partitionCode{t.Name, p.PartitionIndex, p.ErrorCode})
			}
		}
		return codes, nil
	})
}

// partitionCode is one partition's error code in a commit's answer.
type partitionCode struct {
	topic     string
	partition int32
	code      int16
}

// commitWith sends a commit (send makes one attempt on the coordinator's
// connection and returns the partitions' codes) with the commit
// connection held, up to three times while the coordinator moves. It
// fails with an error wrapping offsets.ErrGenerationEnded when the
// generation (the consumer protocol: the member epoch, named by epochName)
// of snap ended or the coordinator fenced the commit.
func (m *Member) commitWith(ctx context.Context, snap *snapshot, epochName string, send func(context.Context, *conn) ([]partitionCode, error)) error {
	var c *conn
	select {
	case c = <-m.commit:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { m.commit <- c }()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if cur := m.snap.Load(); cur.gen != snap.gen || cur.memberID != snap.memberID {
			return fmt.Errorf("commit to group %q: %s %d ended: %w: %w", m.cfg.Group, epochName, snap.gen, errMemberEpochMoved, offsets.ErrGenerationEnded)
		}
		if c == nil || c.err != nil {
			c.close()
			var err error
			c, err = findCoordinator(ctx, m.cfg.Dial, m.cfg.Brokers, m.cfg.ClientID, m.cfg.Group)
			if err != nil {
				lastErr, c = err, nil
				continue
			}
		}
		codes, err := send(ctx, c)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			lastErr = err
			continue
		}
		retry := false
		var errs []error
		for _, p := range codes {
			if p.code == 0 {
				continue
			}
			e := kerr.ErrorForCode(p.code)
			switch kafkawire.ClassifyCode(p.code) {
			case kafkawire.StaleMember, kafkawire.Fencing:
				// the generation is over for this member (a rebalance,
				// or another member took its group.instance.id)
				return fmt.Errorf("commit to group %q, %s %d, %s/%d: %w: %w",
					m.cfg.Group, epochName, snap.gen, p.topic, p.partition, e, offsets.ErrGenerationEnded)
			case kafkawire.NotCoordinator:
				retry = true
			default:
				errs = append(errs, fmt.Errorf("%s/%d: %w", p.topic, p.partition, e))
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("commit to group %q: %w", m.cfg.Group, errors.Join(errs...))
		}
		if !retry {
			return nil
		}
		c.close()
		c = nil
		lastErr = fmt.Errorf("commit to group %q: the coordinator moved", m.cfg.Group)
	}
	return lastErr
}
