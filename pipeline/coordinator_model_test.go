package pipeline

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"

	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/internal/engine/commit"
	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/internal/engine/resolve"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// modelSteps counts the state-machine steps run, to prove the CI run
// exercises enough of them.
var modelSteps atomic.Int64

// TestCoordinatorStateMachine drives random interleavings of every input
// event against the coordinator, playing a small Kafka world (log start
// and high watermark per partition, moving leaders, retention, topic
// recreation) and every worker, and checks after every step:
//
//	(i)   every assigned partition is in exactly one state, with a
//	      position or a pending request, never a hole;
//	(ii)  a result of a stale epoch or generation changes no state;
//	(iii) committable offsets never decrease within a generation (except
//	      at a data-loss reset) and never pass what was processed or a
//	      reset explains; commits never go backwards and never come from
//	      an old generation;
//	(iv)  at most one fetch or lookup per partition is in flight;
//	(v)   offsets handed to processing for a partition continue without
//	      gaps, except where a reset event explains the jump;
//	(vi)  a fetch or lookup result sent with a leader epoch other than
//	      the partition's current one changes no state (part of ii);
//	(vii) a batch handed to processing never continues past a record
//	      the log no longer holds: when an unclean election truncated
//	      the log below what was handed out (or below a committed offset
//	      that carries its leader epoch) and new records took those
//	      offsets, a reset (log_truncation) must be reported before
//	      anything from the new log is handed out;
//	(viii) a commit's leader epoch, when it has one, is the leader epoch
//	      of the record just below the committed offset as it was
//	      processed: the one that record had when it was handed out, of the
//	      newest processing of that offset (a seek back hands an offset
//	      out again, maybe as another record after an unclean election;
//	      until that one is processed the commit speaks for the old one).
//
// Records have sizes (from one byte to twice the budget), and fetch
// answers follow Kafka's limits: a partition returns at most
// partitionMaxBytes and a response at most the request's MaxBytes, except
// that the first record of the first partition with records is returned
// whatever its size; some answers end at a corrupt batch (the records
// before it delivered, the partition stopping when it stays corrupt). At
// the end it checks liveness: with no new faults,
// everything answered, processing finishing and backoffs passing, a
// fetching partition with records beyond its position eventually
// delivers them, whatever the sizes, budget and limits (a partition that
// never delivers is a stall; a stop must name its reason).
//
// The world's leader epochs follow Kafka: every leader change bumps the
// partition's leader epoch and starts a new one at the log end; a fetch
// or lookup with an older leader epoch is refused (FENCED_LEADER_EPOCH),
// and OffsetForLeaderEpoch answers from the leader epoch history as
// Kafka's leader epoch cache does.
//
// Rebalances are eager (revoke everything, assign anew) or cooperative
// (a new generation keeps the partitions that stay and adds others; a
// revoke takes some away while the rest keep going; partitions can be
// lost without a commit). A kept partition carries what it fetched and
// processed into the new generation; a partition revoked and assigned
// again starts over.
//
// A failure prints the seed (-rapid.seed=N) that replays it.
func TestCoordinatorStateMachine(t *testing.T) {
	checkStateMachine(t, &modelSteps, 10_000, func(rt *rapid.T) {
		m := newModel(rt)
		rt.Repeat(rapid.StateMachineActions(m))
		m.checkLiveness(rt)
	})
}

// checkStateMachine runs a rapid state machine (run builds and drives
// one) and fails, unless in -short mode, when fewer than least steps were
// counted in steps: the run must exercise enough to mean something.
func checkStateMachine(t *testing.T, steps *atomic.Int64, least int64, run func(*rapid.T)) {
	t.Helper()
	before := steps.Load()
	rapid.Check(t, run)
	n := steps.Load() - before
	t.Logf("%d state-machine steps", n)
	if !testing.Short() && n < least {
		t.Errorf("only %d steps ran; run with -rapid.steps=%d or more", n, least/100+50)
	}
}

var modelTPs = []offsetstore.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}, {Topic: "b", Partition: 0}}

type logBounds struct {
	start, hw   int64
	leaderEpoch int32              // the leader epoch now
	history     []leaderEpochStart // leader epochs and where each starts, ascending
}

// leaderEpochStart is one entry of a log's leader epoch history.
type leaderEpochStart struct {
	leaderEpoch int32
	start       int64
}

// newLeaderEpoch makes a new leader (an election): the leader epoch goes
// up and starts at the log end, replacing history entries that start
// there or later.
func (lb *logBounds) newLeaderEpoch() {
	lb.leaderEpoch++
	h := lb.history
	for len(h) > 0 && h[len(h)-1].start >= lb.hw {
		h = h[:len(h)-1]
	}
	lb.history = append(h, leaderEpochStart{leaderEpoch: lb.leaderEpoch, start: lb.hw})
}

// leaderEpochAt is the leader epoch of the record at offset o, -1 if none.
func (lb *logBounds) leaderEpochAt(o int64) int32 {
	e := int32(-1)
	for _, h := range lb.history {
		if h.start <= o {
			e = h.leaderEpoch
		}
	}
	return e
}

// endOffsetFor answers OffsetForLeaderEpoch as Kafka's leader epoch cache
// does: a leader epoch's end is where the next higher one starts, the
// log end for the latest; a leader epoch older than every entry ends
// where the first starts; one newer than every entry is undefined (-1,
// -1).
func (lb *logBounds) endOffsetFor(e int32) (int32, int64) {
	h := lb.history
	if len(h) == 0 {
		return -1, -1
	}
	if h[len(h)-1].leaderEpoch == e {
		return e, lb.hw
	}
	hi := -1
	for i := range h {
		if h[i].leaderEpoch > e {
			hi = i
			break
		}
	}
	switch hi {
	case -1:
		return -1, -1
	case 0:
		return e, h[0].start
	}
	return h[hi-1].leaderEpoch, h[hi].start
}

// batchOut is a batch processing holds, not yet completed.
type batchOut struct {
	b            *fetch.Batch
	fenced       bool
	leaderEpochs []int32 // the leader epoch of each record when it was handed out
}

type model struct {
	h *coordHarness

	logs    map[offsetstore.TopicPartition]*logBounds
	leaders map[offsetstore.TopicPartition]int32

	gen        offsets.Generation
	active     bool
	revokeDone chan error
	revoking   []offsetstore.TopicPartition // of the revoke in progress; nil: every partition
	stores     map[offsets.Generation]*memoryStore
	// owned are the partitions assigned now, with the generation that
	// assigned them (kept partitions keep theirs)
	owned map[offsetstore.TopicPartition]offsets.Generation

	fenced map[offsetstore.TopicPartition]offsetstore.Epoch
	out    []batchOut

	// handed is, per partition, the leader epoch of every record handed
	// to processing in this generation (and, with validation, of the
	// record before a committed offset that carries its leader epoch),
	// until a
	// reset of the partition is reported: invariant (vii)
	handed map[offsetstore.TopicPartition]map[int64]int32
	// done is, per partition, the leader epoch (as handed out) of the
	// newest processing of every offset marked processed in this
	// generation, until a data-loss reset restarts the partition's
	// offsets: invariant (viii)
	done map[offsetstore.TopicPartition]map[int64]int32

	// per partition, reset each generation
	expectNext map[offsetstore.TopicPartition]int64 // next batch start, -1 unknown
	covered    map[offsetstore.TopicPartition]map[int64]bool
	base       map[offsetstore.TopicPartition]int64 // -1 until the first committable
	lastC      map[offsetstore.TopicPartition]int64
	committed  map[offsetstore.TopicPartition]int64 // highest commit sent this generation
	dataLoss   map[offsetstore.TopicPartition]bool  // a data-loss reset in this step
	checked    map[offsets.RequestID]bool           // commits already checked
	noticesAt  int

	// record sizes: 1 + hash(partition, offset, sizeSeed) % maxSize
	sizeSeed uint64
	maxSize  int64
}

