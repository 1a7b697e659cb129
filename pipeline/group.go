package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sourcegraph/conc"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/group"
	"github.com/fencepost-dev/fencepost/internal/produce"
	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// member is this process's membership in the consumer group: it turns
// the group member's events into the coordinator's. An assignment
// becomes an assignEvent; a revoke becomes a revokeEvent it waits for
// (drain, final commit) before telling the member it is done, which is
// when the member rejoins and the partitions may move; a loss releases
// the partitions without a commit. The coordinator stays the one owner
// of partition state: this only relays.
type member struct {
	cfg  Config
	conn *connection
	loop *coordinatorLoop
	log  *zap.Logger
	obs  Observer // nil: none

	// finalErr is the error of the revoke that ended the last generation
	// on shutdown (its final commit failed), nil if it succeeded.
	finalErr error

	// What the coordinator was told, owned by run's goroutine: the
	// generation and its store, and the partitions assigned.
	gen   offsets.Generation
	store offsets.CommitStore
	owned map[offsetstore.TopicPartition]bool
	// txn, under exactly_once, is the transactional producer the
	// generations' stores commit with.
	txn *produce.Producer
	// state is the stores of stateful stages (nil: none): their staged
	// changes are applied when a transaction commits, dropped when it
	// aborts.
	state *state.Manager
	// fencing watches the transactional producer's fencings across
	// generations (exactly_once)
	fencing *fencingRule
	// idleSince is when this member last had no partition (the start of
	// Run, or the end of a revoke that took them all).
	idleSince time.Time
	// stats, if set, is told when the member holds no partition
	// (Stats.UnassignedSince).
	stats *pipelineStats
}

// setIdle records that the member holds no partition since t, for the
// rebalance observer and Stats.UnassignedSince.
func (m *member) setIdle(t time.Time) {
	m.idleSince = t
	if m.stats != nil {
		m.stats.unassigned.Store(t.UnixNano())
	}
}

// run is the membership loop. It returns when ctx ends (after the last
// partitions were revoked, committed and, unless the member is static,
// the group left), or when the member fails for good.
func (m *member) run(ctx context.Context) error {
	k := m.cfg.Consumer
	assignors := []string{k.Assignor}
	if k.Assignor == AssignorCooperativeSticky {
		// so the group can form with members that know only range
		// (see ConsumerConfig.Assignor)
		assignors = append(assignors, AssignorRange)
	}
	gm, err := group.New(group.Config{
		Brokers:           m.cfg.Kafka.Brokers,
		Group:             k.Group,
		Topics:            k.Topics,
		InstanceID:        k.GroupInstanceID,
		LeaveOnClose:      k.LeaveGroupOnClose,
		Assignors:         assignors,
		SessionTimeout:    k.SessionTimeout,
		RebalanceTimeout:  k.RebalanceTimeout,
		HeartbeatInterval: k.HeartbeatInterval,
		MetadataInterval:  max(m.cfg.Kafka.MetadataMaxAge, time.Second),
		Protocol:          k.GroupProtocol,
		RemoteAssignor:    k.RemoteAssignor,
		// read_committed (exactly_once turns it on): a partition whose
		// previous owner's transaction still completes is not started
		// from the offset before it (KIP-447)
		RequireStable: k.ReadCommitted,
		ClientID:      m.cfg.Kafka.ClientID,
		Dial:          m.conn.fetchDialer().DialNet,
		Logger:        m.log,
	})
	if err != nil {
		return fmt.Errorf("consumer group %q: %w", k.Group, err)
	}
	m.gen, m.owned = offsets.NoGeneration, map[offsetstore.TopicPartition]bool{}
	m.setIdle(time.Now())
	if m.stats != nil {
		m.stats.grace.Store(int64(max(m.cfg.Kafka.MetadataMaxAge, time.Second) + k.SessionTimeout + k.RebalanceTimeout))
	}
	var wg conc.WaitGroup
	var runErr error
	wg.Go(func() { runErr = gm.Run(ctx) })
	for ev := range gm.Events() {
		switch e := ev.(type) {
		case group.Assigned:
			m.assigned(ctx, gm, e)
		case group.Revoke:
			m.revoke(ctx, gm, e.Generation, e.Partitions, false)
			e.Done()
		case group.Lost:
			m.log.Warn("consumer group: partitions lost", zap.String("group", k.Group),
				zap.Int("partitions", len(e.Partitions)), zap.Error(e.Err))
			m.revoke(ctx, gm, m.gen, e.Partitions, true)
		}
	}
	wg.Wait()
	if errors.Is(runErr, group.ErrFencedInstance) {
		return fmt.Errorf("consumer group %q: %w: two processes run with consumer.group_instance_id %q; "+
			"give every instance its own group_instance_id", k.Group, runErr, k.GroupInstanceID)
	}
	if runErr != nil {
		return fmt.Errorf("consumer group %q: %w", k.Group, runErr)
	}
	return nil
}

