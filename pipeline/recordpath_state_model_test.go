package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestRecordPathStoreStateMachine is the record-path model
// (TestRecordPathStateMachine, at_least_once) with keyed state: its first
// scripted stage adds each record's amount (its offset plus one) to a
// counter per key in a store, through the real state.Manager as the
// process step's UnitState (process.RunUnit), on in-memory pebble. The
// changelog is a fake partition per input partition: a write is
// acknowledged at once, fails as unavailable a few times first (some of
// those land anyway: their acknowledgement was lost), fails for good, or
// does not say its offset; restores read it through the pipeline's
// changelog reader (changelogChunk) and fail now and then. On top of the
// model's actions the process crashes: the coordinator, processing and
// the Manager are thrown away (a commit in flight landed or not), the
// local files survive or are lost, and a new process restores.
//
// After every step, besides the model's checks (see stateWorld.check):
//
//	(S1) the changelog folds, per partition and key, to exactly the sum
//	     of the amounts of the records whose change landed in it, counted
//	     once per run that landed it: nothing lost, nothing invented;
//	(S2) nothing lost: every record below its partition's committed
//	     offset that a run finished with its change kept has that change
//	     in the changelog. With (S1), what a restore gives is the fold of
//	     the committed records plus an excess made only of records
//	     processed more than once (replays) or not committed yet (the
//	     tail a restart replays);
//	(S3) the store a stage call reads holds the changelog's fold plus the
//	     changes the unit kept so far: a local store never runs ahead of
//	     its changelog, nor behind it after a restore;
//	(S4) a restore never reads twice at or past the changelog's end
//	     (under exactly_once that would wait for the open transaction,
//	     whose commit waits for the restoring unit).
//
// At the end, after the model's drain and liveness checks, every
// partition's changelog restores into an empty store that holds its fold.
func TestRecordPathStoreStateMachine(t *testing.T) {
	var total stateStats
	checkStateMachine(t, &recordPathSteps, 2_000, func(rt *rapid.T) {
		m := &rpStoreModel{newRPModelWith(rt, nil, true)}
		defer func() { total.add(m.state.finalStats()); m.state.close() }()
		rt.Repeat(rapid.StateMachineActions(m))
		m.drainAndCheckLiveness(rt)
		m.state.checkEnd(rt)
	})
	total.report(t)
}

// TestRecordPathTxnStoreStateMachine is TestRecordPathTxnStateMachine
// (exactly_once) with the keyed state of TestRecordPathStoreStateMachine:
// the changelog writes go into the fake open transaction (so they commit
// or abort with the outputs and offsets; a write may also fail and make
// the transaction abortable), the world's commits and aborts call the
// Manager's Committed and Aborted as txnStore does, a broker abort or a
// crash aborts the changelog's open records, and the restores read
// read_committed: up to the last stable offset, without the records of
// aborted or open transactions.
//
// After every step, besides the model's checks and (S3), (S4):
//
//	(S5) exactly once: the committed changelog (what a restore gives)
//	     folds, per partition and key, to the sum of the amounts of the
//	     records whose change a committed run kept, and invariants (1)-(3)
//	     cover those changes as they cover outputs: a record's change is
//	     committed only below its partition's committed offset and by one
//	     run, so the restored state is the fold of the stage over the
//	     committed input, each record once;
//	(S3) here: the store holds the fold of the committed changelog and of
//	     the transaction the process is in (open, or aborted by the broker
//	     and not yet by the process: a unit still running then commits
//	     nothing), never a change of a transaction the process aborted.
func TestRecordPathTxnStoreStateMachine(t *testing.T) {
	var total txnStats
	var totalState stateStats
	checkStateMachine(t, &recordPathSteps, 2_000, func(rt *rapid.T) {
		m := &rpTxnModel{newRPModelWith(rt, newTxnWorld(), true)}
		defer func() {
			total.add(m.world.stats, m.h.c.stats.txnAborts.Load())
			totalState.add(m.state.finalStats())
			m.state.close()
		}()
		for range txnStoreModelRounds {
			rt.Repeat(rapid.StateMachineActions(m))
		}
		m.revokeBeforeDrain(rt)
		m.drainAndCheckLiveness(rt)
		m.world.checkCoverage(rt)
		m.state.checkEnd(rt)
	})
	t.Logf("%d transactions committed, %d aborted, %d crashes, %d transactions aborted by the broker",
		total.commits, total.aborts, total.crashes, total.brokerAborts)
	totalState.report(t)
}

