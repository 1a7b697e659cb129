package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"

	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/internal/engine/commit"
	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/internal/engine/resolve"
	"github.com/fencepost-dev/fencepost/internal/logging"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// recordPathSteps counts the record-path state machine's steps.
var recordPathSteps atomic.Int64

// TestRecordPathStateMachine drives the whole record path: the real
// coordinator, the real process scheduler and chain, scripted stages and
// a scripted dead-letter sink, and the commit path, through random
// interleavings of fetch, lookup and commit answers, batches handed to
// processing, units starting, running and finishing in any order,
// reports reaching the coordinator late, seeks, revokes with short
// deadlines and new generations, eager (revoke all, assign anew) or
// cooperative (a new generation keeps the partitions that stay; a revoke
// takes some while the others go on; partitions lost without a commit). The stages' outcomes per record are
// drawn once: pass, drop, emit two, fail a few attempts, fail for good,
// panic, hang past the processing timeout; the dead-letter sink takes a
// record, fails a few times first, refuses it whole (too large), or
// refuses it and its truncated envelope too. Stages transform what they
// emit (a new value, an added header). An outage makes a stage's
// destination, or the dead-letter sink, unavailable for every record
// (stages.Unavailable) for its next few calls, then it recovers.
//
// After every step it checks:
//
//	(a) no commit sent (or stored) passes a source record that did not
//	    finish every stage with its outputs acknowledged, or was
//	    dead-lettered, unless a seek or the reset policy skipped it;
//	(b) records of one partition (with key ordering: of one key) start
//	    in the order they were handed to processing, and two units never
//	    hold records of one key of one partition at once;
//	(c) a failure of a batch handed out before a seek never stops the
//	    partition the seek moved;
//	(d) a dead letter is the source record as consumed, written once
//	    per source record and run, and never because of an outage; a
//	    run that met an outage reported the wait, and its end.
//
// Liveness below also covers outages: they end, and everything is
// committed after them.
//
// At the end it answers everything, lets backoffs pass and assigns every
// partition if no generation is active, until nothing moves, and checks
// liveness: every assigned partition is fetching or stopped with a
// reason, the resolver is idle, no zombie is left, and after a flush
// every fetching partition has committed up to its high watermark.
//
// A failure prints the seed (-rapid.seed=N) that replays it.
func TestRecordPathStateMachine(t *testing.T) {
	checkStateMachine(t, &recordPathSteps, 5_000, func(rt *rapid.T) {
		m := newRPModel(rt)
		rt.Repeat(rapid.StateMachineActions(m))
		m.drainAndCheckLiveness(rt)
	})
}

var rpTPs = []offsetstore.TopicPartition{{Topic: "r", Partition: 0}, {Topic: "r", Partition: 1}}

type source struct {
	tp     offsetstore.TopicPartition
	offset int64
}

func sourceOf(r stages.Record) source {
	return source{offsetstore.TopicPartition{Topic: r.Topic, Partition: r.Partition}, r.Offset}
}

// fate is what a scripted stage does with one record.
type fate uint8

const (
	fatePass fate = iota
	fateDrop
	fateEmit2
	fateTransient // fails the first n attempts of each run
	fatePermanent
	fatePanic
	fateHang // blocks until its context ends
)

type stagePlan struct {
	fate fate
	n    int
}

// dlFate is what the scripted dead-letter sink does with a record.
type dlFate uint8

const (
	dlOK          dlFate = iota
	dlTransient          // fails twice per run, then takes it
	dlRefuseWhole        // refuses it for good; takes the truncated envelope
	dlRefuseAll          // refuses it and its envelope for good
)

// runObs is what one unit run did, seen from the stages and the sink.
type runObs struct {
	attemptsTP map[string]int   // "stage/source" -> attempts this run
	emitted    []map[source]int // by stage; [0] is the unit's input
	consumed   []map[source]int
	dead       []map[source]int
	// deadSources are the source records the sink took this run.
	deadSources map[source]bool
	// outages counts the calls that met an outage this run (and the
	// dead-letter writes that failed and are retried: the partition
	// waits for those too).
	outages int
	// kept are the source records whose state change the stateful stage
	// kept this run (its call returned them as finished), and
	// stateDelta what those changes added, by key (see stateWorld).
	kept       map[source]bool
	stateDelta map[string]int64
}

type rpUnit struct {
	u        *process.Unit
	executed bool
	err      error
	// canceled: a fence with Cancel called it off (transactions only,
	// as process.Step does): it runs with a canceled context, and
	// nothing of it counts
	canceled bool
}

type rpModel struct {
	h           *coordHarness
	cfg         coordinatorConfig
	concurrency int
	// world is the transactional world (nil: at-least-once); see
	// recordpath_txn_model_test.go
	world *txnWorld
	// state is the keyed state of the stateful stage (nil: no state);
	// see recordpath_state_model_test.go
	state       *stateWorld
	sched       *process.Scheduler
	chain       process.Chain
	keyOrdering bool
	stopPolicy  bool
	nStages     int
	recordErrs  []bool // per stage: reports a *stages.RecordErrors (else a plain error)

	hw      map[offsetstore.TopicPartition]int64
	keys    map[source]string
	plans   []map[source]stagePlan
	dlPlans map[source]dlFate
	cur     *runObs
	rt      *rapid.T
	drawing bool // stages may draw plans (false while draining: plans default to pass)

	gen        offsets.Generation
	active     bool
	revokeDone chan error
	revokeAll  bool // the revoke in progress takes every partition
	stores     map[offsets.Generation]fencedStore
	// ownedSince is, per assigned partition, the generation that
	// assigned it: batches of it from that generation on are its own
	ownedSince map[offsetstore.TopicPartition]offsets.Generation
	committed  map[offsetstore.TopicPartition]int64 // the group's committed offsets, across generations

	pending   []process.Message // emitted by the coordinator, not yet accepted by processing
	running   []*rpUnit
	reports   []*process.Report
	handedSeq map[*fetch.Batch]int
	seq       int
	lastStart map[keyRef]int
	maxHanded map[offsetstore.TopicPartition]offsetstore.Epoch
	seekFence map[offsetstore.TopicPartition]offsetstore.Epoch

	completed map[source]bool
	skipped   map[source]bool
	before    map[offsetstore.TopicPartition]int64 // committable before the step, -1 unset
	noticesAt int
	checked   map[offsets.RequestID]bool
	// violations are broken promises the scripted stages and sink saw.
	violations []string
	// outage is, per stage (index k-1) and for the dead-letter sink
	// (index nStages), how many more calls fail as unavailable.
	outage []int
	// waiting is the sum of OnUnavailable's deltas; waitsSeen counts
	// the waits started.
	waiting, waitsSeen int
}

