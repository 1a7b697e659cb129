package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/internal/engine/commit"
	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestRecordPathTxnStateMachine is the record-path model with
// transactions (guarantee exactly_once): the real coordinator
// in transactional mode, the real process scheduler and chain, the
// scripted stages and dead-letter sink of TestRecordPathStateMachine, and
// a fake transactional world. Every output a stage emits, and every dead
// letter, is written through a fake transactional producer into the open
// transaction; a generation's fake offsets.TransactionStore commits the
// open transaction's outputs and the request's offsets atomically, or
// aborts it.
//
// On top of the actions of TestRecordPathStateMachine (fetches, lookups,
// units started, run and finished in any order, late reports, seeks,
// outages, revokes with long or short deadlines, lost partitions, new
// generations, partitions stopping on failed records under the stop
// policy) it draws:
//
//   - transaction commits that fail: aborted by the store (its outputs
//     discarded, offsets.ErrTransactionAborted), fenced by the group
//     (the generation ended: aborted too), or failed for good
//     (offsets.ErrTransactionFailed: the run ends, a restart recovers);
//     aborts that fail for good;
//   - the producer reporting an abortable failure (a write that may have
//     reached a broker failed: a partial write is in the transaction, and
//     every later write fails as stages.Unavailable until the abort), or
//     that it was fenced for good;
//   - the broker aborting the open transaction on its own (it outlived
//     transaction_timeout, or the broker restarted): its outputs are
//     gone, every later write fails until the coordinator aborts, and
//     the producer says so at once or the coordinator learns it only
//     from the commit's answer;
//   - crashes: the coordinator, the process step, the open transaction
//     and every answer in flight are thrown away (a commit in flight
//     landed or not); only the committed outputs and offsets stay, and a
//     new coordinator starts from the committed offsets.
//
// After every step it checks:
//
//	(1) no output visible without its offset: every committed output (and
//	    dead letter) belongs to a source record below its partition's
//	    committed offset;
//	(2) no offset without its outputs: every source record below a
//	    committed offset that a seek or the reset policy did not skip
//	    finished every stage (outputs written, or dead-lettered) in a
//	    committed transaction;
//	(3) exactly once: no source record's outputs are committed by two
//	    runs (in one transaction or in two), across aborts and crashes;
//	(4) nothing is written while a commit or abort is in flight (the
//	    barrier: no transaction is open then).
//
// Records a seek sent back to be processed again are exempt from (1) and
// (3): the application asked for them again.
//
// At the end, with no more faults, it drains everything as
// TestRecordPathStateMachine does (a run whose producer failed for good
// restarts) and checks liveness: every fetching partition has committed
// up to its high watermark.
//
// A failure prints the seed (-rapid.seed=N) that replays it.
func TestRecordPathTxnStateMachine(t *testing.T) {
	var total txnStats
	checkStateMachine(t, &recordPathSteps, 2_000, func(rt *rapid.T) {
		m := &rpTxnModel{newRPModelWith(rt, newTxnWorld(), false)}
		defer func() { total.add(m.world.stats, m.h.c.stats.txnAborts.Load()) }()
		for range txnModelRounds {
			rt.Repeat(rapid.StateMachineActions(m))
		}
		m.revokeBeforeDrain(rt)
		m.drainAndCheckLiveness(rt)
		m.world.checkCoverage(rt)
	})
	t.Logf("%d transactions committed, %d aborted (%d aborts of the coordinator), %d crashes, %d producer failures, "+
		"%d transactions aborted by the broker, %d unit runs called off",
		total.commits, total.aborts, total.coordAborts, total.crashes, total.producerFaults, total.brokerAborts, total.canceledRuns)
}

// revokeBeforeDrain may revoke every partition (a shutdown, an eager
// rebalance) or the first one assigned (a cooperative rebalance) before
// the drain, which then runs into whatever the actions left in flight.
func (m *rpTxnModel) revokeBeforeDrain(t *rapid.T) {
	kind := rapid.IntRange(0, 2).Draw(t, "revoke before the drain")
	if !m.active || m.revokeDone != nil || kind == 0 {
		return
	}
	ev := &revokeEvent{gen: m.gen, drainBy: m.h.now.Add(time.Hour), deadline: m.h.now.Add(time.Hour), done: make(chan error, 1)}
	if kind == 2 {
		for _, tp := range rpTPs {
			if m.h.c.byTP(tp) != nil {
				ev.partitions = []offsetstore.TopicPartition{tp}
				break
			}
		}
		if len(m.h.c.index) < 2 {
			return // it would take them all
		}
	}
	m.beforeStep()
	m.revokeDone, m.revokeAll = ev.done, ev.partitions == nil
	m.h.send(ev)
	m.afterStep()
}