// txnStoreModelRounds is txnModelRounds for the model with state: half
// as many, as its units cost more (restores, pebble); two rounds catch
// the seeded state bugs within a few hundred checks.
const txnStoreModelRounds = 2

// rpStoreModel is the at_least_once record-path model with state: the
// actions of rpModel, and crashes.
type rpStoreModel struct{ *rpModel }

// Crash kills the process: the coordinator, processing, the state
// Manager and everything in flight are gone; the committed offsets and
// the changelog stay, and the local stores' files unless drawn lost. A
// new process starts (a new generation) with some partitions, from the
// committed offsets.
func (m *rpStoreModel) Crash(t *rapid.T) { m.crashNow(t) }

// rpStoreName is the stateful stage's store.
const rpStoreName = "counts"

// amount is what the stateful stage adds to its key's counter for a
// source record: its offset plus one, so a record counted twice, or lost,
// shows in the sum.
func amount(s source) int64 { return s.offset + 1 }

// clRecord is one offset of a fake changelog partition.
type clRecord struct {
	key    string
	value  []byte
	marker bool // a transaction marker: an offset without a record
	txn    int  // the transaction it was written in (0: none)
	// partial: part of a write that failed (its transaction must
	// abort; the Manager dropped its changes)
	partial bool
}

// clOutcome is what became of a transaction of the fake changelog.
type clOutcome uint8

const (
	clOpen clOutcome = iota
	clCommitted
	clAborted
)

// stateStats counts what the state world saw.
type stateStats struct {
	calls, nonZeroReads, writes, restores, restoredRecords, wipes, crashes, lostDisks, replays, endRecords int64
}

func (s *stateStats) add(o stateStats) {
	s.calls += o.calls
	s.nonZeroReads += o.nonZeroReads
	s.writes += o.writes
	s.restores += o.restores
	s.restoredRecords += o.restoredRecords
	s.wipes += o.wipes
	s.crashes += o.crashes
	s.lostDisks += o.lostDisks
	s.replays += o.replays
	s.endRecords += o.endRecords
}

func (s *stateStats) report(t *testing.T) {
	t.Logf("state: %d stage calls (%d reads of a counter above zero), %d changelog writes, %d restores (%d records, %d rebuilt), "+
		"%d crashes (%d lost their local files), %d records whose change landed more than once (at_least_once replays), "+
		"%d records restored at the ends", s.calls, s.nonZeroReads, s.writes, s.restores, s.restoredRecords, s.wipes, s.crashes,
		s.lostDisks, s.replays, s.endRecords)
	if !testing.Short() && (s.nonZeroReads == 0 || s.writes == 0 || s.restores == 0 || s.endRecords == 0) {
		t.Errorf("the state was not exercised: no counter read above zero, no changelog written, no restore, or nothing to restore at the end")
	}
}

// stateWorld is the keyed state of the model: the real state.Manager (one
// per process life) over in-memory pebble, the fake changelog it writes
// and restores from, and what the stateful stage did.
type stateWorld struct {
	m             *rpModel
	transactional bool
	// logs are the changelog partitions (one per input partition, by
	// number); txns the outcome of each transaction written to them, cur
	// the open one (exactly_once), and procTxn the one the process is
	// in: cur as of its last commit or abort (or its start). A broker
	// abort ends cur, not procTxn: the process learns of it only when it
	// aborts.
	logs    map[int32][]clRecord
	txns    map[int]clOutcome
	cur     int
	procTxn int

	storage *state.Storage
	mgr     *state.Manager
	us      *modelUnitState

	// landed counts, per source record, the runs whose change of it
	// landed in the changelog (at_least_once); keptCompleted: a run
	// finished it with its change kept.
	landed        map[source]int
	keptCompleted map[source]bool

	// the unit running
	runLanded   bool // its changes landed in the changelog
	faultStreak int  // consecutive faults drawn: bounded, so retries end
	endReads    int  // restore reads answered at or past the last stable offset, without progress
	cancelRun   context.CancelCauseFunc
	txnFailure  error // a write failure to report to the coordinator after the run

	stats stateStats
	// counters are the Managers' figures (restores), across crashes.
	counters state.Counters
}