func newModel(t *rapid.T) *model {
	cfg := coordinatorConfig{
		policy:            offsetstore.ResetPolicy(rapid.IntRange(0, 2).Draw(t, "policy")),
		validate:          rapid.Bool().Draw(t, "validate"),
		commitInterval:    time.Second,
		budget:            int64(rapid.IntRange(5, 40).Draw(t, "budget")),
		fetchMaxBytes:     8,
		retryBackoff:      100 * time.Millisecond,
		maxRetryBackoff:   time.Second,
		metadataBackoff:   200 * time.Millisecond,
		fetchersPerBroker: rapid.IntRange(1, 2).Draw(t, "fetchers per broker"),
		partitionMaxBytes: int32(rapid.IntRange(0, 10).Draw(t, "partition max bytes")),
	}
	m := &model{
		h:        newCoordHarness(t, cfg),
		logs:     map[offsetstore.TopicPartition]*logBounds{},
		leaders:  map[offsetstore.TopicPartition]int32{},
		stores:   map[offsets.Generation]*memoryStore{},
		fenced:   map[offsetstore.TopicPartition]offsetstore.Epoch{},
		checked:  map[offsets.RequestID]bool{},
		sizeSeed: rapid.Uint64().Draw(t, "size seed"),
		maxSize:  int64(rapid.SampledFrom([]int{1, 3, int(cfg.budget), 2 * int(cfg.budget)}).Draw(t, "max record size")),
		owned:    map[offsetstore.TopicPartition]offsets.Generation{},
	}
	for i, tp := range modelTPs {
		m.logs[tp] = &logBounds{start: 0, hw: int64(rapid.IntRange(0, 30).Draw(t, "hw")), history: []leaderEpochStart{{0, 0}}}
		m.leaders[tp] = int32(1 + i%2)
	}
	m.sendLeaders()
	m.resetGenerationModel()
	return m
}

// sendLeaders delivers the world's leaders and leader epochs.
func (m *model) sendLeaders() {
	leaderEpochs := map[offsetstore.TopicPartition]int32{}
	for tp, lb := range m.logs {
		leaderEpochs[tp] = lb.leaderEpoch
	}
	m.h.send(&fetch.Leaders{Leaders: copyLeaders(m.leaders), LeaderEpochs: leaderEpochs})
}

func copyLeaders(l map[offsetstore.TopicPartition]int32) map[offsetstore.TopicPartition]int32 {
	out := make(map[offsetstore.TopicPartition]int32, len(l))
	for k, v := range l {
		out[k] = v
	}
	return out
}

func (m *model) resetGenerationModel() {
	m.expectNext = map[offsetstore.TopicPartition]int64{}
	m.covered = map[offsetstore.TopicPartition]map[int64]bool{}
	m.base = map[offsetstore.TopicPartition]int64{}
	m.lastC = map[offsetstore.TopicPartition]int64{}
	m.committed = map[offsetstore.TopicPartition]int64{}
	m.handed = map[offsetstore.TopicPartition]map[int64]int32{}
	m.done = map[offsetstore.TopicPartition]map[int64]int32{}
	for _, tp := range modelTPs {
		m.resetPartitionModel(tp)
	}
}

// resetPartitionModel forgets what the model knows of tp's processing: it
// is assigned anew.
func (m *model) resetPartitionModel(tp offsetstore.TopicPartition) {
	m.handed[tp] = map[int64]int32{}
	m.done[tp] = map[int64]int32{}
	m.expectNext[tp] = -1
	m.covered[tp] = map[int64]bool{}
	m.base[tp] = -1
	m.lastC[tp] = -1
	m.committed[tp] = -1
}

// beingRevoked reports whether the revoke in progress takes tp.
func (m *model) beingRevoked(tp offsetstore.TopicPartition) bool {
	return m.revokeDone != nil && (m.revoking == nil || slices.Contains(m.revoking, tp))
}

// ownedBatch reports whether batch b was handed out to the current
// incarnation of its partition (white box: the coordinator's handouts).
func (m *model) ownedBatch(b *fetch.Batch) bool {
	p := m.h.c.byTP(b.Partition())
	return p != nil && m.h.c.active && slices.ContainsFunc(p.out, func(h handout) bool { return h.batch == b })
}

// ---- snapshots for invariant (ii) ----------------------------------------

type partSnap struct {
	state PartitionState
	req   offsetstore.StartRequest
	pos   offsets.Position
	epoch offsetstore.Epoch
	wm    int64
	wmOK  bool
	stop  bool
	// revoking: the revoke in progress takes the partition
	revoking bool
}

func (m *model) snap() map[offsetstore.TopicPartition]partSnap {
	out := map[offsetstore.TopicPartition]partSnap{}
	for _, p := range m.h.c.slots {
		if p == nil || p.zombie {
			continue
		}
		wm, ok := p.wm.Committable()
		out[p.tp] = partSnap{state: p.state, req: p.req, pos: p.pos, epoch: p.epoch, wm: wm, wmOK: ok, stop: p.stopErr != nil,
			revoking: p.revoking}
	}
	return out
}

func (m *model) requireUnchanged(t *rapid.T, what string, before map[offsetstore.TopicPartition]partSnap, tps []offsetstore.TopicPartition) {
	after := m.snap()
	for _, tp := range tps {
		if _, still := after[tp]; !still && before[tp].revoking {
			continue // the result let a revoke finish: the partition was released
		}
		if !reflect.DeepEqual(before[tp], after[tp]) {
			t.Fatalf("(ii) %s changed %s: %+v -> %+v", what, tp, before[tp], after[tp])
		}
	}
}

// current reports whether a result for tp at epoch is current (white
// box: the coordinator's own view). Every assignment gives a partition a
// new epoch, so the epoch names the incarnation whatever the generation
// the request was sent in (a kept partition spans generations).
func (m *model) current(tp offsetstore.TopicPartition, epoch offsetstore.Epoch) bool {
	c := m.h.c
	p := c.byTP(tp)
	return c.active && p != nil && p.epoch == epoch
}

// ---- actions -------------------------------------------------------------