// txnStats counts what the transactional world saw.
type txnStats struct {
	commits, aborts, coordAborts, crashes, producerFaults, brokerAborts, canceledRuns int64
}

func (s *txnStats) add(o txnStats, coordAborts int64) {
	s.commits += o.commits
	s.aborts += o.aborts
	s.coordAborts += o.coordAborts + coordAborts
	s.crashes += o.crashes
	s.producerFaults += o.producerFaults
	s.brokerAborts += o.brokerAborts
	s.canceledRuns += o.canceledRuns
}

// txnModelRounds is how many rounds of actions (-rapid.steps each, on
// average) one check runs: the interleavings that matter here are long
// (a batch split by key, one part run, a revoke, a commit, a crash).
const txnModelRounds = 4

// rpTxnModel is the record-path model with transactions: the actions of
// rpModel and those below.
type rpTxnModel struct{ *rpModel }

// errUnitCanceled is what a unit called off by a fence with Cancel
// finishes with (process.Step reports it so, whatever its chain did).
var errUnitCanceled = errors.New("processing canceled: the partition was fenced")

// errTxnAbortable is what the fake producer answers while its
// transaction must abort.
var errTxnAbortable = errors.New("transaction is abortable: a produce that may have reached a broker failed")

// partialSource is where a failed produce's partial write is recorded: no
// offset there is ever committed, so committing it breaks (1).
var partialSource = source{offsetstore.TopicPartition{Topic: "r", Partition: 0}, 1 << 40}

// txnWrite is one entry of the open transaction: an output (or dead
// letter) of a source record, the mark that the source record finished
// every stage in that run, or (kept) the mark that the stateful stage
// kept its state change in that run (stateWorld).
type txnWrite struct {
	src  source
	run  int
	done bool
	kept bool
}

// txnWorld is the fake transactional world: one producer (for the run:
// it outlives generations, as the pipeline's does) with its open
// transaction, and what was committed.
type txnWorld struct {
	pending   []txnWrite
	run       int  // the unit run now writing
	abortable bool // a write failed: every write fails until the abort
	// silentAbort: the broker aborted the transaction and the producer
	// has not noticed yet (its next write or the commit finds out)
	silentAbort bool
	failed      bool // fenced or failed for good: nothing more is written

	// committedRuns counts, per source record, the runs whose outputs
	// or finish were committed; committedDone: it finished in a
	// committed transaction.
	committedRuns map[source]int
	committedDone map[source]bool
	// committedKept counts, per source record, the committed runs that
	// kept its state change (stateWorld).
	committedKept map[source]int
	// onEnd, if set, is told when the open transaction ends: committed,
	// or aborted (by the coordinator, the broker, or a new process's
	// producer).
	onEnd func(committed bool)
	// repeatable are source records a seek sent back to be processed
	// again; handedEnd is per partition the end of what was handed to
	// processing in this coordinator's life.
	repeatable map[source]bool
	handedEnd  map[offsetstore.TopicPartition]int64

	stats txnStats
}

func newTxnWorld() *txnWorld {
	return &txnWorld{committedRuns: map[source]int{}, committedDone: map[source]bool{}, committedKept: map[source]int{}, repeatable: map[source]bool{},
		handedEnd: map[offsetstore.TopicPartition]int64{}}
}

// writable reports whether the producer takes writes.
func (w *txnWorld) writable() bool { return !w.abortable && !w.failed }

func (w *txnWorld) startRun(canceled bool) {
	w.run++
	if canceled {
		w.stats.canceledRuns++
	}
}