func newStateWorld(m *rpModel) *stateWorld {
	sw := &stateWorld{m: m, transactional: m.world != nil, logs: map[int32][]clRecord{}, txns: map[int]clOutcome{}, cur: 1, procTxn: 1,
		storage: &state.Storage{Memory: true}, landed: map[source]int{}, keptCompleted: map[source]bool{}}
	sw.us = &modelUnitState{}
	sw.newManager()
	if w := m.world; w != nil {
		w.onEnd = sw.endTxn
	}
	return sw
}

func (sw *stateWorld) newManager() {
	sw.mgr = state.NewManager(state.Config{
		Group: "g", Stores: []string{rpStoreName}, Storage: sw.storage, Writer: sw, Reader: stateReader{sw},
		Transactional: sw.transactional, Backoff: time.Microsecond,
		Counters: &sw.counters,
	})
	sw.us.inner = unitState{sw.mgr} // the pipeline's adapter
}

func (sw *stateWorld) close() { _ = sw.mgr.Close() }

// finalStats is what the world saw, with the Managers' restore counts.
func (sw *stateWorld) finalStats() stateStats {
	s := sw.stats
	s.restores = sw.counters.Restores.Load()
	s.restoredRecords = sw.counters.Restored.Load()
	s.wipes = sw.counters.Rebuilt.Load()
	return s
}

// crash throws the Manager away (closing its stores: their files stay)
// and starts the new process's, on the same local files or, drawn, on
// none.
func (sw *stateWorld) crash(t *rapid.T) {
	sw.stats.crashes++
	sw.procTxn = sw.cur // (its open transaction was aborted)
	_ = sw.mgr.Close()
	if rapid.IntRange(0, 3).Draw(t, "local files lost") == 0 {
		sw.storage = &state.Storage{Memory: true}
		sw.stats.lostDisks++
	}
	sw.newManager()
}

// endTxn ends the open transaction (exactly_once): its changelog records
// commit or abort, and each partition it wrote gets a marker.
func (sw *stateWorld) endTxn(committed bool) {
	outcome := clAborted
	if committed {
		outcome = clCommitted
	}
	sw.txns[sw.cur] = outcome
	for p, log := range sw.logs {
		if slices.ContainsFunc(log, func(r clRecord) bool { return r.txn == sw.cur && !r.marker }) {
			sw.logs[p] = append(log, clRecord{marker: true, txn: sw.cur})
		}
	}
	sw.cur++
}

// stateCommitted and stateAborted call the Manager as txnStore does once
// the process committed or aborted its transaction.
func (m *rpModel) stateCommitted() {
	if sw := m.state; sw != nil {
		if err := sw.mgr.Committed(); err != nil {
			m.violations = append(m.violations, fmt.Sprintf("state: applying a committed transaction's changes failed: %v", err))
		}
		sw.procTxn = sw.cur
	}
}

func (m *rpModel) stateAborted() {
	if sw := m.state; sw != nil {
		sw.mgr.Aborted()
		sw.procTxn = sw.cur
	}
}

// visible reports whether r is a record that a read_committed reader
// sees, or (live) that the local store reflects: committed, or in the
// transaction the process is in (open, or aborted by the broker without
// the process having aborted it yet: a unit still running then writes
// nothing that commits), but not part of a write that failed.
func (sw *stateWorld) visible(r clRecord, live bool) bool {
	switch {
	case r.marker:
		return false
	case r.txn == 0 || sw.txns[r.txn] == clCommitted:
		return true
	}
	return live && r.txn == sw.procTxn && !r.partial
}