func (m *model) Assign(t *rapid.T) {
	if m.active {
		t.Skip("a generation is active")
	}
	m.gen += offsets.Generation(rapid.IntRange(1, 2).Draw(t, "gen step"))
	store := newMemoryStore(m.gen)
	m.stores[m.gen] = store
	m.resetGenerationModel()
	var parts []assignedPartition
	for _, tp := range modelTPs {
		if !rapid.Bool().Draw(t, "assigned") {
			continue
		}
		a := assignedPartition{tp: tp}
		if rapid.Bool().Draw(t, "has commit") {
			off := int64(rapid.IntRange(0, int(m.logs[tp].hw)+10).Draw(t, "committed"))
			a.start = offsetstore.Committed(off)
			if e := m.logs[tp].leaderEpochAt(off - 1); off > 0 && e >= 0 && rapid.Bool().Draw(t, "commit has leader epoch") {
				// committed with the leader epoch of its record: the log's, or
				// an older one (committed before an election rewrote it)
				e = int32(rapid.IntRange(0, int(e)).Draw(t, "committed leader epoch"))
				a.start = offsetstore.CommittedAt(off, e)
				if m.h.c.cfg.validate {
					m.handed[tp][off-1] = e
				}
			}
			m.expectNext[tp] = off
			m.committed[tp] = off
		}
		parts = append(parts, a)
		m.owned[tp] = m.gen
	}
	m.h.assign(m.gen, store, parts...)
	m.active = true
	m.revokeDone = nil
	m.afterStep(t)
}

// Reassign is a cooperative rebalance's new generation: the partitions
// owned stay (listed again, or not: an assignment names what to add) and
// some new ones are added.
func (m *model) Reassign(t *rapid.T) {
	if !m.active || m.revokeDone != nil {
		t.Skip("no generation to move on from, or a revoke is in progress")
	}
	m.gen += offsets.Generation(rapid.IntRange(1, 2).Draw(t, "gen step"))
	store := newMemoryStore(m.gen)
	m.stores[m.gen] = store
	var parts []assignedPartition
	for _, tp := range modelTPs {
		if _, owned := m.owned[tp]; owned {
			if rapid.Bool().Draw(t, "kept partition listed") {
				parts = append(parts, assignedPartition{tp: tp, start: offsetstore.Committed(999)}) // ignored: it goes on
			}
			continue
		}
		if !rapid.Bool().Draw(t, "added") {
			continue
		}
		m.resetPartitionModel(tp)
		a := assignedPartition{tp: tp}
		if rapid.Bool().Draw(t, "has commit") {
			off := int64(rapid.IntRange(0, int(m.logs[tp].hw)+10).Draw(t, "committed"))
			a.start = offsetstore.Committed(off)
			m.expectNext[tp] = off
			m.committed[tp] = off
		}
		parts = append(parts, a)
		m.owned[tp] = m.gen
	}
	before := m.snap()
	m.h.assign(m.gen, store, parts...)
	// kept partitions go on exactly where they were
	for tp, since := range m.owned {
		if since < m.gen {
			if !reflect.DeepEqual(before[tp], m.snap()[tp]) {
				t.Fatalf("kept partition %s changed at the new generation: %+v -> %+v", tp, before[tp], m.snap()[tp])
			}
		}
	}
	m.afterStep(t)
}

// RevokeSome is a cooperative revoke: some partitions go, the others keep
// going; or they are lost (the group gave them away: no drain, no commit).
func (m *model) RevokeSome(t *rapid.T) {
	if !m.active || m.revokeDone != nil || len(m.owned) == 0 {
		t.Skip("nothing to revoke")
	}
	var tps []offsetstore.TopicPartition
	for _, tp := range modelTPs {
		if _, owned := m.owned[tp]; owned && rapid.Bool().Draw(t, "revoked") {
			tps = append(tps, tp)
		}
	}
	if len(tps) == 0 {
		t.Skip("none drawn")
	}
	ev := &revokeEvent{gen: m.gen, partitions: tps, drainBy: m.h.now.Add(time.Hour), deadline: m.h.now.Add(time.Hour),
		done: make(chan error, 1)}
	switch rapid.IntRange(0, 3).Draw(t, "revoke kind") {
	case 0:
		ev.lost = true
	case 1:
		ev.drainBy, ev.deadline = m.h.now, m.h.now.Add(time.Millisecond)
	}
	m.revokeDone, m.revoking = ev.done, tps
	m.h.send(ev)
	m.afterStep(t)
	if ev.lost {
		if m.revokeDone != nil {
			t.Fatal("a lost revoke did not finish at once")
		}
		for _, tp := range tps {
			if m.h.c.byTP(tp) != nil {
				t.Fatalf("lost partition %s still assigned", tp)
			}
		}
	}
}

func (m *model) Revoke(t *rapid.T) {
	if !m.active || m.revokeDone != nil {
		t.Skip("nothing to revoke")
	}
	m.revokeDone, m.revoking = make(chan error, 1), nil
	ev := &revokeEvent{gen: m.gen, drainBy: m.h.now.Add(time.Hour), deadline: m.h.now.Add(time.Hour), done: m.revokeDone}
	if rapid.IntRange(0, 3).Draw(t, "short deadline") == 0 {
		// the rebalance timeout is about to pass: give up on in-flight
		// work at the next tick
		ev.drainBy, ev.deadline = m.h.now, m.h.now.Add(time.Millisecond)
	}
	m.h.send(ev)
	m.afterStep(t)
}