// write is the fake transactional producer's Produce: the records go into
// the open transaction.
func (w *txnWorld) write(ctx context.Context, m *rpModel, recs []stages.Record) error {
	if err := context.Cause(ctx); err != nil {
		return err // the producer refuses a call whose context ended
	}
	if !w.writable() {
		return stages.Unavailable(errTxnAbortable)
	}
	if len(recs) > 0 && len(m.h.commits) > 0 {
		m.violations = append(m.violations, fmt.Sprintf("(4) %d record(s) of %v written while the transaction's commit or abort is in flight",
			len(recs), sourceOf(recs[0])))
	}
	for _, r := range recs {
		w.pending = append(w.pending, txnWrite{src: sourceOf(r), run: w.run})
	}
	return nil
}

// finished records that source s finished every stage in the current run.
func (w *txnWorld) finished(m *rpModel, s source) {
	if len(m.h.commits) > 0 {
		m.violations = append(m.violations, fmt.Sprintf("(4) %v finished while the transaction's commit or abort is in flight", s))
	}
	w.pending = append(w.pending, txnWrite{src: s, run: w.run, done: true})
}

// commit commits the open transaction with req's offsets, atomically.
func (w *txnWorld) commit(m *rpModel, req offsets.CommitRequest) {
	runs := map[source]map[int]bool{}
	kept := map[source]map[int]bool{}
	for _, p := range w.pending {
		if runs[p.src] == nil {
			runs[p.src] = map[int]bool{}
		}
		runs[p.src][p.run] = true
		if p.done {
			w.committedDone[p.src] = true
		}
		if p.kept {
			if kept[p.src] == nil {
				kept[p.src] = map[int]bool{}
			}
			kept[p.src][p.run] = true
		}
	}
	for s, rs := range runs {
		w.committedRuns[s] += len(rs)
	}
	for s, rs := range kept {
		w.committedKept[s] += len(rs)
	}
	w.pending = nil
	for i := 0; i < req.Len(); i++ {
		e := req.At(i)
		m.committed[e.Partition] = e.Offset
	}
	w.stats.commits++
	if w.onEnd != nil {
		w.onEnd(true)
	}
}

// abort discards the open transaction and opens the next.
func (w *txnWorld) abort() {
	if w.onEnd != nil {
		w.onEnd(false)
	}
	w.pending = nil
	w.abortable, w.silentAbort = false, false
	w.stats.aborts++
}

// checkCoverage fails a run whose model did nothing transactional at all
// (a sign the world is not wired).
func (w *txnWorld) checkCoverage(t *rapid.T) {
	if w.stats.commits == 0 {
		t.Fatalf("no transaction was committed in the whole run")
	}
}

// txnFakeStore is a generation's offsets.TransactionStore over the
// model's world. It is used from the model's goroutine only: the model
// answers commit jobs itself (answerTxnCommit).
type txnFakeStore struct {
	gen    offsets.Generation
	fenced bool
}

// Commit implements offsets.CommitStore; the model answers commit jobs
// itself and never calls it.
func (s *txnFakeStore) Commit(context.Context, offsets.CommitRequest) error {
	panic("txnFakeStore: the model answers commits")
}

// Abort implements offsets.TransactionStore; see Commit.
func (s *txnFakeStore) Abort(context.Context) error { panic("txnFakeStore: the model answers aborts") }

// Fence makes the store's commits fail as the group's would once the
// generation ended.
func (s *txnFakeStore) Fence() { s.fenced = true }

var _ offsets.TransactionStore = (*txnFakeStore)(nil)

// Commit outcomes answerTxnCommit takes (answerCommit's outcome).
const (
	txnOutcomeAborted = 0 // the store could not commit: aborted
	txnOutcomeFenced  = 1 // the group fenced the generation: aborted
	txnOutcomeFailed  = 2 // the producer failed for good
)

// AnswerCommit answers the commit or abort in flight, as the real
// transactional store would, with a drawn fault.
func (m *rpTxnModel) AnswerCommit(t *rapid.T) {
	if len(m.h.commits) == 0 {
		return // no commit in flight: nothing to answer (the step changes nothing; the checks still run)
	}
	outcome := 9
	switch w := rapid.IntRange(0, 39).Draw(t, "txn outcome"); {
	case w < 4:
		outcome = txnOutcomeAborted
	case w < 5:
		outcome = txnOutcomeFenced
	case w < 6:
		outcome = txnOutcomeFailed
	}
	m.answerTxnCommit(outcome)
}