// fold is the latest value per key of partition p's visible records.
func (sw *stateWorld) fold(p int32, live bool) map[string]int64 {
	out := map[string]int64{}
	for _, r := range sw.logs[p] {
		if sw.visible(r, live) {
			n, err := strconv.ParseInt(string(r.value), 10, 64)
			if err != nil {
				panic(fmt.Sprintf("changelog value %q", r.value))
			}
			out[r.key] = n
		}
	}
	return out
}

// lso is partition p's last stable offset: its first record of an open
// transaction, else its end.
func (sw *stateWorld) lso(p int32) int64 {
	for i, r := range sw.logs[p] {
		if r.txn != 0 && sw.txns[r.txn] == clOpen {
			return int64(i)
		}
	}
	return int64(len(sw.logs[p]))
}

// fault draws whether the next write or read fails (never while the
// model drains, and never more than twice in a row: the Manager retries
// until it succeeds).
func (sw *stateWorld) fault(oneIn int, label string) bool {
	if !sw.m.drawing || sw.faultStreak >= 2 || rapid.IntRange(0, oneIn-1).Draw(sw.m.rt, label) != 0 {
		sw.faultStreak = 0
		return false
	}
	sw.faultStreak++
	return true
}

// Write implements state.Writer: the Manager's changelog write.
func (sw *stateWorld) Write(ctx context.Context, topic string, partition int32, recs []stages.Record) (int64, error) {
	m := sw.m
	if topic != state.ChangelogTopic("g", rpStoreName) || int(partition) >= len(rpTPs) {
		m.violations = append(m.violations, fmt.Sprintf("state: changes written to %s/%d, not the store's changelog partition", topic, partition))
	}
	if err := context.Cause(ctx); err != nil {
		return -1, err
	}
	if w := m.world; w != nil {
		// the transactional producer: into the open transaction
		if !w.writable() {
			return -1, stages.Unavailable(errTxnAbortable)
		}
		if len(m.h.commits) > 0 {
			m.violations = append(m.violations, fmt.Sprintf("(4) %d change(s) of changelog partition %d written while the transaction's commit or abort is in flight",
				len(recs), partition))
		}
		if sw.fault(30, "changelog write fails") {
			// part of it may have reached the broker: the transaction
			// must abort; the producer tells the coordinator
			w.abortable = true
			sw.append(partition, recs[:1], sw.cur)
			sw.logs[partition][len(sw.logs[partition])-1].partial = true
			sw.txnFailure = errTxnAbortable
			return -1, stages.Unavailable(errTxnAbortable)
		}
		sw.append(partition, recs, sw.cur)
		return int64(len(sw.logs[partition])), nil
	}
	// the idempotent producer: acknowledged, or unavailable for now (and
	// landed anyway, now and then: its acknowledgement was lost), or
	// failed for good (only on a first attempt: nothing landed)
	if sw.fault(8, "changelog write unavailable") {
		if rapid.Bool().Draw(m.rt, "landed anyway") {
			sw.land(partition, recs)
		}
		return -1, stages.Unavailable(errors.New("NOT_ENOUGH_REPLICAS"))
	}
	if !sw.runLanded && m.drawing && rapid.IntRange(0, 39).Draw(m.rt, "changelog write fails for good") == 0 {
		return -1, errors.New("TOPIC_AUTHORIZATION_FAILED")
	}
	sw.land(partition, recs)
	if m.drawing && rapid.IntRange(0, 4).Draw(m.rt, "offset unknown") == 0 {
		return -1, nil
	}
	return int64(len(sw.logs[partition])), nil
}

// land appends an at_least_once write: the unit's kept changes are in the
// changelog.
func (sw *stateWorld) land(partition int32, recs []stages.Record) {
	sw.append(partition, recs, 0)
	if !sw.runLanded {
		sw.runLanded = true
		for s := range sw.m.cur.kept {
			sw.landed[s]++
		}
	}
}

func (sw *stateWorld) append(partition int32, recs []stages.Record, txn int) {
	sw.stats.writes++
	for _, r := range recs {
		if r.Value == nil {
			sw.m.violations = append(sw.m.violations, fmt.Sprintf("state: a tombstone for %q: the counters never delete", r.Key))
		}
		sw.logs[partition] = append(sw.logs[partition], clRecord{key: string(r.Key), value: slices.Clone(r.Value), txn: txn})
	}
}