func (m *model) AnswerFetch(t *rapid.T) {
	if len(m.h.fetches) == 0 {
		t.Skip("no fetch in flight")
	}
	i := rapid.IntRange(0, len(m.h.fetches)-1).Draw(t, "fetch")
	f := m.h.fetches[i]
	m.h.fetches = append(m.h.fetches[:i], m.h.fetches[i+1:]...)
	before := m.snap()
	var staleTPs []offsetstore.TopicPartition
	type skip struct{ from, to int64 }
	skips := map[offsetstore.TopicPartition]skip{}
	res := &fetch.Result{Request: f, Partitions: make([]fetch.PartitionResult, f.Len())}
	lim := responseLimit{left: int64(f.MaxBytes())}
	for j := range res.Partitions {
		e := f.At(j)
		lb := m.logs[e.Partition]
		pos := e.Position.Offset()
		cur := m.current(e.Partition, e.Position.Epoch())
		if p := m.h.c.byTP(e.Partition); cur && e.LeaderEpoch != p.leaderEpoch {
			cur = false // (vi)
		}
		if !cur {
			staleTPs = append(staleTPs, e.Partition)
		}
		var pr fetch.PartitionResult
		switch {
		case e.LeaderEpoch >= 0 && e.LeaderEpoch < lb.leaderEpoch && (cur || rapid.IntRange(0, 3).Draw(t, "fenced") > 0):
			// (else, when the partition has moved past that leader
			// epoch, the old leader answered before it stepped down:
			// records, of the log as it is now for simplicity, which
			// the partition must drop whatever they are)
			pr = fetch.PartitionResult{Outcome: fetch.NotLeader, Err: errors.New("FENCED_LEADER_EPOCH"), Next: pos, LogStart: -1, HighWatermark: -1}
		case m.leaders[e.Partition] != f.Broker() && rapid.IntRange(0, 3).Draw(t, "notleader") > 0:
			pr = fetch.PartitionResult{Outcome: fetch.NotLeader, Err: errors.New("NOT_LEADER_OR_FOLLOWER"), Next: pos, LogStart: -1, HighWatermark: -1}
		case rapid.IntRange(0, 9).Draw(t, "retriable") == 0:
			pr = fetch.PartitionResult{Outcome: fetch.Retriable, Err: errors.New("connection reset"), Next: pos, LogStart: -1, HighWatermark: -1}
		case pos < lb.start || pos > lb.hw:
			pr = outOfRange(lb.start, lb.hw)(e)
		case pos < lb.hw && rapid.IntRange(0, 19).Draw(t, "corrupt") == 0:
			// the batch at bad is corrupt: the records before it come
			// with the error
			bad := pos + int64(rapid.IntRange(0, int(lb.hw-pos)-1).Draw(t, "corrupt at"))
			to := lim.take(m, e, bad, m.h.c.cfg.partitionMaxBytes)
			pr = m.sizedRecords(e, to, lb.start, lb.hw)
			if to == bad { // else the limits ended the response before it
				pr.Outcome, pr.Err = fetch.Corrupt, fmt.Errorf("%w: CRC mismatch in the batch at offset %d", fetch.ErrCorrupt, bad)
			}
		case pos < lb.hw && rapid.IntRange(0, 7).Draw(t, "marker") == 0:
			pr = fetch.PartitionResult{Next: pos + 1, LogStart: lb.start, HighWatermark: lb.hw, LastLeaderEpoch: lb.leaderEpochAt(pos)}
			if cur {
				skips[e.Partition] = skip{pos, pos + 1}
			}
		default:
			to := min(lb.hw, pos+int64(rapid.IntRange(1, 6).Draw(t, "records")))
			pr = m.sizedRecords(e, lim.take(m, e, to, m.h.c.cfg.partitionMaxBytes), lb.start, lb.hw)
		}
		res.Partitions[j] = pr
	}
	m.h.send(res)
	m.requireUnchanged(t, "stale fetch result", before, staleTPs)
	for tp, sk := range skips {
		if p := m.h.c.byTP(tp); p != nil && p.state == Fetching && p.pos.Offset() == sk.to {
			for o := sk.from; o < sk.to; o++ {
				m.covered[tp][o] = true
				m.done[tp][o] = m.logs[tp].leaderEpochAt(o) // a marker: its epoch as the answer gave it
			}
			if m.expectNext[tp] == sk.from {
				m.expectNext[tp] = sk.to
			}
		}
	}
	m.afterStep(t)
}

func (m *model) AnswerResolve(t *rapid.T) {
	if len(m.h.resolves) == 0 {
		t.Skip("no lookup in flight")
	}
	r := m.h.takeResolve()
	before := m.snap()
	var staleTPs []offsetstore.TopicPartition
	res := &resolve.Result{Request: r, Partitions: make([]resolve.PartitionResult, r.Len())}
	for j := range res.Partitions {
		e := r.At(j)
		cur := m.current(e.Partition, e.Epoch)
		if p := m.h.c.byTP(e.Partition); cur && (e.LeaderEpoch != p.leaderEpoch || e.ValidateLeaderEpoch != p.resolveValidateLeaderEpoch()) {
			cur = false // (vi)
		}
		if !cur {
			staleTPs = append(staleTPs, e.Partition)
		}
		lb := m.logs[e.Partition]
		switch rapid.IntRange(0, 9).Draw(t, "lookup outcome") {
		case 2, 3:
			if e.LeaderEpoch >= 0 && e.LeaderEpoch < lb.leaderEpoch {
				res.Partitions[j] = resolve.PartitionResult{Err: errors.New("FENCED_LEADER_EPOCH"), NotLeader: true, LogStart: -1, HighWatermark: -1, TimeOffset: -1}
				break
			}
			fallthrough
		default:
			pr := resolve.PartitionResult{LogStart: lb.start, HighWatermark: lb.hw, TimeOffset: -1, EndLeaderEpoch: -1, LeaderEpochEndOffset: -1}
			if lb.hw > lb.start && rapid.Bool().Draw(t, "time found") {
				pr.TimeOffset = int64(rapid.IntRange(int(lb.start), int(lb.hw)-1).Draw(t, "time offset"))
			}
			if e.ValidateLeaderEpoch >= 0 {
				pr.EndLeaderEpoch, pr.LeaderEpochEndOffset = lb.endOffsetFor(e.ValidateLeaderEpoch)
			}
			res.Partitions[j] = pr
		case 0:
			res.Partitions[j] = resolve.PartitionResult{Err: errors.New("request timed out"), LogStart: -1, HighWatermark: -1, TimeOffset: -1}
		case 1:
			res.Partitions[j] = resolve.PartitionResult{Err: errors.New("NOT_LEADER_OR_FOLLOWER"), NotLeader: true, LogStart: -1, HighWatermark: -1, TimeOffset: -1}
		}
	}
	m.h.send(res)
	m.requireUnchanged(t, "stale lookup result", before, staleTPs)
	m.afterStep(t)
}

func (m *model) AnswerCommit(t *rapid.T) {
	if len(m.h.commits) == 0 {
		t.Skip("no commit in flight")
	}
	req := m.h.commits[0]
	m.h.commits = m.h.commits[1:]
	var err error
	switch rapid.IntRange(0, 9).Draw(t, "commit outcome") {
	case 0:
		err = errors.New("coordinator load in progress")
	case 1:
		err = fmt.Errorf("REBALANCE_IN_PROGRESS: %w", offsets.ErrGenerationEnded)
	default:
		err = req.Store.Commit(context.Background(), req.Request)
	}
	m.h.send(&commit.Result{Request: req.Request, Err: err})
	m.afterStep(t)
}

// markable reports, before o's completion is sent (white box), whether
// o was handed out to its partition's current incarnation, and whether
// the watermark must refuse its mark: another incarnation's batch, or
// one handed out before a data-loss restart.
func (m *model) markable(o batchOut) (owned, stale bool) {
	owned = m.ownedBatch(o.b)
	stale = true
	if p := m.h.c.byTP(o.b.Partition()); owned && o.b.Epoch() >= p.wm.Floor() {
		stale = false
	}
	return owned, stale
}

// processed books o's records below end as processed, unless o was
// fenced (dropped) or not owned: covered for (iii), and their leader
// epochs for (viii) unless the mark was stale.
func (m *model) processed(o batchOut, owned, stale bool, end int64) {
	if o.fenced || !owned {
		return
	}
	tp, sp := o.b.Partition(), o.b.Span()
	for off := sp.Start; off < end; off++ {
		m.covered[tp][off] = true
		if !stale {
			m.done[tp][off] = o.leaderEpochs[off-sp.Start]
		}
	}
}