// fencedStore is a generation's commit store that the model can fence
// (the group ended its generation).
type fencedStore interface {
	offsets.CommitStore
	Fence()
}

type keyRef struct {
	tp  offsetstore.TopicPartition
	key string
}

func newRPModel(t *rapid.T) *rpModel { return newRPModelWith(t, nil, false) }

// newRPModelWith returns the record-path model, transactional if world
// is not nil, with a stateful first stage if stateful (see stateWorld).
func newRPModelWith(t *rapid.T, world *txnWorld, stateful bool) *rpModel {
	cfg := coordinatorConfig{
		policy:            offsetstore.ResetPolicy(rapid.IntRange(0, 1).Draw(t, "policy")), // earliest or latest
		validate:          rapid.Bool().Draw(t, "validate"),
		commitInterval:    time.Duration(rapid.IntRange(0, 2).Draw(t, "commit interval")) * 100 * time.Millisecond,
		budget:            int64(rapid.IntRange(4, 40).Draw(t, "budget")),
		fetchMaxBytes:     8,
		partitionMaxBytes: 3,
		retryBackoff:      100 * time.Millisecond,
		maxRetryBackoff:   time.Second,
		metadataBackoff:   200 * time.Millisecond,
		fetchersPerBroker: rapid.IntRange(1, 2).Draw(t, "fetchers per broker"),
	}
	if world != nil {
		cfg.transactional = true
		cfg.txnDrainTimeout = time.Duration(rapid.IntRange(1, 4).Draw(t, "txn drain timeout")) * time.Second
	}
	m := &rpModel{
		h:           newCoordHarness(t, cfg),
		cfg:         cfg,
		world:       world,
		keyOrdering: rapid.Bool().Draw(t, "key ordering"),
		stopPolicy:  rapid.Bool().Draw(t, "stop policy"),
		nStages:     rapid.IntRange(1, 3).Draw(t, "stages"),
		hw:          map[offsetstore.TopicPartition]int64{},
		keys:        map[source]string{},
		dlPlans:     map[source]dlFate{},
		rt:          t,
		drawing:     true,
		stores:      map[offsets.Generation]fencedStore{},
		committed:   map[offsetstore.TopicPartition]int64{},
		handedSeq:   map[*fetch.Batch]int{},
		lastStart:   map[keyRef]int{},
		maxHanded:   map[offsetstore.TopicPartition]offsetstore.Epoch{},
		seekFence:   map[offsetstore.TopicPartition]offsetstore.Epoch{},
		completed:   map[source]bool{},
		skipped:     map[source]bool{},
		checked:     map[offsets.RequestID]bool{},
		ownedSince:  map[offsetstore.TopicPartition]offsets.Generation{},
	}
	if stateful {
		m.keyOrdering = false // a stateful pipeline orders by partition
	}
	m.concurrency = rapid.IntRange(1, 3).Draw(t, "concurrency")
	m.sched = process.NewScheduler(m.concurrency, m.keyOrdering)
	var named []process.NamedStage
	for k := 1; k <= m.nStages; k++ {
		m.plans = append(m.plans, map[source]stagePlan{})
		m.recordErrs = append(m.recordErrs, rapid.Bool().Draw(t, "record errors"))
		named = append(named, process.NamedStage{Name: fmt.Sprintf("s%d", k), Stage: &scriptStage{m: m, k: k}})
	}
	m.outage = make([]int, m.nStages+1)
	var sink stages.Producer = &scriptSink{m: m}
	if world != nil {
		sink = &txnSink{m: m, inner: sink}
	}
	m.chain = process.Chain{
		OnUnavailable: func(_ string, delta int, err error) {
			m.waiting += delta
			if delta > 0 {
				m.waitsSeen++
			}
			if (delta == -1) != (err == nil) {
				m.violations = append(m.violations, fmt.Sprintf("OnUnavailable delta %d with error %v", delta, err))
			}
		},
		Stages:  named,
		Policy:  process.FailurePolicy{Retries: rapid.IntRange(0, 2).Draw(t, "retries"), Backoff: time.Microsecond, Stop: m.stopPolicy, Sink: sink},
		Timeout: 2 * time.Millisecond,
		Log:     logging.ForStage(m.h.c.log),
	}
	for _, tp := range rpTPs {
		m.hw[tp] = int64(rapid.IntRange(0, 12).Draw(t, "hw"))
		m.committed[tp] = -1
	}
	m.h.leaders(map[offsetstore.TopicPartition]int32{rpTPs[0]: 1, rpTPs[1]: 2})
	if stateful {
		m.state = newStateWorld(m)
	}
	return m
}

// ---- the scripted world ---------------------------------------------------

func (m *rpModel) key(s source) string {
	k, ok := m.keys[s]
	if !ok {
		k = "k0"
		if m.drawing {
			k = fmt.Sprintf("k%d", rapid.IntRange(0, 2).Draw(m.rt, "key"))
		}
		m.keys[s] = k
	}
	return k
}