// assigned moves the coordinator to the member's new generation with the
// partitions it gained; those it owns already go on.
func (m *member) assigned(ctx context.Context, gm *group.Member, e group.Assigned) {
	parts := make([]assignedPartition, 0, len(e.Partitions))
	for _, p := range e.Partitions {
		start := offsetstore.ByPolicy()
		if p.Committed >= 0 {
			// with the committed leader epoch, the position is checked
			// against the leader's log before fetching (KIP-320)
			start = offsetstore.CommittedAt(p.Committed, p.LeaderEpoch)
		}
		parts = append(parts, assignedPartition{tp: p.TopicPartition, start: start, recreated: p.TopicRecreated})
		m.owned[p.TopicPartition] = true
	}
	m.newGeneration(ctx, gm, e.Generation, parts)
	if len(m.owned) > 0 && m.stats != nil {
		m.stats.unassigned.Store(0)
	}
	m.log.Info("generation started", zap.String("group", m.cfg.Consumer.Group), zap.Int32("generation", int32(e.Generation)),
		zap.Int("added", len(parts)), zap.Int("partitions", len(m.owned)))
	if m.obs != nil {
		var paused time.Duration
		if len(m.owned) == len(parts) {
			paused = time.Since(m.idleSince) // it had nothing before
		}
		m.obs.Rebalanced(Rebalance{Generation: int32(e.Generation), Partitions: len(m.owned), Paused: paused})
	}
}

func (m *member) newGeneration(ctx context.Context, gm *group.Member, gen offsets.Generation, parts []assignedPartition) {
	m.gen = gen
	if m.txn != nil {
		if m.fencing == nil {
			m.fencing = newFencingRule(m.cfg, m.txn.TransactionalID())
		}
		m.store = &txnStore{prod: m.txn, gm: gm, group: m.cfg.Consumer.Group, gen: gen, fencing: m.fencing, state: m.state}
	} else {
		m.store = &memberStore{m: gm, gen: gen}
	}
	m.loop.send(ctx, &assignEvent{gen: gen, store: m.store, partitions: parts})
}