// Complete finishes (or drops, if fenced) one batch processing holds, in
// any order.
func (m *model) Complete(t *rapid.T) {
	if len(m.out) == 0 {
		t.Skip("nothing being processed")
	}
	i := rapid.IntRange(0, len(m.out)-1).Draw(t, "batch")
	o := m.out[i]
	m.out = append(m.out[:i], m.out[i+1:]...)
	sp := o.b.Span()
	cp := process.Completion{Batch: o.b, FinishedBelow: sp.End}
	if o.fenced {
		cp.FinishedBelow = sp.Start
	}
	if !o.fenced && rapid.IntRange(0, 19).Draw(t, "stop") == 0 {
		cp.Err = errors.New("record rejected and dead_letter policy is stop")
		cp.FinishedBelow = sp.Start + int64(rapid.IntRange(0, int(sp.Len())-1).Draw(t, "failed at"))
		sp.End = cp.FinishedBelow
	}
	before := m.snap()
	owned, stale := m.markable(o)
	m.h.send(&process.Report{Completions: []process.Completion{cp}})
	m.processed(o, owned, stale, sp.End)
	if stale && cp.Err == nil {
		tp := o.b.Partition()
		m.requireUnchanged(t, "stale completion", before, []offsetstore.TopicPartition{tp})
	}
	m.afterStep(t)
}

func (m *model) Seek(t *rapid.T) {
	tp := rapid.SampledFrom(modelTPs).Draw(t, "tp")
	var req offsetstore.StartRequest
	switch rapid.IntRange(0, 3).Draw(t, "seek kind") {
	case 0:
		req = offsetstore.Earliest()
	case 1:
		req = offsetstore.Latest()
	case 2:
		req = offsetstore.AtTime(time.Unix(0, 0))
	default:
		req = offsetstore.Exact(int64(rapid.IntRange(0, 60).Draw(t, "seek offset")))
	}
	done := make(chan error, 1)
	m.h.send(&seekEvent{tp: tp, req: req, done: done})
	<-done
	m.afterStep(t)
}

func (m *model) Pause(t *rapid.T) {
	tp := rapid.SampledFrom(modelTPs).Draw(t, "tp")
	m.h.send(&pauseEvent{tps: []offsetstore.TopicPartition{tp}, pause: rapid.Bool().Draw(t, "pause")})
	m.afterStep(t)
}

func (m *model) Flush(t *rapid.T) {
	m.h.send(&flushEvent{done: make(chan error, 1)})
	m.afterStep(t)
}

func (m *model) Leaders(t *rapid.T) {
	if rapid.IntRange(0, 4).Draw(t, "offline") > 0 {
		m.sendLeaders()
		m.afterStep(t)
		return
	}
	// one partition has no leader for a moment (its leader died, the
	// next is not elected yet): no leader, no leader epoch
	tp := rapid.SampledFrom(modelTPs).Draw(t, "offline tp")
	leaders := copyLeaders(m.leaders)
	leaderEpochs := map[offsetstore.TopicPartition]int32{}
	for tp, lb := range m.logs {
		leaderEpochs[tp] = lb.leaderEpoch
	}
	leaders[tp], leaderEpochs[tp] = -1, -1
	m.h.send(&fetch.Leaders{Leaders: leaders, LeaderEpochs: leaderEpochs})
	m.afterStep(t)
}

// StaleLeaders delivers metadata from a broker behind the others: one
// partition's leader and leader epoch as they were before its last
// election.
func (m *model) StaleLeaders(t *rapid.T) {
	tp := rapid.SampledFrom(modelTPs).Draw(t, "stale tp")
	leaders := copyLeaders(m.leaders)
	leaderEpochs := map[offsetstore.TopicPartition]int32{}
	for tp, lb := range m.logs {
		leaderEpochs[tp] = lb.leaderEpoch
	}
	if leaderEpochs[tp] == 0 {
		t.Skip("no older leader epoch")
	}
	leaderEpochs[tp]--
	leaders[tp] = int32(rapid.IntRange(1, 3).Draw(t, "stale leader"))
	m.h.send(&fetch.Leaders{Leaders: leaders, LeaderEpochs: leaderEpochs})
	m.afterStep(t)
}

func (m *model) MoveLeader(t *rapid.T) {
	tp := rapid.SampledFrom(modelTPs).Draw(t, "tp")
	m.leaders[tp] = int32(rapid.IntRange(1, 3).Draw(t, "leader"))
	m.logs[tp].newLeaderEpoch()
	m.afterStep(t)
}

// UncleanElection makes a replica that lacks the end of the log leader:
// the log is cut back (the records after the cut are gone), and the new
// leader's leader epoch starts at the cut. Records produced later take the lost
// offsets.
func (m *model) UncleanElection(t *rapid.T) {
	tp := rapid.SampledFrom(modelTPs).Draw(t, "tp")
	lb := m.logs[tp]
	lb.hw = int64(rapid.IntRange(int(lb.start), int(lb.hw)).Draw(t, "cut at"))
	m.leaders[tp] = int32(rapid.IntRange(1, 3).Draw(t, "leader"))
	lb.newLeaderEpoch()
	// the new leader takes writes at once: the lost offsets are reused
	lb.hw += int64(rapid.IntRange(0, 8).Draw(t, "produced after"))
	m.afterStep(t)
}

func (m *model) Produce(t *rapid.T) {
	tp := rapid.SampledFrom(modelTPs).Draw(t, "tp")
	m.logs[tp].hw += int64(rapid.IntRange(1, 10).Draw(t, "produced"))
	m.afterStep(t)
}

func (m *model) Retention(t *rapid.T) {
	tp := rapid.SampledFrom(modelTPs).Draw(t, "tp")
	lb := m.logs[tp]
	lb.start = min(lb.hw, lb.start+int64(rapid.IntRange(1, 15).Draw(t, "deleted")))
	m.afterStep(t)
}

func (m *model) Recreate(t *rapid.T) {
	tp := rapid.SampledFrom(modelTPs).Draw(t, "tp")
	// leader epochs keep growing: a new topic's would restart at 0, which
	// Kafka tells apart by topic id (not modelled)
	old := m.logs[tp]
	m.logs[tp] = &logBounds{start: 0, hw: 0, leaderEpoch: old.leaderEpoch}
	m.logs[tp].newLeaderEpoch()
	m.logs[tp].hw = int64(rapid.IntRange(0, 5).Draw(t, "new hw"))
	m.afterStep(t)
}

func (m *model) Tick(t *rapid.T) {
	m.h.advance(time.Duration(rapid.IntRange(10, 3000).Draw(t, "ms")) * time.Millisecond)
	m.afterStep(t)
}