func (m *rpModel) plan(k int, s source) stagePlan {
	p, ok := m.plans[k-1][s]
	if ok {
		return p
	}
	if m.drawing {
		switch w := rapid.IntRange(0, 99).Draw(m.rt, "fate"); {
		case w < 60:
		case w < 70:
			p.fate = fateDrop
		case w < 78:
			p.fate = fateEmit2
		case w < 88:
			p.fate, p.n = fateTransient, rapid.IntRange(1, 3).Draw(m.rt, "failures")
		case w < 93:
			p.fate = fatePermanent
		case w < 96:
			p.fate = fatePanic
		default:
			p.fate = fateHang
		}
	}
	m.plans[k-1][s] = p
	return p
}

func (m *rpModel) dlPlan(s source) dlFate {
	p, ok := m.dlPlans[s]
	if !ok && m.drawing {
		switch w := rapid.IntRange(0, 19).Draw(m.rt, "dead-letter fate"); {
		case w < 13:
		case w < 17:
			p = dlTransient
		case w < 19:
			p = dlRefuseWhole
		default:
			p = dlRefuseAll
		}
	}
	m.dlPlans[s] = p
	return p
}

// scriptStage is stage k of the chain: it does to each record what the
// record's plan says, and tells the model what it finished.
type scriptStage struct {
	m *rpModel
	k int
}

// errOutage is what a destination that is down answers.
var errOutage = errors.New("destination down (outage)")

func (s *scriptStage) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	m, obs := s.m, s.m.cur
	if m.outage[s.k-1] > 0 {
		m.outage[s.k-1]--
		obs.outages++
		return nil, stages.Unavailable(errOutage)
	}
	var re stages.RecordErrors
	hang := false
	// stage 1 keeps a counter per key (nil: no state)
	var sc *stateCall
	if s.k == 1 && m.state != nil {
		sc = m.state.call(ctx, obs)
	}
	for i, r := range in {
		src := sourceOf(r)
		p := m.plan(s.k, src)
		ak := fmt.Sprintf("%d/%v", s.k, src)
		obs.attemptsTP[ak]++
		// what a stage emits is derived: a new value, an added header,
		// the source's Offset kept
		d := r
		d.Value = fmt.Appendf(nil, "%s>s%d", r.Value, s.k)
		d.Headers = append(slices.Clone(r.Headers), stages.Header{Key: "derived", Value: []byte{byte(s.k)}})
		switch p.fate {
		case fatePass:
			re.Emit(i, d)
			sc.add(r)
		case fateDrop:
			sc.add(r)
		case fateEmit2:
			re.Emit(i, d)
			re.Emit(i, d)
			sc.add(r)
		case fateTransient:
			if obs.attemptsTP[ak] <= p.n {
				re.Fail(i, errors.New("transient failure"))
			} else {
				re.Emit(i, d)
				sc.add(r)
			}
		case fatePermanent:
			re.Fail(i, stages.Permanent(errors.New("permanent failure")))
		case fatePanic:
			panic(fmt.Sprintf("stage %d panics on %v", s.k, src))
		case fateHang:
			hang = true
		}
	}
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if re.Failed() && !m.recordErrs[s.k-1] {
		return nil, errors.New("batch failed")
	}
	if m.world != nil {
		// what it emits is written through the transactional
		// producer; a call that fails wrote nothing
		if err := m.world.write(ctx, m, re.Out); err != nil {
			return nil, err
		}
	}
	for i, r := range in {
		if _, failed := re.Errs[i]; !failed {
			obs.consumed[s.k][sourceOf(r)]++
		}
	}
	if s.k < len(obs.emitted) {
		for _, r := range re.Out {
			obs.emitted[s.k][sourceOf(r)]++
		}
	}
	// the records that did not fail count as finished: their state
	// changes stay (see stages.Store)
	sc.keep()
	if re.Failed() {
		return nil, &re
	}
	return re.Out, nil
}

// scriptSink is the dead-letter sink.
type scriptSink struct{ m *rpModel }

func (s *scriptSink) Produce(_ context.Context, recs []stages.Record) error {
	m, obs := s.m, s.m.cur
	if m.outage[m.nStages] > 0 {
		m.outage[m.nStages]--
		obs.outages++
		return stages.Unavailable(errOutage)
	}
	for _, r := range recs {
		src := sourceOf(r)
		_, truncated := r.Header(stages.HeaderTruncated)
		ak := fmt.Sprintf("dl/%v", src)
		obs.attemptsTP[ak]++
		switch m.dlPlan(src) {
		case dlTransient:
			if obs.attemptsTP[ak] <= 2 {
				obs.outages++ // the partition waits for the sink too
				return errors.New("dead-letter topic unavailable")
			}
		case dlRefuseWhole:
			if !truncated {
				return stages.Permanent(errors.New("record too large for the dead-letter topic"))
			}
		case dlRefuseAll:
			return stages.Permanent(errors.New("dead-letter topic refuses the record"))
		}
		name, _ := r.Header(stages.HeaderErrorStage)
		var k int
		if _, err := fmt.Sscanf(string(name), "s%d", &k); err != nil {
			return fmt.Errorf("dead letter without a stage header: %v", r.Headers)
		}
		if msg, _ := r.Header(stages.HeaderErrorMessage); strings.Contains(string(msg), errOutage.Error()) {
			m.violations = append(m.violations, fmt.Sprintf("%v was dead-lettered because of an outage: %s", src, msg))
		}
		if _, derived := r.Header("derived"); (!truncated && string(r.Value) != "v") || derived {
			m.violations = append(m.violations, fmt.Sprintf("the dead letter of %v is not the source record: value %q, headers %v", src, r.Value, r.Headers))
		}
		if obs.deadSources[src] {
			m.violations = append(m.violations, fmt.Sprintf("the source record %v was dead-lettered twice in one run", src))
		}
		obs.deadSources[src] = true
		obs.dead[k][src]++
	}
	return nil
}