// answerTxnCommit answers the oldest commit job as pipeline.txnStore
// does: a commit of a stale generation is refused with the transaction
// left open; a fenced generation's commit, or one that cannot complete,
// aborts the transaction (ErrTransactionAborted); a producer failed for
// good answers ErrTransactionFailed; else the outputs and offsets commit
// atomically. An abort discards the open transaction.
func (m *rpModel) answerTxnCommit(outcome int) {
	m.beforeStep()
	w := m.world
	job := m.h.commits[0]
	m.h.commits = m.h.commits[1:]
	st := job.Store.(*txnFakeStore)
	var err error
	switch {
	case w.failed:
		err = fmt.Errorf("%w: the producer was fenced", offsets.ErrTransactionFailed)
	case outcome == txnOutcomeFailed:
		w.failed = true
		err = fmt.Errorf("%w: the outcome of EndTxn is unknown", offsets.ErrTransactionFailed)
	case job.Abort:
		w.abort()
		m.stateAborted()
	case job.Request.Generation() != st.gen:
		err = fmt.Errorf("%w: request of generation %d, store of generation %d", offsets.ErrStaleGeneration, job.Request.Generation(), st.gen)
	case st.fenced || outcome == txnOutcomeFenced:
		st.Fence()
		w.abort()
		m.stateAborted()
		err = fmt.Errorf("%w: %w", offsets.ErrTransactionAborted, offsets.ErrGenerationEnded)
	case w.abortable || outcome == txnOutcomeAborted:
		w.abort()
		m.stateAborted()
		err = fmt.Errorf("%w: CONCURRENT_TRANSACTIONS past the retries", offsets.ErrTransactionAborted)
	default:
		w.commit(m, job.Request)
		m.stateCommitted()
	}
	m.h.send(&commit.Result{Request: job.Request, Err: err})
	m.afterStep()
	m.checkTxn(m.rt)
}

// ProducerFails is the producer's report that its transaction must abort
// (a write that may have reached a broker failed: part of it is in the
// transaction), or that another instance fenced it.
func (m *rpTxnModel) ProducerFails(t *rapid.T) {
	w := m.world
	if len(m.h.commits) > 0 || w.failed {
		return // no write can fail now (the step changes nothing; the checks still run)
	}
	if rapid.IntRange(0, 5).Draw(t, "fail now") != 0 {
		return // rarer than the other actions
	}
	fatal := rapid.IntRange(0, 5).Draw(t, "fenced") == 0
	m.beforeStep()
	w.stats.producerFaults++
	var err error
	if fatal {
		w.failed = true
		err = errors.New("producer fenced by a newer instance")
	} else {
		w.abortable = true
		w.pending = append(w.pending, txnWrite{src: partialSource, run: -1})
		err = errTxnAbortable
	}
	m.h.send(txnFailedEvent{err: err, fatal: fatal})
	m.afterStep()
}

// BrokerAborts: the broker aborts the open transaction on its own, as
// Apache Kafka does to one that outlives transaction_timeout (a paused
// process, a stalled stage) and the embedded broker does to every open
// one when it restarts after a crash. Its outputs are gone and the
// producer's epoch is stale, so every later write fails until the
// coordinator aborts. The producer learns it at once (a write in flight
// fails with an epoch error: it reports an abortable failure), or the
// coordinator only from the commit's answer (nothing was written
// meanwhile: AddOffsetsToTxn, TxnOffsetCommit or EndTxn is refused).
// Either way every partition must go back to its committed offset before
// anything more is committed: invariant (2) fails otherwise.
func (m *rpTxnModel) BrokerAborts(t *rapid.T) {
	w := m.world
	if len(m.h.commits) > 0 || w.failed {
		return // the transaction is ending already (the step changes nothing; the checks still run)
	}
	if rapid.IntRange(0, 11).Draw(t, "broker aborts now") != 0 {
		return // rarer than the other actions
	}
	tell := rapid.Bool().Draw(t, "producer learns at once")
	m.beforeStep()
	w.stats.brokerAborts++
	if w.onEnd != nil {
		w.onEnd(false)
	}
	w.pending = nil
	w.abortable = true
	if tell {
		m.h.send(txnFailedEvent{err: errTxnBrokerAborted})
	} else {
		w.silentAbort = true
	}
	m.afterStep()
}