// revoke has the coordinator give up tps (drain, final commit, release;
// or, lost, release at once) and waits until it did, or its deadline
// passed.
func (m *member) revoke(ctx context.Context, gm *group.Member, gen offsets.Generation, tps []offsetstore.TopicPartition, lost bool) {
	if gen != m.gen && !lost {
		// The member moved to a new generation before revoking (a
		// cooperative rebalance; under the consumer protocol, an epoch
		// the coordinator moved it to with its partitions unchanged):
		// the coordinator moves too, keeping its partitions, so the
		// final commit carries it. Not under ctx: at a stop it has
		// ended, and a send that gave up would leave the coordinator
		// in the old generation, which then drops the revoke without
		// draining or committing.
		m.newGeneration(context.WithoutCancel(ctx), gm, gen, nil)
	}
	var mine []offsetstore.TopicPartition
	for _, tp := range tps {
		if m.owned[tp] {
			mine = append(mine, tp)
		}
	}
	if len(mine) == 0 {
		return
	}
	all := len(mine) == len(m.owned)
	ev := &revokeEvent{gen: m.gen, lost: lost, done: make(chan error, 1)}
	if !all {
		ev.partitions = mine // the others keep going
	}
	now := time.Now()
	stopping := ctx.Err() != nil
	total := m.cfg.Consumer.RebalanceTimeout * 3 / 4
	if stopping {
		// graceful stop: the run's hard deadline is ShutdownTimeout
		// after ctx ended; keep a little of it to leave the group
		total = m.cfg.ShutdownTimeout - m.cfg.ShutdownTimeout/20
	}
	ev.deadline = now.Add(total)
	ev.drainBy = now.Add(total * 2 / 3)
	if !lost {
		what := "rebalance: revoking partitions"
		if stopping {
			what = "stopping"
		}
		m.log.Info(what+": in-flight records may finish until the drain deadline, then the processed offsets are committed",
			zap.Int32("generation", int32(m.gen)), zap.Int("partitions", len(mine)), zap.Int("staying", len(m.owned)-len(mine)),
			zap.Duration("drain_deadline", ev.drainBy.Sub(now).Round(time.Millisecond)),
			zap.Duration("commit_deadline", total.Round(time.Millisecond)))
	}
	rctx, cancel := context.WithDeadline(context.Background(), ev.deadline.Add(time.Second))
	defer cancel()
	for _, tp := range mine {
		delete(m.owned, tp)
	}
	if len(m.owned) == 0 {
		m.setIdle(now)
	}
	if !m.loop.send(rctx, ev) {
		return
	}
	var err error
	select {
	case err = <-ev.done:
	case <-rctx.Done():
		err = fmt.Errorf("revoke of generation %d did not finish before its deadline", m.gen)
	}
	if stopping && all {
		m.finalErr = err
	}
	if m.state != nil {
		m.state.Revoked(mine)
	}
	switch {
	case lost:
	case err != nil:
		m.log.Warn("revoke finished with an error", zap.Int32("generation", int32(m.gen)), zap.Error(err))
	case ev.drainMissed:
		m.log.Info("partitions revoked: committed the records that finished; those in flight at the drain deadline "+
			"were not committed and are processed again by the partition's next owner", zap.Int32("generation", int32(m.gen)),
			zap.Int("partitions", len(mine)))
	default:
		m.log.Info("partitions revoked: in-flight work drained and committed", zap.Int32("generation", int32(m.gen)),
			zap.Int("partitions", len(mine)))
	}
	if m.obs != nil {
		m.obs.Rebalanced(Rebalance{Generation: int32(m.gen), Ended: true, Partitions: len(mine)})
	}
}

// memberStore commits offsets through the group member, under one
// generation.
type memberStore struct {
	m   *group.Member
	gen offsets.Generation
}

// Commit implements offsets.CommitStore.
func (s *memberStore) Commit(ctx context.Context, b offsets.CommitRequest) error {
	if b.Generation() != s.gen {
		return fmt.Errorf("%w: request of generation %d, store of generation %d", offsets.ErrStaleGeneration, b.Generation(), s.gen)
	}
	offs := make([]group.Offset, 0, b.Len())
	for i := 0; i < b.Len(); i++ {
		e := b.At(i)
		// the leader epoch of the record below the offset (-1 unknown):
		// a restart from this commit validates it (KIP-320)
		offs = append(offs, group.Offset{TopicPartition: e.Partition, Offset: e.Offset, LeaderEpoch: e.LeaderEpoch})
	}
	err := s.m.Commit(ctx, offs)
	if err != nil && !errors.Is(err, offsets.ErrGenerationEnded) && ctx.Err() != nil {
		return fmt.Errorf("commit not acknowledged in time: %w", err)
	}
	return err
}