// ---- actions -------------------------------------------------------------

func (m *rpModel) Assign(t *rapid.T) {
	if m.active {
		t.Skip("a generation is active")
	}
	var tps []offsetstore.TopicPartition
	for _, tp := range rpTPs {
		if rapid.Bool().Draw(t, "assigned") {
			tps = append(tps, tp)
		}
	}
	m.assign(tps)
}

func (m *rpModel) assign(tps []offsetstore.TopicPartition) {
	m.beforeStep()
	for _, old := range m.stores {
		old.Fence() // the broker refuses commits of ended generations
	}
	m.gen++
	store := m.newStore(m.gen)
	m.stores[m.gen] = store
	var parts []assignedPartition
	for _, tp := range tps {
		a := assignedPartition{tp: tp}
		if c := m.committed[tp]; c >= 0 {
			a.start = offsetstore.Committed(c)
		}
		parts = append(parts, a)
	}
	m.maxHanded = map[offsetstore.TopicPartition]offsetstore.Epoch{}
	m.seekFence = map[offsetstore.TopicPartition]offsetstore.Epoch{}
	clear(m.ownedSince)
	for _, tp := range tps {
		m.ownedSince[tp] = m.gen
	}
	m.h.assign(m.gen, store, parts...)
	m.active, m.revokeDone = true, nil
	m.afterStep()
}

// Reassign is a cooperative rebalance's new generation: the partitions
// assigned now stay, with what they fetched and processed; some others
// are added, from the group's committed offsets.
func (m *rpModel) Reassign(t *rapid.T) {
	if !m.active || m.revokeDone != nil {
		t.Skip("no generation to move on from, or a revoke is in progress")
	}
	var add []offsetstore.TopicPartition
	for _, tp := range rpTPs {
		if m.h.c.byTP(tp) == nil && rapid.Bool().Draw(t, "added") {
			add = append(add, tp)
		}
	}
	m.reassign(add)
}

func (m *rpModel) reassign(add []offsetstore.TopicPartition) {
	m.beforeStep()
	for _, old := range m.stores {
		old.Fence()
	}
	m.gen++
	store := m.newStore(m.gen)
	m.stores[m.gen] = store
	var parts []assignedPartition
	for _, tp := range add {
		a := assignedPartition{tp: tp}
		if c := m.committed[tp]; c >= 0 {
			a.start = offsetstore.Committed(c)
		}
		parts = append(parts, a)
		delete(m.maxHanded, tp)
		delete(m.seekFence, tp)
		m.ownedSince[tp] = m.gen
	}
	m.h.assign(m.gen, store, parts...)
	m.afterStep()
}

// RevokeSome is a cooperative revoke of some partitions, with a long or
// a short deadline, or their loss (the group gave them away: nothing is
// drained or committed).
func (m *rpModel) RevokeSome(t *rapid.T) {
	if !m.active || m.revokeDone != nil {
		t.Skip("nothing to revoke")
	}
	var tps []offsetstore.TopicPartition
	for _, tp := range rpTPs {
		if m.h.c.byTP(tp) != nil && rapid.Bool().Draw(t, "revoked") {
			tps = append(tps, tp)
		}
	}
	if len(tps) == 0 {
		t.Skip("none drawn")
	}
	m.beforeStep()
	m.revokeDone, m.revokeAll = make(chan error, 1), false
	ev := &revokeEvent{gen: m.gen, partitions: tps, drainBy: m.h.now.Add(time.Hour), deadline: m.h.now.Add(time.Hour), done: m.revokeDone}
	switch rapid.IntRange(0, 3).Draw(t, "revoke kind") {
	case 0:
		ev.lost = true
		if len(tps) == len(m.h.c.index) {
			// the pipeline's member names no partitions when it loses
			// every one (a session that ended): the generation ends
			ev.partitions = nil
			m.revokeAll = true
		}
	case 1:
		ev.drainBy, ev.deadline = m.h.now, m.h.now.Add(time.Millisecond)
	}
	m.h.send(ev)
	m.afterStep()
}

func (m *rpModel) Revoke(t *rapid.T) {
	if !m.active || m.revokeDone != nil {
		t.Skip("nothing to revoke")
	}
	m.beforeStep()
	m.revokeDone, m.revokeAll = make(chan error, 1), true
	ev := &revokeEvent{gen: m.gen, drainBy: m.h.now.Add(time.Hour), deadline: m.h.now.Add(time.Hour), done: m.revokeDone}
	if rapid.IntRange(0, 2).Draw(t, "short deadline") == 0 {
		ev.drainBy, ev.deadline = m.h.now, m.h.now.Add(time.Millisecond)
	}
	m.h.send(ev)
	m.afterStep()
}

func (m *rpModel) AnswerFetch(t *rapid.T) {
	if len(m.h.fetches) == 0 {
		t.Skip("no fetch in flight")
	}
	i := rapid.IntRange(0, len(m.h.fetches)-1).Draw(t, "fetch")
	m.answerFetch(i, func(e offsets.FetchEntry) fetch.PartitionResult {
		if rapid.IntRange(0, 9).Draw(t, "fetch fails") == 0 {
			return fetch.PartitionResult{Outcome: fetch.Retriable, Err: errors.New("connection reset"), Next: e.Position.Offset(), LogStart: -1, HighWatermark: -1}
		}
		return m.records(e, e.Position.Offset()+int64(rapid.IntRange(1, 6).Draw(t, "records")))
	})
}

func (m *rpModel) answerFetch(i int, answer func(offsets.FetchEntry) fetch.PartitionResult) {
	m.beforeStep()
	f := m.h.fetches[i]
	m.h.fetches = append(m.h.fetches[:i], m.h.fetches[i+1:]...)
	m.h.answerFetch(f, answer)
	m.afterStep()
}

