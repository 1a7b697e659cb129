package pipeline

import (
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/commit"
	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// coordinatorConfig is what the coordinator needs from the pipeline
// configuration.
type coordinatorConfig struct {
	policy   offsetstore.ResetPolicy
	validate bool // check committed and sought offsets against the log before fetching
	// commitInterval is the least time between two commits: a commit is
	// sent as soon as a watermark moved, no commit is in flight, and the
	// last one was sent at least commitInterval ago. <= 0: commit only on
	// revoke, shutdown and flush.
	commitInterval time.Duration
	budget         int64 // bytes of fetched-but-unfinished records
	fetchMaxBytes  int32 // most bytes one fetch request asks for
	// partitionMaxBytes is the most one partition of a fetch returns; a
	// fetch reserves (of the budget) what its partitions can return.
	// <= 0: a fetch reserves fetchMaxBytes.
	partitionMaxBytes int32
	fetchersPerBroker int // concurrent fetch requests per broker (default 1)
	retryBackoff      time.Duration
	maxRetryBackoff   time.Duration
	metadataBackoff   time.Duration // least time between metadata refreshes asked for missing leaders
	// reportCommits sends a notice with the offsets (and newest record
	// times) of every acknowledged commit, for an Observer.
	reportCommits bool
	// transactional: guarantee exactly_once (see coordinator_txn.go);
	// the store is an offsets.TransactionStore. txnDrainTimeout bounds
	// how long a due commit waits for processing to drain before the
	// transaction is aborted.
	transactional   bool
	txnDrainTimeout time.Duration
}

// coordinatorOutputs are where the coordinator sends work. Each worker
// (the resolver, each broker's fetcher, the committer) has at most one
// request in flight and answers with an event, so the coordinator only
// sends to a worker it knows is idle and the send never blocks. Messages
// for processing and notices go through queues the run loop drains.
type coordinatorOutputs struct {
	resolve  func(offsets.ResolveRequest)
	fetch    func(offsets.FetchRequest)
	commit   func(commit.Job)
	metadata func() // ask for a metadata refresh; must not block
	// abortFetches cancels the fetches in flight (they still answer,
	// with an error); nil if not supported. Must not block.
	abortFetches func()
	// fatal ends the run with err (the transactional producer failed
	// for good); nil if not supported. Must not block.
	fatal func(err error)
}

// notice is something the coordinator reports to the application: a
// reset, a partition that stopped, or (with reportCommits) the offsets of
// an acknowledged commit.
type notice struct {
	Reset     *offsetstore.ResetEvent
	Stopped   *PartitionStopped
	Committed []CommittedOffset
}

// PartitionStopped reports a partition that stopped with an error.
type PartitionStopped struct {
	Partition offsetstore.TopicPartition
	Err       error
}

// coordinatorStats are counters the coordinator writes and anyone reads.
type coordinatorStats struct {
	bufferedBytes atomic.Int64 // fetched-but-unfinished bytes
	maxBuffered   atomic.Int64 // high-water mark of bufferedBytes
	fetching      atomic.Int64 // fetches in flight
	maxFetching   atomic.Int64 // high-water mark of fetching
	staleDropped  atomic.Int64 // results dropped for a stale epoch or generation
	ignored       atomic.Int64 // invalid or surprising input ignored
	resets        atomic.Int64
	commits       atomic.Int64
	commitErrors  atomic.Int64
	txnAborts     atomic.Int64 // transactions aborted (exactly_once)
	// stoppedPartitions is how many assigned partitions are stopped now;
	// stops counts every stop.
	stoppedPartitions atomic.Int64
	stops             atomic.Int64
	// stoppedAtRelease lists the partitions that were stopped when the
	// last generation was released (what a shutdown leaves stopped).
	stoppedAtRelease atomic.Pointer[[]PartitionStopped]
}

// coordinator owns all partition state. Every method runs on the
// coordinator goroutine (or, in tests, one goroutine); nothing here is
// safe for concurrent use, by design: the steps send it events.
type coordinator struct {
	cfg   coordinatorConfig
	out   coordinatorOutputs
	log   *zap.Logger
	stats *coordinatorStats
	now   time.Time

	// generation
	gen    offsets.Generation
	active bool
	store  offsets.CommitStore
	fenced bool         // the group fenced a commit: no more commits this generation
	revoke *revokeEvent // the revoke in progress (nil: none); its partitions have revoking set
	// finalCommit: the revoke drained and its commit was sent (or was
	// not needed).
	finalCommit bool
	finalErr    error

	epochSeq offsetstore.Epoch
	slots    []*partition // index = slot; nil = free
	free     []int
	index    map[offsetstore.TopicPartition]int
	zombies  map[offsetstore.TopicPartition]int  // released partitions with an operation in flight
	paused   map[offsetstore.TopicPartition]bool // survives generations
	leaders  map[offsetstore.TopicPartition]int32
	// leaderEpochs are the partitions' leader epochs the last metadata
	// gave
	leaderEpochs map[offsetstore.TopicPartition]int32
	brokers      map[fetcherKey]*fetcher
	fetchers     []*fetcher // the same, in the order they were made: fetches are planned in a stable order
	waiting      []*fetcher // fetchers refused for lack of budget, served first in this order (see planFetches)

	resolver     inFlight // the lookup in flight
	committer    inFlight // the commit in flight (no slots)
	dirty        bool     // a watermark may have moved past its committed offset
	nextCommitAt time.Time
	flushes      []chan error
	// committing are the offsets of the commit in flight, with their
	// newest record times (reportCommits only).
	committing []CommittedOffset

	reserved     int64 // bytes reserved by fetches in flight
	buffered     int64 // bytes handed to processing and not completed
	retryPending bool  // some partition waits for a backoff to pass
	needResolve  bool  // some partition may need a lookup
	needLeaders  bool  // some partition has no known leader
	lastMetaReq  time.Time

	txn txnState // exactly_once only

	toProcess    process.Message // next message for processing
	notices      []notice
	scratchR     []offsets.ResolveEntry
	scratchSlots []int
	scratchLater []*partition
}

func newCoordinator(cfg coordinatorConfig, out coordinatorOutputs, log *zap.Logger, stats *coordinatorStats, now time.Time) *coordinator {
	if log == nil {
		log = zap.NewNop()
	}
	if stats == nil {
		stats = new(coordinatorStats)
	}
	if cfg.retryBackoff <= 0 {
		cfg.retryBackoff = 100 * time.Millisecond
	}
	if cfg.maxRetryBackoff <= 0 {
		cfg.maxRetryBackoff = 5 * time.Second
	}
	if cfg.fetchMaxBytes <= 0 {
		cfg.fetchMaxBytes = 50 << 20
	}
	if cfg.fetchersPerBroker <= 0 {
		cfg.fetchersPerBroker = 1
	}
	if cfg.budget <= 0 {
		cfg.budget = 64 << 20
	}
	if cfg.txnDrainTimeout <= 0 {
		cfg.txnDrainTimeout = 30 * time.Second
	}
	return &coordinator{
		cfg:          cfg,
		out:          out,
		log:          log,
		stats:        stats,
		now:          now,
		gen:          offsets.NoGeneration,
		index:        make(map[offsetstore.TopicPartition]int),
		zombies:      make(map[offsetstore.TopicPartition]int),
		paused:       make(map[offsetstore.TopicPartition]bool),
		leaders:      make(map[offsetstore.TopicPartition]int32),
		leaderEpochs: make(map[offsetstore.TopicPartition]int32),
		brokers:      make(map[fetcherKey]*fetcher),
		txn:          txnState{inProcess: map[*fetch.Batch]struct{}{}},
	}
}

// handle applies one event and then plans new work. It never blocks and
// never panics on bad input: surprising results are counted and ignored.
func (c *coordinator) handle(ev event) {
	switch e := ev.(type) {
	case fetchedEvent:
		c.onFetch(e.r)
	case processedEvent:
		c.onProcessed(e.r)
	case resolvedEvent:
		c.onResolve(e.r)
	case committedEvent:
		c.onCommit(e.r)
	case leadersEvent:
		c.onLeaders(e.l)
	case tickEvent:
		c.onTick(e.now)
	case *assignEvent:
		c.onAssign(e)
	case *revokeEvent:
		c.onRevoke(e)
	case *seekEvent:
		reply(e.done, c.onSeek(e))
	case *pauseEvent:
		c.onPause(e)
		reply(e.done, nil)
	case *flushEvent:
		c.onFlush(e)
	case *statsEvent:
		e.done <- c.snapshot()
	case txnFailedEvent:
		c.onTxnProducerFailed(e)
	default: // nil
		c.ignore("no event", zap.String("type", fmt.Sprintf("%T", ev)))
	}
	c.plan()
}

func reply(ch chan error, err error) {
	if ch != nil {
		ch <- err // buffered by the sender
	}
}

func (c *coordinator) ignore(msg string, fields ...zap.Field) {
	c.stats.ignored.Add(1)
	c.log.Debug("ignored: "+msg, fields...)
}

func (c *coordinator) stale(what string, tp offsetstore.TopicPartition) {
	c.stats.staleDropped.Add(1)
	if ce := c.log.Check(zap.DebugLevel, "dropped stale "+what); ce != nil {
		ce.Write(zap.Stringer("partition", tp))
	}
}

func (c *coordinator) nextEpoch() offsetstore.Epoch {
	c.epochSeq++
	return c.epochSeq
}

// lookup returns the partition in slot if it is still tp.
func (c *coordinator) lookup(slot int, tp offsetstore.TopicPartition) *partition {
	if slot < 0 || slot >= len(c.slots) {
		return nil
	}
	if p := c.slots[slot]; p != nil && p.tp == tp {
		return p
	}
	return nil
}

func (c *coordinator) byTP(tp offsetstore.TopicPartition) *partition {
	if slot, ok := c.index[tp]; ok {
		return c.slots[slot]
	}
	return nil
}

// plan sends new work to idle workers.
func (c *coordinator) plan() {
	if c.active {
		if c.needResolve && !c.resolver.busy() && c.out.resolve != nil {
			c.planResolve()
		}
		// partitions being revoked are not fetchable; the others keep
		// going through a (cooperative) revoke
		c.planFetches()
		if c.cfg.transactional {
			c.planTxn()
		} else if c.commitDue() && !c.sendCommit() {
			for _, f := range c.flushes {
				reply(f, nil)
			}
			c.flushes = nil
		}
	}
	c.checkRevoke()
	c.stats.bufferedBytes.Store(c.buffered)
	if c.buffered > c.stats.maxBuffered.Load() {
		c.stats.maxBuffered.Store(c.buffered)
	}
	fetching := int64(0)
	for _, b := range c.fetchers {
		if b.flight.busy() {
			fetching++
		}
	}
	c.stats.fetching.Store(fetching)
	if fetching > c.stats.maxFetching.Load() {
		c.stats.maxFetching.Store(fetching)
	}
}

// commitDue reports whether a commit should be sent now: a flush waits,
// or a watermark moved and the commit interval passed since the last one.
// Never while a commit is in flight or during a revoke (which sends its
// own final commit).
func (c *coordinator) commitDue() bool {
	if c.committer.busy() || c.revoke != nil {
		return false
	}
	return len(c.flushes) > 0 || (c.dirty && c.cfg.commitInterval > 0 && !c.now.Before(c.nextCommitAt))
}

// takeProcessMessage returns the pending message for processing, if any,
// and starts a new one.
func (c *coordinator) takeProcessMessage() (process.Message, bool) {
	m := c.toProcess
	if len(m.Fences) == 0 && len(m.Batches) == 0 {
		return m, false
	}
	c.toProcess = process.Message{}
	if n := len(m.Batches); n > 0 {
		c.toProcess.Batches = make([]*fetch.Batch, 0, n)
	}
	return m, true
}