// Garbage sends surprising input: results matching nothing in flight,
// misaligned results, completions of batches never handed out (events of
// other types cannot be written: the event interface is sealed). Nothing
// may change and nothing may panic.
func (m *model) Garbage(t *rapid.T) {
	before := m.snap()
	tp := rapid.SampledFrom(modelTPs).Draw(t, "tp")
	pos, _ := offsets.NewPosition(int64(rapid.IntRange(0, 50).Draw(t, "offset")), offsetstore.Epoch(rapid.IntRange(0, 1000).Draw(t, "epoch")), m.gen)
	fb := offsets.NewFetchRequest(int32(rapid.IntRange(1, 4).Draw(t, "broker")), 0, m.gen, 10, []offsets.FetchEntry{{Partition: tp, Position: pos, LeaderEpoch: -1}})
	switch rapid.IntRange(0, 3).Draw(t, "garbage") {
	case 0:
		m.h.send(&fetch.Result{Request: fb, Partitions: []fetch.PartitionResult{records(fb.At(0), pos.Offset()+3, 0, 100)}})
	case 1:
		m.h.send(&fetch.Result{Request: fb}) // misaligned
	case 2:
		rb := offsets.NewResolveRequest(m.gen, []offsets.ResolveEntry{{Partition: tp, Epoch: pos.Epoch(), Leader: -1, LeaderEpoch: -1, ValidateLeaderEpoch: -1}})
		m.h.send(&resolve.Result{Request: rb, Partitions: []resolve.PartitionResult{{LogStart: 0, HighWatermark: 5}, {}}})
	default:
		b := fetch.NewBatch(tp, m.gen, pos.Epoch(), offsets.Span{Start: 0, End: 1}, nil, 0)
		m.h.send(&process.Report{Completions: []process.Completion{{Batch: b}, {}}})
	}
	// A garbage fetch result can match the broker's fetch in flight by
	// shape; the model keeps its own copy of that fetch, so only check
	// state when nothing could have matched.
	if len(m.h.fetches) == 0 && len(m.h.resolves) == 0 {
		m.requireUnchanged(t, "garbage", before, modelTPs)
	}
	m.afterStep(t)
}

// ---- bookkeeping and invariants -------------------------------------------

// afterStep takes what the coordinator emitted: process messages (fences
// and batches), notices, and checks new commits.
func (m *model) afterStep(t *rapid.T) {
	modelSteps.Add(1)
	m.dataLoss = map[offsetstore.TopicPartition]bool{}
	// notices first: a reset explains the next batch's start
	for _, n := range m.h.notices[m.noticesAt:] {
		if r := n.Reset; r != nil {
			if r.DataLoss {
				m.dataLoss[r.Partition] = true
				m.base[r.Partition] = r.To
				m.covered[r.Partition] = map[int64]bool{}
				m.committed[r.Partition] = -1
				m.done[r.Partition] = map[int64]int32{} // (viii): the old offsets name other records now
			} else if r.From >= 0 {
				from := r.From
				if r.Reason == offsetstore.ReasonSeek && m.lastC[r.Partition] >= 0 {
					// a seek skips from the committable offset
					from = min(from, m.lastC[r.Partition])
				}
				for o := from; o < r.To; o++ {
					m.covered[r.Partition][o] = true
				}
			} else if m.base[r.Partition] < 0 {
				m.base[r.Partition] = r.To
			}
			m.expectNext[r.Partition] = r.To
			m.handed[r.Partition] = map[int64]int32{} // (vii): a reported reset explains what follows
		}
	}
	m.noticesAt = len(m.h.notices)
	for _, msg := range m.h.messages {
		for _, f := range msg.Fences {
			if f.Epoch > m.fenced[f.Partition] {
				m.fenced[f.Partition] = f.Epoch
			}
			for i := range m.out {
				if m.out[i].b.Partition() == f.Partition && m.out[i].b.Epoch() <= f.Epoch {
					m.out[i].fenced = true
				}
			}
		}
		for _, b := range msg.Batches {
			tp := b.Partition()
			if m.beingRevoked(tp) {
				t.Fatalf("batch %v of %s handed to processing while the partition is being revoked", b.Span(), tp)
			}
			sp := b.Span()
			if since, owned := m.owned[tp]; !owned || b.Generation() < since || b.Generation() > m.gen {
				t.Fatalf("(v) batch of generation %d of %s handed out in generation %d (owned since %d: %v)", b.Generation(), tp, m.gen, since, owned)
			}
			if want := m.expectNext[tp]; want >= 0 && sp.Start != want {
				t.Fatalf("(v) %s: batch %v handed out, expected it to start at %d (no reset explains the jump)", tp, sp, want)
			}
			if int64(len(b.Records())) != sp.Len() {
				t.Fatalf("batch %v has %d records", sp, len(b.Records()))
			}
			m.expectNext[tp] = sp.End
			lb := m.logs[tp]
			o := batchOut{b: b, fenced: b.Epoch() <= m.fenced[tp]}
			for off := sp.Start; off < sp.End; off++ {
				o.leaderEpochs = append(o.leaderEpochs, lb.leaderEpochAt(off))
			}
			m.out = append(m.out, o)
			if e, ok := m.handed[tp][sp.Start-1]; ok && lb.leaderEpochAt(sp.Start-1) != e {
				t.Fatalf("(vii) %s: batch %v handed out after offset %d, read in leader epoch %d, which the log now holds in leader epoch %d "+
					"(an unclean election truncated it), and no reset was reported; resets: %+v",
					tp, sp, sp.Start-1, e, lb.leaderEpochAt(sp.Start-1), m.h.resets(tp))
			}
			for o := sp.Start; o < sp.End; o++ {
				m.handed[tp][o] = lb.leaderEpochAt(o)
			}
		}
	}
	m.h.messages = nil
	if m.revokeDone != nil {
		select {
		case <-m.revokeDone:
			if m.revoking == nil {
				m.active = false
				clear(m.owned)
			}
			for _, tp := range m.revoking {
				delete(m.owned, tp)
				if m.h.c.byTP(tp) != nil {
					t.Fatalf("revoked partition %s still assigned after its revoke finished", tp)
				}
			}
			m.revokeDone, m.revoking = nil, nil
		default:
		}
	}
	for _, req := range m.h.commits {
		if !m.checked[req.Request.ID()] {
			m.checked[req.Request.ID()] = true
			m.checkCommit(t, req)
		}
	}
}

func (m *model) checkCommit(t *rapid.T, req commit.Job) {
	if req.Request.Generation() != m.gen || !m.active {
		t.Fatalf("(iii) commit of generation %d sent while generation %d is current (active=%v)", req.Request.Generation(), m.gen, m.active)
	}
	if req.Store != m.stores[m.gen] {
		t.Fatalf("(iii) commit routed to another generation's store")
	}
	for i := 0; i < req.Request.Len(); i++ {
		e := req.Request.At(i)
		if prev := m.committed[e.Partition]; e.Offset <= prev && !m.dataLoss[e.Partition] {
			if prev >= 0 && e.Offset < prev {
				t.Fatalf("(iii) commit of %s goes backwards: %d after %d", e.Partition, e.Offset, prev)
			}
		}
		if e.Offset > m.committed[e.Partition] {
			m.committed[e.Partition] = e.Offset
		}
		if h, ok := m.done[e.Partition][e.Offset-1]; ok && e.LeaderEpoch >= 0 && e.LeaderEpoch != h {
			t.Fatalf("(viii) commit of %s at %d carries leader epoch %d; the record below it was processed as read in leader epoch %d", e.Partition, e.Offset, e.LeaderEpoch, h)
		}
	}
}