// records answers a fetch entry with the records from its position up to
// to (at most the high watermark), keyed.
func (m *rpModel) records(e offsets.FetchEntry, to int64) fetch.PartitionResult {
	from, hw := e.Position.Offset(), m.hw[e.Partition]
	to = min(to, hw)
	if from > hw {
		return fetch.PartitionResult{Outcome: fetch.OffsetOutOfRange, Next: from, LogStart: 0, HighWatermark: hw}
	}
	if to <= from {
		return fetch.PartitionResult{Next: from, LogStart: 0, HighWatermark: hw}
	}
	recs := make([]stages.Record, 0, to-from)
	for o := from; o < to; o++ {
		s := source{e.Partition, o}
		recs = append(recs, stages.Record{Topic: e.Partition.Topic, Partition: e.Partition.Partition, Offset: o,
			Key: []byte(m.key(s)), Value: []byte("v")})
	}
	b := fetch.NewBatch(e.Partition, e.Position.Generation(), e.Position.Epoch(), offsets.Span{Start: from, End: to}, recs, to-from)
	return fetch.PartitionResult{Next: to, Batch: b, Bytes: to - from, LogStart: 0, HighWatermark: hw}
}

func (m *rpModel) AnswerResolve(t *rapid.T) {
	if len(m.h.resolves) == 0 {
		t.Skip("no lookup in flight")
	}
	fail := rapid.IntRange(0, 7).Draw(t, "lookup fails") == 0
	m.answerResolve(fail)
}

func (m *rpModel) answerResolve(fail bool) {
	m.beforeStep()
	r := m.h.takeResolve()
	m.h.answerResolve(r, func(e offsets.ResolveEntry) resolve.PartitionResult {
		if fail {
			return resolve.PartitionResult{Err: errors.New("request timed out"), LogStart: -1, HighWatermark: -1, TimeOffset: -1}
		}
		return resolve.PartitionResult{LogStart: 0, HighWatermark: m.hw[e.Partition], TimeOffset: -1}
	})
	m.afterStep()
}

func (m *rpModel) AnswerCommit(t *rapid.T) {
	if len(m.h.commits) == 0 {
		t.Skip("no commit in flight")
	}
	m.answerCommit(rapid.IntRange(0, 9).Draw(t, "commit outcome"))
}

// newStore returns generation gen's commit store.
func (m *rpModel) newStore(gen offsets.Generation) fencedStore {
	if m.world != nil {
		return &txnFakeStore{gen: gen}
	}
	return newMemoryStore(gen)
}

func (m *rpModel) answerCommit(outcome int) {
	if m.world != nil {
		m.answerTxnCommit(outcome)
		return
	}
	m.beforeStep()
	req := m.h.commits[0]
	m.h.commits = m.h.commits[1:]
	var err error
	switch outcome {
	case 0:
		err = errors.New("coordinator load in progress")
	case 1:
		err = fmt.Errorf("REBALANCE_IN_PROGRESS: %w", offsets.ErrGenerationEnded)
		if s, ok := req.Store.(*memoryStore); ok {
			s.Fence()
		}
	default:
		if err = req.Store.Commit(context.Background(), req.Request); err == nil {
			for i := 0; i < req.Request.Len(); i++ {
				e := req.Request.At(i)
				m.committed[e.Partition] = e.Offset
			}
		}
	}
	m.h.send(&commit.Result{Request: req.Request, Err: err})
	m.afterStep()
}

// DeliverMessage hands the oldest message of the coordinator to the
// scheduler.
func (m *rpModel) DeliverMessage(t *rapid.T) {
	if len(m.pending) == 0 {
		t.Skip("no message for processing")
	}
	m.deliverMessage()
}

func (m *rpModel) deliverMessage() {
	msg := m.pending[0]
	m.pending = m.pending[1:]
	if m.world != nil {
		m.cancelUnits(msg.Fences)
	}
	for _, b := range msg.Batches {
		m.seq++
		m.handedSeq[b] = m.seq
	}
	m.sched.Accept(msg)
	m.collectReport()
	recordPathSteps.Add(1)
}

// StartUnit starts the next unit the scheduler hands out.
func (m *rpModel) StartUnit(t *rapid.T) {
	if !m.startUnit(t) {
		t.Skip("no unit may start")
	}
}

func (m *rpModel) startUnit(t *rapid.T) bool {
	u, ok := m.sched.Next()
	m.collectReport() // units dropped on the way complete their batches
	if !ok {
		return false
	}
	recordPathSteps.Add(1)
	bs := u.Batches()
	b := bs[0]
	seq, lastSeq := m.handedSeq[b], m.handedSeq[bs[len(bs)-1]]
	for _, other := range bs {
		if other.Partition() != b.Partition() {
			t.Fatalf("(b) a unit holds batches of %s and %s", b.Partition(), other.Partition())
		}
	}
	recs := u.Records()
	if !slices.IsSortedFunc(recs, func(a, b stages.Record) int { return int(a.Offset - b.Offset) }) {
		t.Fatalf("(b) unit of %s holds records out of offset order", b.Partition())
	}
	mine := m.keysOf(u)
	for _, r := range m.running {
		if r.u.Batches()[0].Partition() != b.Partition() {
			continue
		}
		for _, k := range m.keysOf(r.u) {
			if slices.Contains(mine, k) {
				t.Fatalf("(b) two units hold records of key %q of %s at once (ordering key=%v)", k, b.Partition(), m.keyOrdering)
			}
		}
	}
	for _, k := range mine {
		kr := keyRef{b.Partition(), k}
		if last := m.lastStart[kr]; seq < last {
			t.Fatalf("(b) %s key %q: a unit of batch #%d started after one of batch #%d", b.Partition(), k, seq, last)
		}
		m.lastStart[kr] = lastSeq
	}
	m.running = append(m.running, &rpUnit{u: u})
	return true
}

