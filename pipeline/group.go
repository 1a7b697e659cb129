package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/sourcegraph/conc"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// member is this process's membership in the consumer group: it turns
// each kafka-go Generation into an assign event and, when the generation
// ends, a revoke event it waits for (drain, final commit) before letting
// kafka-go join the next one.
type member struct {
	cfg  Config
	conn *connection
	loop *coordinatorLoop
	log  *zap.Logger
	obs  Observer // nil: none
	// idleSince is when this member last stopped fetching (unix
	// nanoseconds): the start of Run, or of the last revoke.
	idleSince atomic.Int64
	// finalErr is the error of the revoke that ended the last generation
	// on shutdown (its final commit failed), nil if it succeeded.
	finalErr error
	// commits are commit calls still running in kafka-go (bounded by its
	// own timeout); run waits for them before it returns.
	commits conc.WaitGroup
}

// run is the membership loop. It returns when ctx ends (after the last
// generation was revoked and the group left) or the group cannot be
// created.
func (m *member) run(ctx context.Context) error {
	m.idleSince.Store(time.Now().UnixNano())
	k := m.cfg.Consumer
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                k.Group,
		Brokers:           m.cfg.Kafka.Brokers,
		Dialer:            m.conn.dialer(),
		Topics:            k.Topics,
		HeartbeatInterval: k.HeartbeatInterval,
		SessionTimeout:    k.SessionTimeout,
		RebalanceTimeout:  k.RebalanceTimeout,
		JoinGroupBackoff:  time.Second,
		// Partitions added to a consumed topic start a rebalance, so
		// they are consumed without a restart.
		WatchPartitionChanges:  true,
		PartitionWatchInterval: max(m.cfg.Kafka.MetadataMaxAge, time.Second),
		StartOffset:            kafka.FirstOffset, // marks "no committed offset"; the coordinator applies the policy
		Timeout:                m.cfg.Kafka.DialTimeout,
		ErrorLogger:            kafka.LoggerFunc(func(f string, a ...any) { m.log.Debug("group: " + fmt.Sprintf(f, a...)) }),
	})
	if err != nil {
		return fmt.Errorf("consumer group %q: %w", k.Group, err)
	}
	// Closing the group ends the current generation (our revoke runs,
	// commits, and returns), then leaves the group.
	stop := context.AfterFunc(ctx, func() { _ = cg.Close() })
	defer func() {
		stop()
		_ = cg.Close()
		m.commits.Wait()
	}()
	failures := 0
	for {
		gen, err := cg.Next(context.Background())
		switch {
		case errors.Is(err, kafka.ErrGroupClosed):
			return nil
		case err != nil:
			failures++
			lvl := zap.InfoLevel
			if failures > 3 {
				lvl = zap.WarnLevel
			}
			m.log.Check(lvl, "joining the consumer group failed; retrying").Write(zap.String("group", k.Group),
				zap.Int("attempt", failures), zap.Error(err), zap.String("check", groupHint(err)))
			continue
		}
		failures = 0
		if ctx.Err() != nil {
			// Stopping. Our last generation ended when its function
			// returned, which can be before the Close that ctx triggers
			// reaches the group, and then kafka-go joins the next
			// generation. Do not start it: its assignment would replace
			// the state the run ends with (a stopped partition would be
			// forgotten, and Run return nil). Close leaves the group.
			return nil
		}
		m.generation(ctx, gen)
	}
}

func groupHint(err error) string {
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.RebalanceInProgress:
			return "a rebalance is in progress; this resolves itself"
		case kafka.GroupAuthorizationFailed:
			return "the principal may not use this group: check the group ACLs"
		case kafka.InvalidSessionTimeout:
			return "consumer.session_timeout is outside the broker's group.min/max.session.timeout.ms"
		case kafka.GroupCoordinatorNotAvailable, kafka.NotCoordinatorForGroup:
			return "the group coordinator is moving; this resolves itself"
		}
	}
	return "the brokers in kafka.brokers must be reachable"
}