// fetch answers a fetch of changelog partition p at offset as a broker
// does: read_committed, the committed records below the last stable
// offset (the records of aborted transactions and the markers skipped),
// else every record below the high watermark; at most three records.
func (sw *stateWorld) fetch(p int32, offset int64, readCommitted bool) fetch.PartitionResult {
	log := sw.logs[p]
	hw := int64(len(log))
	end := hw
	if readCommitted {
		end = sw.lso(p)
	}
	pr := fetch.PartitionResult{LogStart: 0, HighWatermark: hw, LastStable: end, Next: offset, LastLeaderEpoch: -1}
	if offset < 0 || offset > hw {
		pr.Outcome = fetch.OffsetOutOfRange
		return pr
	}
	tp := offsetstore.TopicPartition{Topic: state.ChangelogTopic("g", rpStoreName), Partition: p}
	var recs []stages.Record
	o := offset
	for ; o < end && len(recs) < 3; o++ {
		r := log[o]
		if r.marker || (readCommitted && !sw.visible(r, false)) {
			continue
		}
		recs = append(recs, stages.Record{Topic: tp.Topic, Partition: p, Offset: o, Key: []byte(r.key), Value: r.value})
	}
	pr.Next = o
	if len(recs) > 0 {
		pr.Batch = fetch.NewBatch(tp, offsets.NoGeneration, 0, offsets.Span{Start: offset, End: o}, recs, o-offset)
	}
	return pr
}

// stateReader is the restores' state.Reader: the pipeline's changelog
// reader (changelogChunk) over the fake changelog's fetch answers.
type stateReader struct{ sw *stateWorld }

func (r stateReader) Read(ctx context.Context, topic string, partition int32, offset int64) (state.Chunk, error) {
	sw := r.sw
	if err := ctx.Err(); err != nil {
		return state.Chunk{}, err
	}
	tp := offsetstore.TopicPartition{Topic: topic, Partition: partition}
	var pr fetch.PartitionResult
	if sw.fault(10, "changelog read fails") {
		pr = fetch.PartitionResult{Outcome: fetch.Retriable, Err: errors.New("connection reset"), LogStart: -1, HighWatermark: -1, LastStable: -1, Next: offset}
	} else {
		pr = sw.fetch(partition, offset, changelogReadCommitted)
	}
	c, err := changelogChunk(tp, offset, pr)
	if lso := sw.lso(partition); err == nil && c.Next <= offset && offset >= lso {
		// (S4) a restore reads at the last stable offset once, to learn
		// it is at its end; reading there again it would wait for the
		// open transaction to end
		if sw.endReads++; sw.endReads > 1 && sw.cancelRun != nil {
			sw.m.violations = append(sw.m.violations, fmt.Sprintf("(S4) a restore of changelog partition %d read again at offset %d, the last stable offset being %d "+
				"(its end %d, the high watermark %d): it waits for the open transaction to end, and the transaction's commit waits for it",
				partition, offset, lso, c.End, len(sw.logs[partition])))
			sw.cancelRun(errors.New("the restore never ends"))
		}
	}
	return c, err
}

// modelUnitState is the Manager's process.UnitState (the pipeline's
// unitState) as the model's units see it: it remembers whether Begin or
// End failed the unit.
type modelUnitState struct {
	inner            process.UnitState
	beginErr, endErr error
	finished         bool
}

func (u *modelUnitState) Begin(ctx context.Context, tp offsetstore.TopicPartition, gen offsets.Generation, epoch offsetstore.Epoch) (context.Context, error) {
	c, err := u.inner.Begin(ctx, tp, gen, epoch)
	u.beginErr = err
	return c, err
}

func (u *modelUnitState) End(ctx context.Context, tp offsetstore.TopicPartition, finished bool) error {
	err := u.inner.End(ctx, tp, finished)
	u.endErr, u.finished = err, finished
	return err
}