// keysOf returns the ordering keys of a unit: its records' keys with key
// ordering, the whole partition ("") without.
func (m *rpModel) keysOf(u *process.Unit) []string {
	if !m.keyOrdering {
		return []string{""}
	}
	var ks []string
	for _, r := range u.Records() {
		if !slices.Contains(ks, string(r.Key)) {
			ks = append(ks, string(r.Key))
		}
	}
	return ks
}

// RunUnit runs a started unit through the chain.
func (m *rpModel) RunUnit(t *rapid.T) {
	var idle []int
	for i, r := range m.running {
		if !r.executed && m.mayRun(r) {
			idle = append(idle, i)
		}
	}
	if len(idle) == 0 {
		t.Skip("no unit to run")
	}
	m.runUnit(m.running[idle[rapid.IntRange(0, len(idle)-1).Draw(t, "unit")]])
}

func (m *rpModel) runUnit(r *rpUnit) {
	recordPathSteps.Add(1)
	obs := &runObs{attemptsTP: map[string]int{}, deadSources: map[source]bool{}, kept: map[source]bool{}, stateDelta: map[string]int64{}}
	for range m.nStages + 1 {
		obs.emitted = append(obs.emitted, map[source]int{})
		obs.consumed = append(obs.consumed, map[source]int{})
		obs.dead = append(obs.dead, map[source]int{})
	}
	recs := r.u.Records()
	for _, rec := range recs {
		obs.emitted[0][sourceOf(rec)]++
	}
	m.cur = obs
	waitsBefore := m.waitsSeen
	ctx := context.Background()
	if r.canceled {
		cctx, cancel := context.WithCancelCause(ctx)
		cancel(errUnitCanceled)
		ctx = cctx
	}
	if m.world != nil {
		m.world.startRun(r.canceled)
	}
	// as process.Step's worker does: within the partition's state, if any
	var us process.UnitState
	if m.state != nil {
		ctx, us = m.state.startRun(ctx)
	}
	r.err = process.RunUnit(ctx, &m.chain, us, r.u)
	r.executed = true
	// a unit whose state could not be readied or written finishes
	// nothing (process.RunUnit stops it, or leaves it unfinished)
	stateFailed := m.state != nil && m.state.endRun()
	// (a canceled unit's chain ends at its first failure: it waits for
	// nothing)
	if m.waiting != 0 || (!r.canceled && (obs.outages > 0) != (m.waitsSeen > waitsBefore)) {
		m.violations = append(m.violations, fmt.Sprintf("a run met %d outage(s) and reported %d wait(s), %d still waiting at its end",
			obs.outages, m.waitsSeen-waitsBefore, m.waiting))
	}
	// the oracle: a source record finished if every stage finished every
	// record derived from it that reached it, or it was dead-lettered by
	// that stage or an earlier one (a dead letter is the source record,
	// written once per run: it stands for every derived record that fails)
	for _, rec := range recs {
		s := sourceOf(rec)
		done, dead := true, 0
		for k := 1; k <= m.nStages; k++ {
			if dead += obs.dead[k][s]; obs.consumed[k][s] < obs.emitted[k-1][s] && dead == 0 {
				done = false
				break
			}
		}
		if done && !r.canceled && !stateFailed {
			m.completed[s] = true
			if m.world != nil {
				m.world.finished(m, s)
			}
		}
	}
	if m.state != nil {
		m.state.afterRun(recs, r.err, stateFailed || r.canceled)
	}
}

// FinishUnit gives a run unit's result to the scheduler.
func (m *rpModel) FinishUnit(t *rapid.T) {
	var done []int
	for i, r := range m.running {
		if r.executed {
			done = append(done, i)
		}
	}
	if len(done) == 0 {
		t.Skip("no unit finished")
	}
	m.finishUnit(done[rapid.IntRange(0, len(done)-1).Draw(t, "unit")])
}

func (m *rpModel) finishUnit(i int) {
	recordPathSteps.Add(1)
	r := m.running[i]
	m.running = append(m.running[:i], m.running[i+1:]...)
	err := r.err
	if r.canceled {
		// whatever the chain made of it, nothing counts (process.Step)
		err = errUnitCanceled
	}
	m.sched.Finish(r.u, err)
	m.collectReport()
}

func (m *rpModel) collectReport() {
	if rep := m.sched.TakeReport(); rep != nil {
		m.reports = append(m.reports, rep)
	}
}

// DeliverReport gives the oldest report of processing to the coordinator.
func (m *rpModel) DeliverReport(t *rapid.T) {
	if len(m.reports) == 0 {
		t.Skip("no report")
	}
	m.deliverReport(t)
}

func (m *rpModel) deliverReport(t *rapid.T) {
	m.beforeStep()
	rep := m.reports[0]
	m.reports = m.reports[1:]
	preSeek := map[offsetstore.TopicPartition]bool{}
	for _, c := range rep.Completions {
		tp := c.Batch.Partition()
		if since, owned := m.ownedSince[tp]; owned && c.Err != nil && c.Batch.Generation() >= since && c.Batch.Epoch() <= m.seekFence[tp] {
			preSeek[tp] = true
		}
	}
	from := len(m.h.notices)
	m.h.send(rep)
	for _, n := range m.h.notices[from:] {
		if n.Stopped != nil && preSeek[n.Stopped.Partition] {
			t.Fatalf("(c) a failure of a batch handed out before a seek stopped %s: %v", n.Stopped.Partition, n.Stopped.Err)
		}
	}
	m.afterStep()
}