// generation starts the work of one generation. kafka-go runs fn on its
// own goroutine and waits for it before joining the next generation.
func (m *member) generation(ctx context.Context, gen *kafka.Generation) {
	gen.Start(func(genCtx context.Context) {
		id := offsets.Generation(gen.ID)
		var parts []assignedPartition
		for topic, as := range gen.Assignments {
			for _, a := range as {
				tp := offsetstore.TopicPartition{Topic: topic, Partition: int32(a.ID)}
				start := offsetstore.ByPolicy()
				if a.Offset >= 0 {
					start = offsetstore.Committed(a.Offset)
				}
				parts = append(parts, assignedPartition{tp: tp, start: start})
			}
		}
		sort.Slice(parts, func(i, j int) bool {
			if parts[i].tp.Topic != parts[j].tp.Topic {
				return parts[i].tp.Topic < parts[j].tp.Topic
			}
			return parts[i].tp.Partition < parts[j].tp.Partition
		})
		m.log.Info("generation started", zap.String("group", gen.GroupID), zap.Int32("generation", gen.ID),
			zap.String("member", gen.MemberID), zap.Int("partitions", len(parts)))
		if m.obs != nil {
			m.obs.Rebalanced(Rebalance{Generation: gen.ID, Partitions: len(parts), Paused: time.Since(time.Unix(0, m.idleSince.Load()))})
		}
		store := &generationStore{gen: gen, id: id, calls: &m.commits}
		if !m.loop.send(ctx, &assignEvent{gen: id, store: store, partitions: parts}) {
			return
		}
		select {
		case <-genCtx.Done():
		case <-ctx.Done():
		}
		// The generation is over (rebalance) or we are stopping: drain
		// and commit within the rebalance timeout or the shutdown
		// deadline.
		now := time.Now()
		m.idleSince.Store(now.UnixNano())
		stopping := ctx.Err() != nil
		total := m.cfg.Consumer.RebalanceTimeout * 3 / 4
		if stopping {
			// graceful stop: the run's hard deadline is ShutdownTimeout
			// after ctx ended; keep a little of it to leave the group
			total = m.cfg.ShutdownTimeout - m.cfg.ShutdownTimeout/20
		}
		deadline := now.Add(total)
		drainBy := now.Add(total * 2 / 3)
		what := "rebalance: revoking partitions"
		if stopping {
			what = "stopping"
		}
		m.log.Info(what+": in-flight records may finish until the drain deadline, then the processed offsets are committed",
			zap.Int32("generation", gen.ID), zap.Duration("drain_deadline", drainBy.Sub(now).Round(time.Millisecond)),
			zap.Duration("commit_deadline", total.Round(time.Millisecond)))
		ev := &revokeEvent{gen: id, drainBy: drainBy, deadline: deadline, done: make(chan error, 1)}
		rctx, cancel := context.WithDeadline(context.Background(), deadline.Add(time.Second))
		defer cancel()
		if !m.loop.send(rctx, ev) {
			return
		}
		select {
		case err := <-ev.done:
			if stopping {
				m.finalErr = err
			}
			switch {
			case err != nil:
				m.log.Warn("revoke finished with an error", zap.Int32("generation", gen.ID), zap.Error(err))
			case ev.drainMissed:
				m.log.Info("generation ended: committed the records that finished; those in flight at the drain deadline "+
					"were not committed and are processed again by the partition's next owner", zap.Int32("generation", gen.ID))
			default:
				m.log.Info("generation ended: in-flight work drained and committed", zap.Int32("generation", gen.ID))
			}
		case <-rctx.Done():
			err := fmt.Errorf("revoke of generation %d did not finish before its deadline", gen.ID)
			if stopping {
				m.finalErr = err
			}
			m.log.Warn(err.Error())
		}
		if m.obs != nil {
			m.obs.Rebalanced(Rebalance{Generation: gen.ID, Ended: true, Partitions: len(parts)})
		}
	})
}

// generationStore commits offsets under one group generation.
type generationStore struct {
	gen   *kafka.Generation
	id    offsets.Generation
	calls *conc.WaitGroup
}

// Commit implements offsets.CommitStore.
func (s *generationStore) Commit(ctx context.Context, b offsets.CommitRequest) error {
	if b.Generation() != s.id {
		return fmt.Errorf("%w: batch of generation %d, store of generation %d", offsets.ErrStaleGeneration, b.Generation(), s.id)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// e.LeaderEpoch is dropped: kafka-go commits with OffsetCommit v2,
	// which has no field for it (a group member sending v7+ commits it)
	byTopic := make(map[string]map[int]int64)
	for i := 0; i < b.Len(); i++ {
		e := b.At(i)
		if byTopic[e.Partition.Topic] == nil {
			byTopic[e.Partition.Topic] = make(map[int]int64)
		}
		byTopic[e.Partition.Topic][int(e.Partition.Partition)] = e.Offset
	}
	// kafka-go's commit takes no context; it is bounded by the group's
	// Timeout (kafka.dial_timeout). Stop waiting for it when ctx ends.
	res := make(chan error, 1)
	s.calls.Go(func() { res <- s.gen.CommitOffsets(byTopic) })
	var err error
	select {
	case err = <-res:
	case <-ctx.Done():
		return fmt.Errorf("commit not acknowledged in time: %w", ctx.Err())
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.RebalanceInProgress, kafka.IllegalGeneration, kafka.UnknownMemberId, kafka.NotCoordinatorForGroup, kafka.FencedInstanceID:
			return fmt.Errorf("%w: %w", offsets.ErrGenerationEnded, err)
		}
	}
	return err
}