// errTxnBrokerAborted is how the producer reports a transaction the broker
// aborted (its epoch was bumped).
var errTxnBrokerAborted = errors.New("INVALID_PRODUCER_EPOCH: the broker aborted the transaction and bumped the producer's epoch")

// Crash kills the process: the coordinator, processing and everything in
// flight are gone; what was committed stays. A commit in flight may have
// reached the transaction coordinator first. A new process starts (a
// new generation) with some partitions, from the committed offsets.
func (m *rpTxnModel) Crash(t *rapid.T) { m.crashNow(t) }

// crashNow is the Crash action of the models that have one.
func (m *rpModel) crashNow(t *rapid.T) {
	if rapid.IntRange(0, 9).Draw(t, "crash now") != 0 {
		return // rarer than the other actions (not a skip: too many end the run)
	}
	var tps []offsetstore.TopicPartition
	for _, tp := range rpTPs {
		if rapid.Bool().Draw(t, "assigned after the crash") {
			tps = append(tps, tp)
		}
	}
	m.crash(t, tps)
}

// crash kills the process and, if tps is not nil, starts a new one with
// tps assigned.
func (m *rpModel) crash(t *rapid.T, tps []offsetstore.TopicPartition) {
	w := m.world
	if len(m.h.commits) > 0 {
		job := m.h.commits[0]
		if w == nil {
			if rapid.Bool().Draw(t, "commit in flight landed") && job.Store.Commit(context.Background(), job.Request) == nil {
				for i := 0; i < job.Request.Len(); i++ {
					e := job.Request.At(i)
					m.committed[e.Partition] = e.Offset
				}
			}
		} else if st := job.Store.(*txnFakeStore); !job.Abort && !w.failed && !w.abortable && !st.fenced &&
			rapid.Bool().Draw(t, "commit in flight landed") {
			w.commit(m, job.Request)
			m.checkTxn(t)
		}
	}
	if w != nil {
		w.stats.crashes++
		w.stats.coordAborts += m.h.c.stats.txnAborts.Load()
		// the new process's producer fences the old one, whose open
		// transaction is aborted
		if w.onEnd != nil {
			w.onEnd(false)
		}
		w.pending, w.abortable, w.failed, w.silentAbort = nil, false, false, false
	}
	if m.state != nil {
		// the stores are closed with the process; the new one opens
		// them again (or finds its local files gone) and restores
		m.state.crash(t)
	}
	for _, s := range m.stores {
		s.Fence()
	}
	m.h = newCoordHarness(t, m.cfg)
	m.h.leaders(map[offsetstore.TopicPartition]int32{rpTPs[0]: 1, rpTPs[1]: 2})
	m.sched = process.NewScheduler(m.concurrency, m.keyOrdering)
	m.pending, m.running, m.reports = nil, nil, nil
	clear(m.handedSeq)
	clear(m.lastStart)
	clear(m.maxHanded)
	clear(m.seekFence)
	clear(m.ownedSince)
	clear(m.checked)
	if w != nil {
		clear(w.handedEnd)
	}
	m.noticesAt = 0
	m.active, m.revokeDone = false, nil
	if len(tps) > 0 {
		m.assign(tps)
	}
}

// Tick lets time pass. Messages to processing are delivered first: the
// process step takes them within microseconds, long before a transaction
// gives up waiting for processing to drain.
func (m *rpTxnModel) Tick(t *rapid.T) {
	for len(m.pending) > 0 {
		m.deliverMessage()
	}
	m.rpModel.Tick(t)
}

