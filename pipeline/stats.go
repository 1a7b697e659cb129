package pipeline

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fencepost-dev/fencepost/internal/state"
)

// Stats are a pipeline's counters and the state of its partitions.
type Stats struct {
	// BufferedBytes is the memory of records fetched and not yet
	// finished by the stages (payload and bookkeeping); it stays within
	// consumer.buffer_bytes plus one record per fetch in flight (a
	// record larger than the room its fetch had still gets through).
	BufferedBytes int64
	// MaxBufferedBytes is the highest BufferedBytes seen.
	MaxBufferedBytes int64
	// FetchesInFlight is how many fetch requests are in flight now: at
	// most fetch_concurrency (by default 1 or 2, chosen from the
	// partitions per broker) per broker leading assigned partitions.
	// MaxFetchesInFlight is the highest seen; with several brokers it
	// shows whether they were fetched from in parallel.
	FetchesInFlight    int64
	MaxFetchesInFlight int64
	// RecordsProcessed counts records that finished every stage.
	RecordsProcessed int64
	// DeadLetters counts records sent to the dead-letter topic.
	DeadLetters int64
	// Resets counts partition resets (see OnReset), except where a
	// partition without a committed offset starts (reason
	// no_committed_offset): that is a first start, not a reset.
	Resets int64
	// StaleDropped counts results dropped because their partition's
	// epoch or generation had moved on.
	StaleDropped int64
	Commits      int64
	CommitErrors int64
	// TransactionsAborted counts aborted transactions (guarantee
	// exactly_once): each sent its partitions back to their committed
	// offsets (resets with reason transaction_aborted).
	TransactionsAborted int64
	// StoppedPartitions is how many assigned partitions are stopped now
	// (see PartitionStatus.Err for why); Stops counts every stop.
	StoppedPartitions int64
	Stops             int64
	// StuckCalls is how many stage calls are running past
	// processing_timeout + process.DefaultStuckAfter: their stage ignores its
	// context, and their partitions wait.
	StuckCalls int64
	// WaitingForOutput is how many stage calls and dead-letter writes
	// are holding their partition because their destination takes no
	// record now (stages.IsUnavailable: an unknown or deleted topic, no
	// permission, no leader, brokers down). Their records are retried
	// with backoff, not dead-lettered; fetching goes on only within
	// consumer.buffer_bytes. OutputError is the latest such error
	// (empty when none waits).
	WaitingForOutput int64
	OutputError      string
	// UnassignedSince is when the pipeline last came to hold no
	// partition of its subscribed topics (its start, or the revoke or
	// loss that took the last ones); zero while it holds some. A
	// pipeline that holds none for longer than UnassignedGrace is not
	// consuming anything: the subscribed topics do not exist (or were
	// deleted), or the group has more members than partitions.
	UnassignedSince time.Time
	// UnassignedGrace is how long holding no partition is normal: the
	// time the group takes to notice a topic that appeared and hand out
	// its partitions (kafka.metadata_max_age, at least 1s, +
	// consumer.session_timeout + consumer.rebalance_timeout).
	UnassignedGrace time.Duration
	// State is what the stores of stateful stages did (zero without
	// them).
	State StateStats
	// Partitions is the state of every partition assigned now.
	Partitions []PartitionStatus
}

// StateStats are the figures of a pipeline's stores.
type StateStats struct {
	// Restoring is how many store partitions are being restored from
	// their changelogs now (their input partition waits), and
	// RestoreLeft how many changelog offsets they have left.
	Restoring, RestoreLeft int64
	// Restores counts finished restores; RestoredRecords and
	// RestoredBytes (keys and values) what they read.
	Restores, RestoredRecords, RestoredBytes int64
	// ChangelogRecords counts the changes written to changelogs.
	ChangelogRecords int64
}

// Unassigned says how long the pipeline has held no partition at now
// when that is longer than UnassignedGrace, and zero otherwise.
func (s Stats) Unassigned(now time.Time) time.Duration {
	if s.UnassignedSince.IsZero() || len(s.Partitions) > 0 {
		return 0
	}
	if d := now.Sub(s.UnassignedSince); d > s.UnassignedGrace {
		return d
	}
	return 0
}

type pipelineStats struct {
	coord       coordinatorStats
	processed   atomic.Int64
	deadLetters atomic.Int64
	stuck       atomic.Int64
	waiting     atomic.Int64
	outputErr   atomic.Pointer[string]
	// unassigned is Stats.UnassignedSince in Unix nanoseconds (0:
	// partitions held), set by the member; grace is UnassignedGrace.
	unassigned atomic.Int64
	grace      atomic.Int64
	// state counts what the stores did (state.Manager writes it).
	state state.Counters
}

// unavailable takes a process.Chain's OnUnavailable report.
func (s *pipelineStats) unavailable(stage string, delta int, err error) {
	if err != nil {
		msg := fmt.Sprintf("%s: %v", stage, err)
		s.outputErr.Store(&msg)
	}
	if s.waiting.Add(int64(delta)) == 0 {
		s.outputErr.Store(nil)
	}
}

func (s *pipelineStats) snapshot() Stats {
	var outputErr string
	if e := s.outputErr.Load(); e != nil {
		outputErr = *e
	}
	var since time.Time
	if n := s.unassigned.Load(); n != 0 {
		since = time.Unix(0, n)
	}
	return Stats{
		UnassignedSince:     since,
		UnassignedGrace:     time.Duration(s.grace.Load()),
		BufferedBytes:       s.coord.bufferedBytes.Load(),
		MaxBufferedBytes:    s.coord.maxBuffered.Load(),
		FetchesInFlight:     s.coord.fetching.Load(),
		MaxFetchesInFlight:  s.coord.maxFetching.Load(),
		RecordsProcessed:    s.processed.Load(),
		DeadLetters:         s.deadLetters.Load(),
		Resets:              s.coord.resets.Load(),
		StaleDropped:        s.coord.staleDropped.Load(),
		Commits:             s.coord.commits.Load(),
		CommitErrors:        s.coord.commitErrors.Load(),
		TransactionsAborted: s.coord.txnAborts.Load(),
		StoppedPartitions:   s.coord.stoppedPartitions.Load(),
		Stops:               s.coord.stops.Load(),
		StuckCalls:          s.stuck.Load(),
		WaitingForOutput:    s.waiting.Load(),
		OutputError:         outputErr,
		State: StateStats{
			Restoring: s.state.Restoring.Load(), RestoreLeft: s.state.RestoreLeft.Load(),
			Restores: s.state.Restores.Load(), RestoredRecords: s.state.Restored.Load(),
			RestoredBytes: s.state.RestoredBytes.Load(), ChangelogRecords: s.state.Changes.Load(),
		},
	}
}