func (m *rpModel) Seek(t *rapid.T) {
	tp := rapid.SampledFrom(rpTPs).Draw(t, "tp")
	var req offsetstore.StartRequest
	switch rapid.IntRange(0, 2).Draw(t, "seek kind") {
	case 0:
		req = offsetstore.Earliest()
	case 1:
		req = offsetstore.Latest()
	default:
		req = offsetstore.Exact(int64(rapid.IntRange(0, int(m.hw[tp])).Draw(t, "seek offset")))
	}
	m.beforeStep()
	done := make(chan error, 1)
	m.h.send(&seekEvent{tp: tp, req: req, done: done})
	if err := <-done; err == nil {
		m.seekFence[tp] = m.maxHanded[tp]
	}
	m.afterStep()
}

// Outage makes a stage's destination, or the dead-letter sink,
// unavailable for every record for its next few calls.
func (m *rpModel) Outage(t *rapid.T) {
	i := rapid.IntRange(0, m.nStages).Draw(t, "outage of")
	m.outage[i] = rapid.IntRange(1, 4).Draw(t, "outage calls")
	recordPathSteps.Add(1)
}

func (m *rpModel) Produce(t *rapid.T) {
	tp := rapid.SampledFrom(rpTPs).Draw(t, "tp")
	m.hw[tp] += int64(rapid.IntRange(1, 8).Draw(t, "produced"))
	recordPathSteps.Add(1)
}

func (m *rpModel) Tick(t *rapid.T) {
	m.beforeStep()
	m.h.advance(time.Duration(rapid.IntRange(10, 1500).Draw(t, "ms")) * time.Millisecond)
	m.afterStep()
}

func (m *rpModel) Flush(*rapid.T) {
	m.beforeStep()
	m.h.send(&flushEvent{done: make(chan error, 1)})
	m.afterStep()
}

// ---- bookkeeping ----------------------------------------------------------

// beforeStep remembers each partition's committable offset: a seek skips
// from there.
func (m *rpModel) beforeStep() {
	m.before = map[offsetstore.TopicPartition]int64{}
	for _, tp := range rpTPs {
		m.before[tp] = -1
		if p := m.h.c.byTP(tp); p != nil && m.h.c.active && p.wm.Generation() == m.h.c.gen {
			if off, ok := p.wm.Committable(); ok {
				m.before[tp] = off
			}
		}
	}
}

// afterStep takes what the coordinator emitted: messages for processing
// and notices; skips decided by resets; commits sent.
func (m *rpModel) afterStep() {
	recordPathSteps.Add(1)
	for _, n := range m.h.notices[m.noticesAt:] {
		r := n.Reset
		if r == nil {
			continue
		}
		if m.world != nil {
			m.world.noteReset(r)
		}
		lo := r.From
		if r.Reason == offsetstore.ReasonSeek {
			if b, ok := m.before[r.Partition]; ok && b >= 0 {
				lo = min(lo, b)
			}
		}
		if lo < 0 || r.Reason == offsetstore.ReasonNoCommittedOffset {
			lo = 0 // nothing was processed or committed: the start is by decision
		}
		for o := lo; o < r.To; o++ {
			m.skipped[source{r.Partition, o}] = true
		}
	}
	m.noticesAt = len(m.h.notices)
	for _, msg := range m.h.messages {
		for _, b := range msg.Batches {
			m.maxHanded[b.Partition()] = max(m.maxHanded[b.Partition()], b.Epoch())
			if m.world != nil {
				m.world.noteHanded(b)
			}
		}
		m.pending = append(m.pending, msg)
	}
	m.h.messages = nil
	if m.revokeDone != nil {
		select {
		case <-m.revokeDone:
			if m.revokeAll {
				m.active = false
			}
			m.revokeDone = nil
		default:
		}
	}
	for tp := range m.ownedSince {
		if m.h.c.byTP(tp) == nil {
			delete(m.ownedSince, tp) // revoked or lost
		}
	}
	for _, req := range m.h.commits {
		if !m.checked[req.Request.ID()] {
			m.checked[req.Request.ID()] = true
			for i := 0; i < req.Request.Len(); i++ {
				e := req.Request.At(i)
				m.checkAccounted(m.rt, "commit sent", e.Partition, e.Offset)
			}
		}
	}
}

// checkAccounted fails if an offset below upTo of tp is neither finished
// nor skipped by decision.
func (m *rpModel) checkAccounted(t *rapid.T, what string, tp offsetstore.TopicPartition, upTo int64) {
	for o := int64(0); o < upTo; o++ {
		s := source{tp, o}
		if !m.completed[s] && !m.skipped[s] {
			t.Fatalf("(a) %s: %s at %d passes offset %d, which did not finish every stage and was not skipped "+
				"(plans %v, dead-letter %v, stop policy %v, key ordering %v)",
				what, tp, upTo, o, m.plansOf(s), m.dlPlans[s], m.stopPolicy, m.keyOrdering)
		}
	}
}

func (m *rpModel) plansOf(s source) []stagePlan {
	var out []stagePlan
	for k := range m.nStages {
		out = append(out, m.plans[k][s])
	}
	return out
}

// Check runs after every action.
func (m *rpModel) Check(t *rapid.T) {
	m.h.checkStructure()
	if len(m.violations) > 0 {
		t.Fatalf("%s", m.violations[0])
	}
	for _, tp := range rpTPs {
		m.checkAccounted(t, "committed offset", tp, m.committed[tp])
	}
	if m.world != nil {
		m.checkTxn(t)
	}
	if m.state != nil {
		m.state.check(t)
	}
}

// ---- the end: drain, then liveness -----------------------------------------