// Check runs after every action.
func (m *model) Check(t *rapid.T) {
	m.h.checkStructure()
	c := m.h.c
	if c.buffered < 0 {
		t.Fatalf("buffered bytes negative: %d", c.buffered)
	}
	for _, p := range c.slots {
		if p == nil || p.zombie {
			continue
		}
		off, ok := p.wm.Committable()
		if !ok {
			continue
		}
		tp := p.tp
		if last := m.lastC[tp]; last >= 0 && off < last && !m.dataLoss[tp] {
			t.Fatalf("(iii) %s committable went backwards %d -> %d", tp, last, off)
		}
		m.lastC[tp] = off
		if m.base[tp] < 0 || m.dataLoss[tp] {
			if m.base[tp] < 0 {
				m.base[tp] = off
			}
		}
		var missing []int64
		for o := m.base[tp]; o < off; o++ {
			if !m.covered[tp][o] {
				missing = append(missing, o)
			}
		}
		if len(missing) > 0 {
			sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
			t.Fatalf("(iii) %s committable %d passes unprocessed offsets %v (base %d, generation %d, state %v); resets: %+v",
				tp, off, missing, m.base[tp], m.gen, p.state, m.h.resets(tp))
		}
	}
}

// ---- sizes and liveness ----------------------------------------------------

// recordSize is the bytes of the record at off in tp.
func (m *model) recordSize(tp offsetstore.TopicPartition, off int64) int64 {
	h := m.sizeSeed ^ uint64(off)*0x9e3779b97f4a7c15 ^ uint64(tp.Partition+1)*0xbf58476d1ce4e5b9 ^ uint64(len(tp.Topic))<<40
	h ^= h >> 31
	h *= 0x94d049bb133111eb
	h ^= h >> 29
	return 1 + int64(h%uint64(m.maxSize))
}

// responseLimit is what is left of one fetch response, as a broker fills
// it: Kafka returns the first record batch of the first partition with
// records whatever its size, and stops at the limits otherwise.
type responseLimit struct {
	left int64 // of the request's MaxBytes
	data bool  // a partition earlier in the response returned records
}

// take returns how far (below to) the records from e's position fit in
// the response and the partition limit (<= 0: none).
func (l *responseLimit) take(m *model, e offsets.FetchEntry, to int64, partitionMax int32) int64 {
	from := e.Position.Offset()
	pbytes := int64(0)
	off := from
	for ; off < to; off++ {
		size := m.recordSize(e.Partition, off)
		first := !l.data && off == from
		if !first && (size > l.left || (partitionMax > 0 && pbytes+size > int64(partitionMax))) {
			break
		}
		l.left -= size
		pbytes += size
	}
	if off > from {
		l.data = true
	}
	return off
}

// sizedRecords is records with the model's record sizes.
func (m *model) sizedRecords(e offsets.FetchEntry, to, logStart, hw int64) fetch.PartitionResult {
	pr := records(e, to, logStart, hw)
	// the leader epoch of the last record delivered, as Kafka's batches
	// carry it
	pr.LastLeaderEpoch = -1
	if pr.Next > e.Position.Offset() {
		pr.LastLeaderEpoch = m.logs[e.Partition].leaderEpochAt(pr.Next - 1)
	}
	if pr.Batch == nil {
		return pr
	}
	bytes := int64(0)
	for off := e.Position.Offset(); off < to; off++ {
		bytes += m.recordSize(e.Partition, off)
	}
	pr.Batch = fetch.NewBatch(e.Partition, e.Position.Generation(), e.Position.Epoch(), pr.Batch.Span(), pr.Batch.Records(), bytes)
	pr.Bytes = bytes
	return pr
}

// checkLiveness ends a run: no new faults or records, every fetch and
// lookup answered as the model's Kafka would, processing finishing
// everything, commits succeeding, backoffs passing, every partition
// resumed and assigned. It checks that the coordinator settles with
// every partition fetching at its high watermark (everything beyond its
// position delivered) or stopped with a reason.
func (m *model) checkLiveness(t *rapid.T) {
	m.h.send(&pauseEvent{tps: modelTPs, pause: false})
	m.sendLeaders() // with the leader epochs: elections during the run are announced
	m.afterStep(t)
	// End with every partition assigned: eagerly (revoke all, assign
	// all) or cooperatively (a new generation adds what is missing). A
	// fenced generation is ending anyway (the group rebalances).
	cooperative := rapid.Bool().Draw(t, "cooperative end")
	quiet := 0
	round := 0
	for ; round < 2000 && quiet < 3; round++ {
		if m.drainRound(t) {
			quiet = 0
		} else {
			quiet++
		}
		switch {
		case m.revokeDone != nil:
			// the revoke in progress finishes first (if it never does,
			// the coordinator never settles)
			quiet = 0
		case !m.active:
			m.assignAll(t)
			quiet = 0
		case len(m.h.c.index) == len(modelTPs) && !m.h.c.fenced:
		case cooperative:
			m.addMissing(t)
			quiet = 0
		default:
			m.revokeDone, m.revoking = make(chan error, 1), nil
			m.h.send(&revokeEvent{gen: m.gen, drainBy: m.h.now.Add(time.Hour), deadline: m.h.now.Add(time.Hour), done: m.revokeDone})
			m.afterStep(t)
			quiet = 0
		}
	}
	if quiet < 3 {
		t.Fatalf("liveness: the coordinator never settled in %d rounds (fetches %d, lookups %d, commits %d, processing %d)",
			round, len(m.h.fetches), len(m.h.resolves), len(m.h.commits), len(m.out))
	}
	c := m.h.c
	for _, tp := range modelTPs {
		p := c.byTP(tp)
		lb := m.logs[tp]
		switch {
		case p == nil:
			t.Fatalf("liveness: %s is not assigned after the final assignment", tp)
		case p.state == Stopped:
			if p.stopErr == nil {
				t.Fatalf("liveness: %s stopped without a reason", tp)
			}
		case p.state != Fetching:
			t.Fatalf("liveness: %s is %v after everything was answered (op %v, wait zombie %v, revoking %v, retry at %v, now %v, need resolve %v, resolver busy %v, lookups %d, zombies %v)",
				tp, p.state, p.op, p.waitZombie, p.revoking, p.retryAt, c.now, c.needResolve, c.resolver.busy(), len(m.h.resolves), c.zombies)
		case p.pos.Offset() != lb.hw:
			sizes := []int64{}
			for off := p.pos.Offset(); off < min(lb.hw, p.pos.Offset()+5); off++ {
				sizes = append(sizes, m.recordSize(tp, off))
			}
			t.Fatalf("liveness: %s stalls at %d below its high watermark %d (next record sizes %v, budget %d, buffered %d, reserved %d, partition max %d, fetch max %d, idle %v, queued %v, op %v)",
				tp, p.pos.Offset(), lb.hw, sizes, c.cfg.budget, c.buffered, c.reserved, c.cfg.partitionMaxBytes, c.cfg.fetchMaxBytes, p.idle, p.queued, p.op)
		}
	}
}