// startRun readies a unit's run: its context (which a restore that never
// ends cancels) and the unit state it runs in.
func (sw *stateWorld) startRun(ctx context.Context) (context.Context, process.UnitState) {
	sw.runLanded, sw.endReads, sw.txnFailure = false, 0, nil
	sw.us.beginErr, sw.us.endErr, sw.us.finished = nil, nil, false
	ctx, sw.cancelRun = context.WithCancelCause(ctx)
	return ctx, sw.us
}

// endRun reports whether the unit's state failed it: it could not be
// readied, or its changes not written (then nothing of it finished).
func (sw *stateWorld) endRun() bool {
	sw.cancelRun(nil)
	sw.cancelRun = nil
	return sw.us.beginErr != nil || (sw.us.endErr != nil && sw.us.finished)
}

// afterRun notes what became of a unit's kept changes once
// process.RunUnit returned err (failed: its state failed it, or a fence
// called it off). When it reports some record finished (all, or those
// below a stop), its kept changes must be in the changelog: under
// exactly_once they join the open transaction, and the kept records it
// reports finished are keptCompleted. It tells the coordinator of a
// changelog write that made the transaction abortable, as the producer
// does (Config.OnTxnFailed).
func (sw *stateWorld) afterRun(recs []stages.Record, err error, failed bool) {
	m := sw.m
	below := int64(1 << 62)
	var stop *stages.StoppedError
	if errors.As(err, &stop) {
		below = stop.Offset
	} else if err != nil {
		below = -1
	}
	if !failed && len(recs) > 0 && recs[0].Offset < below {
		if w := m.world; w != nil {
			for _, s := range slices.SortedFunc(maps.Keys(m.cur.kept), cmpSource) {
				w.pending = append(w.pending, txnWrite{src: s, run: w.run, kept: true})
			}
		}
		for _, r := range recs {
			if s := sourceOf(r); m.cur.kept[s] && s.offset < below {
				sw.keptCompleted[s] = true
			}
		}
	}
	if sw.txnFailure != nil {
		m.beforeStep()
		m.h.send(txnFailedEvent{err: sw.txnFailure})
		m.afterStep()
		sw.txnFailure = nil
	}
}

// stateCall is one call of the stateful stage: it adds each record's
// amount to its key's counter, checking first that the store holds what
// the changelog and the unit's kept changes say (S3).
type stateCall struct {
	sw    *stateWorld
	obs   *runObs
	store stages.Store
	delta map[string]int64
	added []source
	bad   bool // (S3) was reported for this call
}

func (sw *stateWorld) call(ctx context.Context, obs *runObs) *stateCall {
	sw.stats.calls++
	st, err := stages.StoreFor(ctx, rpStoreName)
	if err != nil {
		sw.m.violations = append(sw.m.violations, fmt.Sprintf("state: the stateful stage has no store: %v", err))
		return nil
	}
	return &stateCall{sw: sw, obs: obs, store: st, delta: map[string]int64{}}
}

func (c *stateCall) add(r stages.Record) {
	if c == nil {
		return
	}
	sw, s, key := c.sw, sourceOf(r), string(r.Key)
	v, ok, err := c.store.Get(r.Key)
	var n int64
	if err == nil && ok {
		n, err = strconv.ParseInt(string(v), 10, 64)
	}
	if err != nil {
		sw.m.violations = append(sw.m.violations, fmt.Sprintf("state: reading %q: %v", key, err))
		return
	}
	if n != 0 {
		sw.stats.nonZeroReads++
	}
	base := sw.fold(s.tp.Partition, true)[key]
	if want := base + c.obs.stateDelta[key] + c.delta[key]; n != want && !c.bad {
		c.bad = true
		what := "the changelog"
		if sw.transactional {
			what = "the committed changelog and this process's open transaction"
		}
		sw.m.violations = append(sw.m.violations, fmt.Sprintf("(S3) reading %q of %s for %v, the store holds %d: %s folds to %d, "+
			"and this unit's kept changes add %d (this call's %d)", key, s.tp, s, n, what, base, c.obs.stateDelta[key]+c.delta[key], c.delta[key]))
	}
	if err := c.store.Put(r.Key, strconv.AppendInt(nil, n+amount(s), 10)); err != nil {
		sw.m.violations = append(sw.m.violations, fmt.Sprintf("state: writing %q: %v", key, err))
		return
	}
	c.delta[key] += amount(s)
	c.added = append(c.added, s)
}