// drainAndCheckLiveness answers everything until nothing moves, with no
// new faults, and checks that everything that should happen did.
func (m *rpModel) drainAndCheckLiveness(t *rapid.T) {
	m.drawing = false // records not seen yet pass every stage
	cooperative := rapid.Bool().Draw(t, "cooperative end")
	settle := func() {
		quiet := 0
		for round := 0; round < 400 && quiet < 3; round++ {
			moved := m.drainRound(t)
			if m.world != nil && m.h.c.txn.failed != nil {
				// the producer failed for good: the run ends with the
				// error, and a restart recovers
				m.crash(t, nil)
				moved = true
			}
			// End with every partition assigned. A fenced generation is
			// ending anyway (the group rebalances).
			switch {
			case m.revokeDone != nil:
				// a revoke in progress finishes first
			case !m.active:
				m.assign(rpTPs)
				moved = true
			case len(m.h.c.index) == len(rpTPs) && !m.generationEnded():
			case cooperative:
				// a cooperative rebalance: a new generation keeps what is
				// assigned and adds the rest
				var add []offsetstore.TopicPartition
				for _, tp := range rpTPs {
					if m.h.c.byTP(tp) == nil {
						add = append(add, tp)
					}
				}
				m.reassign(add)
				moved = true
			default:
				// an eager one: revoke everything, then assign all
				m.beforeStep()
				m.revokeDone, m.revokeAll = make(chan error, 1), true
				m.h.send(&revokeEvent{gen: m.gen, drainBy: m.h.now.Add(time.Hour), deadline: m.h.now.Add(time.Hour), done: m.revokeDone})
				m.afterStep()
				moved = true
			}
			if moved {
				quiet = 0
			} else {
				quiet++
			}
		}
		if quiet < 3 {
			t.Fatalf("liveness: the record path never settled (running %d, pending %d, reports %d, fetches %d, lookups %d, commits %d)",
				len(m.running), len(m.pending), len(m.reports), len(m.h.fetches), len(m.h.resolves), len(m.h.commits))
		}
		c := m.h.c
		if c.resolver.busy() || len(m.h.resolves) > 0 {
			t.Fatalf("liveness: the resolver is not idle (busy %v, %d lookups unanswered)", c.resolver.busy(), len(m.h.resolves))
		}
		if len(c.zombies) > 0 {
			t.Fatalf("liveness: zombies left: %v", c.zombies)
		}
	}
	settle()
	c := m.h.c
	for attempt := 0; ; attempt++ {
		// A transaction the broker aborted while nothing was written
		// since is known only to the producer: the flush's commit is
		// refused and aborts it (the partitions go back to their
		// committed offsets), and the next flush commits them.
		brokerAborted := m.world != nil && m.world.abortable && attempt == 0
		// flush: every fetching partition commits up to its high watermark
		m.beforeStep()
		m.h.send(&flushEvent{done: make(chan error, 1)})
		m.afterStep()
		for len(m.h.commits) > 0 {
			m.answerCommit(9)
		}
		if !brokerAborted {
			break
		}
		settle()
	}
	m.Check(t)
	for _, tp := range rpTPs {
		p := c.byTP(tp)
		switch {
		case p == nil:
			t.Fatalf("liveness: %s is not assigned after the final assignment", tp)
		case p.state == Stopped:
			if p.stopErr == nil {
				t.Fatalf("liveness: %s stopped without a reason", tp)
			}
		case p.state != Fetching:
			t.Fatalf("liveness: %s is %v after everything was answered", tp, p.state)
		case m.committed[tp] != m.hw[tp]:
			t.Fatalf("liveness: %s is fetching but committed %d of %d records (position %d, committable %v, coordinator's committed %d, fenced %v, commit in flight %v)",
				tp, m.committed[tp], m.hw[tp], p.pos.Offset(), p.wm, p.committed, c.fenced, c.committer.busy())
		}
	}
}

// drainRound does everything that can be done once, without faults, and
// reports whether anything moved.
func (m *rpModel) drainRound(t *rapid.T) bool {
	moved := false
	for len(m.pending) > 0 {
		m.deliverMessage()
		moved = true
	}
	for m.startUnit(t) {

		moved = true
	}
	for _, r := range m.running {
		if !r.executed && m.mayRun(r) {
			m.runUnit(r)
			moved = true
		}
	}
	for i := 0; i < len(m.running); {
		if !m.running[i].executed {
			i++ // waits for its fence (transactions)
			continue
		}
		m.finishUnit(i)
		moved = true
	}
	for len(m.reports) > 0 {
		m.deliverReport(t)
		moved = true
	}
	for len(m.h.resolves) > 0 {
		m.answerResolve(false)
		moved = true
	}
	for len(m.h.commits) > 0 {
		m.answerCommit(9)
		moved = true
	}
	// Answer every fetch in flight: with records up to the high
	// watermark, or empty (a long poll that reached fetch_max_wait).
	// Only records handed out count as moving.
	ids := make([]offsets.RequestID, len(m.h.fetches))
	for i, f := range m.h.fetches {
		ids[i] = f.ID()
	}
	for _, id := range ids {
		i := slices.IndexFunc(m.h.fetches, func(f offsets.FetchRequest) bool { return f.ID() == id })
		if i < 0 {
			continue
		}
		for j := 0; j < m.h.fetches[i].Len(); j++ {
			if e := m.h.fetches[i].At(j); e.Position.Offset() < m.hw[e.Partition] {
				moved = true
			}
		}
		m.answerFetch(i, func(e offsets.FetchEntry) fetch.PartitionResult { return m.records(e, m.hw[e.Partition]) })
	}
	if m.world != nil && (len(m.pending) > 0 || len(m.running) > 0 || len(m.reports) > 0 || !m.sched.Idle()) {
		// processing takes no time: what was just handed out is
		// processed before time passes (a transaction's commit waits
		// txnDrainTimeout for it)
		return moved
	}
	// let backoffs, the commit interval and revoke deadlines pass
	m.beforeStep()
	m.h.advance(2 * time.Second)
	m.afterStep()
	return moved
}