// assignAll starts a new generation with every partition, each with a
// committed offset of 0 (validated against the log: resumed at its
// start).
func (m *model) assignAll(t *rapid.T) {
	m.gen++
	store := newMemoryStore(m.gen)
	m.stores[m.gen] = store
	m.resetGenerationModel()
	parts := make([]assignedPartition, 0, len(modelTPs))
	for _, tp := range modelTPs {
		parts = append(parts, assignedPartition{tp: tp, start: offsetstore.Committed(0)})
		m.expectNext[tp] = 0
		m.committed[tp] = 0
	}
	clear(m.owned)
	for _, tp := range modelTPs {
		m.owned[tp] = m.gen
	}
	m.h.assign(m.gen, store, parts...)
	m.active, m.revokeDone = true, nil
	m.afterStep(t)
}

// addMissing is a cooperative rebalance's new generation that adds every
// partition not assigned now, each with a committed offset of 0.
func (m *model) addMissing(t *rapid.T) {
	m.gen++
	store := newMemoryStore(m.gen)
	m.stores[m.gen] = store
	var parts []assignedPartition
	for _, tp := range modelTPs {
		if _, owned := m.owned[tp]; owned {
			continue
		}
		m.resetPartitionModel(tp)
		parts = append(parts, assignedPartition{tp: tp, start: offsetstore.Committed(0)})
		m.expectNext[tp] = 0
		m.committed[tp] = 0
		m.owned[tp] = m.gen
	}
	m.h.assign(m.gen, store, parts...)
	m.afterStep(t)
}

// drainRound does once, without faults, everything that can be done and
// reports whether anything moved.
func (m *model) drainRound(t *rapid.T) bool {
	moved := false
	if len(m.out) > 0 {
		var rep process.Report
		owned, stale := make([]bool, len(m.out)), make([]bool, len(m.out))
		for i, o := range m.out {
			cp := process.Completion{Batch: o.b, FinishedBelow: o.b.Span().End}
			if o.fenced {
				cp.FinishedBelow = o.b.Span().Start
			}
			owned[i], stale[i] = m.markable(o)
			rep.Completions = append(rep.Completions, cp)
		}
		m.h.send(&rep)
		for i, o := range m.out {
			m.processed(o, owned[i], stale[i], o.b.Span().End)
		}
		m.out = nil
		m.afterStep(t)
		moved = true
	}
	for len(m.h.resolves) > 0 {
		r := m.h.takeResolve()
		// as AnswerResolve's Kafka does: a lookup with an older leader
		// epoch is fenced, and OffsetForLeaderEpoch answers from the
		// leader epoch history (none asked: -1, -1)
		m.h.answerResolve(r, func(e offsets.ResolveEntry) resolve.PartitionResult {
			lb := m.logs[e.Partition]
			if e.LeaderEpoch >= 0 && e.LeaderEpoch < lb.leaderEpoch {
				return resolve.PartitionResult{Err: errors.New("FENCED_LEADER_EPOCH"), NotLeader: true, LogStart: -1, HighWatermark: -1, TimeOffset: -1}
			}
			pr := resolve.PartitionResult{LogStart: lb.start, HighWatermark: lb.hw, TimeOffset: -1, EndLeaderEpoch: -1, LeaderEpochEndOffset: -1}
			if e.ValidateLeaderEpoch >= 0 {
				pr.EndLeaderEpoch, pr.LeaderEpochEndOffset = lb.endOffsetFor(e.ValidateLeaderEpoch)
			}
			return pr
		})
		m.afterStep(t)
		moved = true
	}
	for len(m.h.commits) > 0 {
		req := m.h.commits[0]
		m.h.commits = m.h.commits[1:]
		m.h.send(&commit.Result{Request: req.Request, Err: req.Store.Commit(context.Background(), req.Request)})
		m.afterStep(t)
		moved = true
	}
	// every fetch in flight, as the model's Kafka answers it (a long
	// poll of caught-up partitions returns empty)
	for _, f := range slices.Clone(m.h.fetches) {
		i := slices.IndexFunc(m.h.fetches, func(g offsets.FetchRequest) bool { return g.ID() == f.ID() })
		if i < 0 {
			continue
		}
		m.h.fetches = slices.Delete(m.h.fetches, i, i+1)
		lim := responseLimit{left: int64(f.MaxBytes())}
		m.h.answerFetch(f, func(e offsets.FetchEntry) fetch.PartitionResult {
			lb, pos := m.logs[e.Partition], e.Position.Offset()
			switch {
			case e.LeaderEpoch >= 0 && e.LeaderEpoch < lb.leaderEpoch:
				// as in AnswerFetch: a fetch with an older leader
				// epoch is refused, whoever leads (KIP-320); the
				// partition learns the new leader epoch and validates
				moved = true
				return fetch.PartitionResult{Outcome: fetch.NotLeader, Err: errors.New("FENCED_LEADER_EPOCH"), Next: pos, LogStart: -1, HighWatermark: -1}
			case m.leaders[e.Partition] != f.Broker():
				// not progress, but work: the partition refreshes its
				// leader and fetches again (the round is not quiet)
				moved = true
				return fetch.PartitionResult{Outcome: fetch.NotLeader, Err: errors.New("NOT_LEADER_OR_FOLLOWER"), Next: pos, LogStart: -1, HighWatermark: -1}
			case pos < lb.start || pos > lb.hw:
				moved = true // a lookup follows
				return outOfRange(lb.start, lb.hw)(e)
			}
			if pos < lb.hw {
				moved = true
			}
			return m.sizedRecords(e, lim.take(m, e, lb.hw, m.h.c.cfg.partitionMaxBytes), lb.start, lb.hw)
		})
		m.afterStep(t)
	}
	// let backoffs, the commit interval and revoke deadlines pass
	m.sendLeaders()
	m.h.advance(2 * time.Second)
	m.afterStep(t)
	// Settled means only long polls of caught-up partitions are left
	// in flight: a lookup, a commit, a batch being processed or a fetch
	// of a partition below its high watermark that this round started
	// (after a refusal, a backoff, or budget freed) is answered next
	// round, so this round is not quiet.
	return moved || len(m.h.resolves) > 0 || len(m.h.commits) > 0 || len(m.out) > 0 || m.fetchingBelowHW()
}

// fetchingBelowHW reports whether a fetch in flight asks for a
// partition at a position below its high watermark.
func (m *model) fetchingBelowHW() bool {
	for _, f := range m.h.fetches {
		for i := 0; i < f.Len(); i++ {
			if e := f.At(i); e.Position.Offset() < m.logs[e.Partition].hw {
				return true
			}
		}
	}
	return false
}