// keep records that the call's changes stay: it returned its records as
// finished (all, or all but those a *stages.RecordErrors names, which
// changed nothing).
func (c *stateCall) keep() {
	if c == nil {
		return
	}
	for k, d := range c.delta {
		c.obs.stateDelta[k] += d
	}
	for _, s := range c.added {
		c.obs.kept[s] = true
	}
}

// check runs after every step: (S1), (S2) at_least_once, (S5) under
// exactly_once; (S3) and (S4) are found as they happen.
func (sw *stateWorld) check(t *rapid.T) {
	m := sw.m
	for _, tp := range rpTPs {
		p := tp.Partition
		counted := map[source]int{}
		if w := m.world; w != nil {
			maps.Copy(counted, w.committedKept)
		} else {
			maps.Copy(counted, sw.landed)
		}
		want := map[string]int64{}
		for s, n := range counted {
			if s.tp == tp && n > 0 {
				want[m.key(s)] += int64(n) * amount(s)
			}
		}
		got := sw.fold(p, false)
		if !maps.Equal(got, want) {
			if m.world != nil {
				t.Fatalf("(S5) %s's committed changelog folds to %v, but the runs whose state changes committed add up to %v (kept: %v)",
					tp, got, want, sortedSources(counted, tp))
			}
			t.Fatalf("(S1) %s's changelog folds to %v, but the runs whose changes landed in it add up to %v (landed: %v)",
				tp, got, want, sortedSources(counted, tp))
		}
		if m.world != nil {
			continue
		}
		for o := int64(0); o < m.committed[tp]; o++ {
			if s := (source{tp, o}); sw.keptCompleted[s] && sw.landed[s] == 0 {
				t.Fatalf("(S2) %s's committed offset %d passes %v, whose state change a run kept and finished, but it is not in the changelog "+
					"(its offset was committed before its change was written)", tp, m.committed[tp], s)
			}
		}
	}
}

// sortedSources lists the sources of tp in counts, with their counts.
func sortedSources(counts map[source]int, tp offsetstore.TopicPartition) []string {
	var out []string
	for _, s := range slices.SortedFunc(maps.Keys(counts), cmpSource) {
		if s.tp == tp && counts[s] > 0 {
			out = append(out, fmt.Sprintf("%d×%d", s.offset, counts[s]))
		}
	}
	return out
}

// checkEnd restores every changelog partition into an empty store, as a
// process on a new disk would, and checks it holds the committed fold.
func (sw *stateWorld) checkEnd(t *rapid.T) {
	for _, n := range sw.landed {
		if n > 1 {
			sw.stats.replays++
		}
	}
	st := &state.Storage{Memory: true}
	for _, tp := range rpTPs {
		id := state.Identity{Group: "g", Store: rpStoreName, Changelog: state.ChangelogTopic("g", rpStoreName), Partition: tp.Partition}
		p, _, err := st.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		// no faults; a restore that never ends is ended by (S4)
		sw.m.drawing = false
		ctx, _ := sw.startRun(context.Background())
		var res state.Restored
		p, res, err = state.Restore(ctx, st, p, stateReader{sw}, true, nil)
		sw.endRun()
		sw.stats.endRecords += res.Records
		if err != nil {
			if p != nil {
				_ = p.Close()
			}
			t.Fatalf("restoring %s: %v (%v)", tp, err, sw.m.violations)
		}
		got := map[string]int64{}
		err = p.Scan(nil, func(k, v []byte) error {
			n, err := strconv.ParseInt(string(v), 10, 64)
			got[string(k)] = n
			return err
		})
		_ = p.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want := sw.fold(tp.Partition, false); !maps.Equal(got, want) {
			t.Fatalf("a restore of %s from its changelog holds %v, its committed records fold to %v", tp, got, want)
		}
	}
}