// checkTxn checks the transactional invariants (1)-(3). rpModel.Check
// calls it after every action, and the model after every commit (the
// drain at the end too).
func (m *rpModel) checkTxn(t *rapid.T) {
	w := m.world
	for _, s := range slices.SortedFunc(maps.Keys(w.committedRuns), cmpSource) {
		if w.repeatable[s] {
			continue
		}
		if s.offset >= m.committed[s.tp] {
			t.Fatalf("(1) an output of %v is committed, but %s's committed offset is %d (plans %v, dead-letter %v, stop policy %v)",
				s, s.tp, m.committed[s.tp], m.plansOf(s), m.dlPlans[s], m.stopPolicy)
		}
		if n := w.committedRuns[s]; n > 1 {
			t.Fatalf("(3) the outputs of %v are committed by %d runs (plans %v, dead-letter %v, stop policy %v)",
				s, n, m.plansOf(s), m.dlPlans[s], m.stopPolicy)
		}
	}
	for _, tp := range rpTPs {
		for o := int64(0); o < m.committed[tp]; o++ {
			s := source{tp, o}
			if !m.skipped[s] && !w.committedDone[s] {
				t.Fatalf("(2) %s's committed offset %d passes %d, which did not finish every stage in a committed transaction "+
					"(plans %v, dead-letter %v, stop policy %v, key ordering %v)",
					tp, m.committed[tp], o, m.plansOf(s), m.dlPlans[s], m.stopPolicy, m.keyOrdering)
			}
		}
	}
}

func cmpSource(a, b source) int {
	return cmp.Or(cmp.Compare(a.tp.Topic, b.tp.Topic), cmp.Compare(a.tp.Partition, b.tp.Partition), cmp.Compare(a.offset, b.offset))
}

// noteHanded records what the coordinator handed to processing.
func (w *txnWorld) noteHanded(b *fetch.Batch) {
	tp := b.Partition()
	w.handedEnd[tp] = max(w.handedEnd[tp], b.Span().End)
}

// noteReset records what a seek sends back to be processed again: from
// its target up to what was handed out before it.
func (w *txnWorld) noteReset(r *offsetstore.ResetEvent) {
	if r.Reason != offsetstore.ReasonSeek {
		return
	}
	for o := max(r.To, 0); o < max(r.From, w.handedEnd[r.Partition]); o++ {
		w.repeatable[source{r.Partition, o}] = true
	}
}

// ---- hooks of the shared model ----------------------------------------------

// mayRun reports whether a started unit may run now: under transactions
// a unit whose writes would fail (the producer waits for the abort) waits
// for the abort's fence to call it off, as its chain would wait for the
// destination until its context ends.
// A unit about to run while the broker has aborted the transaction
// without the producer noticing would find out with its first write: the
// producer reports it (Config.OnTxnFailed), and the unit waits for the
// abort's fence like any other.
func (m *rpModel) mayRun(r *rpUnit) bool {
	if m.world == nil || r.canceled {
		return true
	}
	if w := m.world; w.silentAbort {
		w.silentAbort = false
		m.beforeStep()
		m.h.send(txnFailedEvent{err: errTxnBrokerAborted})
		m.afterStep()
	}
	return m.world.writable()
}

// generationEnded reports whether the group ended the generation (a
// commit was fenced): the group rebalances.
func (m *rpModel) generationEnded() bool {
	if m.world != nil {
		if s, ok := m.stores[m.gen].(*txnFakeStore); ok && s.fenced {
			return true
		}
	}
	return m.h.c.fenced
}

// cancelUnits calls off the running units the fences with Cancel name,
// as process.Step does: those of the fence's partition whose batches'
// epochs are all at most the fence's.
func (m *rpModel) cancelUnits(fences []process.Fence) {
	for _, f := range fences {
		if !f.Cancel {
			continue
		}
		for _, r := range m.running {
			bs := r.u.Batches()
			if bs[0].Partition() != f.Partition {
				continue
			}
			if !slices.ContainsFunc(bs, func(b *fetch.Batch) bool { return b.Epoch() > f.Epoch }) {
				r.canceled = true
			}
		}
	}
}

// txnSink is the dead-letter sink under transactions: a dead letter is
// written through the transactional producer, in the open transaction.
type txnSink struct {
	m     *rpModel
	inner stages.Producer
}

func (s *txnSink) Produce(ctx context.Context, recs []stages.Record) error {
	w := s.m.world
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if !w.writable() {
		return stages.Unavailable(errTxnAbortable)
	}
	if err := s.inner.Produce(ctx, recs); err != nil {
		return err
	}
	return w.write(ctx, s.m, recs)
}
