package process

import (
	"cmp"
	"errors"
	"math"
	"slices"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// Scheduler decides which records run when. It keeps each partition's
// batches in order (with key ordering: each key's records), runs at most
// Concurrency units at once, drops batches of fenced or stopped epochs,
// and reports what became of every batch it accepted, exactly once.
//
// It runs nothing itself: Next hands out a Unit to run through the
// chain, Finish takes the chain's result. It is deterministic and not
// safe for concurrent use: one goroutine owns it (the process step's,
// or a test's).
type Scheduler struct {
	concurrency int
	keyOrdering bool

	queues map[queueKey]*queue
	parts  map[offsetstore.TopicPartition]*partitionState
	ready  []*queue
	active int
	report *Report
	// onDone, if set, is called with the number of source records of
	// every batch that finished them.
	onDone func(records int)
}

// NewScheduler returns a Scheduler running at most concurrency units at
// once (at least 1). With keyOrdering, records of one partition with
// different keys may run at once; records with the same key never do.
func NewScheduler(concurrency int, keyOrdering bool) *Scheduler {
	return &Scheduler{
		concurrency: max(concurrency, 1),
		keyOrdering: keyOrdering && concurrency > 1,
		queues:      map[queueKey]*queue{},
		parts:       map[offsetstore.TopicPartition]*partitionState{},
	}
}

// queueKey names a queue of work that must run in order: a partition's,
// or with key ordering one key group of a partition.
type queueKey struct {
	tp       offsetstore.TopicPartition
	keyGroup uint32 // 0 with partition ordering
}

type queue struct {
	key    queueKey
	pieces []piece // waiting, in offset order
	busy   bool
	queued bool // in the ready list
}

// job is one batch handed out by the coordinator; its units are its
// pieces (the whole batch, or one per key group).
type job struct {
	batch      *fetch.Batch
	pending    int   // units not yet finished or dropped
	unfinished int64 // lowest source offset not finished
	err        error // the stop with the lowest offset, if any
	errAt      int64
	aborted    bool
}

// piece is a batch's records for one queue: the whole batch, or with key
// ordering its records of one key group.
type piece struct {
	job     *job
	records []stages.Record
}

// span is the source offsets the piece covers: its records', or the
// batch's span for a piece without records.
func (p piece) span() (start, end int64) {
	if n := len(p.records); n > 0 {
		return p.records[0].Offset, p.records[n-1].Offset + 1
	}
	sp := p.job.batch.Span()
	return sp.Start, sp.End
}

// Unit is work to run through the chain: the pieces waiting in one queue
// when it was handed out, run together (at most MaxUnitRecords records,
// or a single larger piece). Under load a partition's batches queue up,
// and running them in one chain call costs a stage one call, one
// produce request, instead of one per fetched batch; when nothing waits a
// unit is one batch and nothing is held back to grow it. Its records are
// of one partition (with key ordering, one key group), in offset order,
// and read-only.
type Unit struct {
	pieces  []piece
	records []stages.Record
	queue   *queue
}

// MaxUnitRecords is the most records of queued batches the scheduler
// puts in one unit.
const MaxUnitRecords = 4096

// Records returns the unit's records.
func (u *Unit) Records() []stages.Record { return u.records }

// Batches returns the batches the unit holds records of, in offset order.
func (u *Unit) Batches() []*fetch.Batch {
	bs := make([]*fetch.Batch, len(u.pieces))
	for i, p := range u.pieces {
		bs[i] = p.job.batch
	}
	return bs
}

// partition returns the partition the unit's records are of.
func (u *Unit) partition() offsetstore.TopicPartition { return u.queue.key.tp }

// epoch returns the epoch of the unit's batches (a unit holds batches of
// one epoch only: see take).
func (u *Unit) epoch() offsetstore.Epoch {
	var e offsetstore.Epoch
	for _, p := range u.pieces {
		e = max(e, p.job.batch.Epoch())
	}
	return e
}

// partitionState is the scheduler's view of one partition: fenced epochs
// and a stop.
type partitionState struct {
	fenced  offsetstore.Epoch // batches of epochs <= fenced are dropped
	stopped offsetstore.Epoch // batches of epochs <= stopped are dropped (a record failed)
	isStop  bool
}

// Accept takes a message from the coordinator: fences first, then
// batches.
func (s *Scheduler) Accept(m Message) {
	for _, f := range m.Fences {
		st := s.state(f.Partition)
		st.fenced = max(st.fenced, f.Epoch)
		s.dropQueued(f.Partition)
	}
	for _, b := range m.Batches {
		s.accept(b)
	}
}

func (s *Scheduler) accept(b *fetch.Batch) {
	j := &job{batch: b, unfinished: math.MaxInt64, errAt: math.MaxInt64}
	if s.dead(b) {
		j.unfinished = b.Span().Start
		s.complete(j)
		return
	}
	recs := b.Records()
	if !s.keyOrdering || len(recs) == 0 {
		j.pending = 1
		s.enqueue(s.queueFor(queueKey{tp: b.Partition()}), piece{job: j, records: recs})
		return
	}
	var split map[uint32][]stages.Record
	var order []uint32
	for _, r := range recs {
		g := s.keyGroup(r.Key)
		if split == nil {
			split = map[uint32][]stages.Record{}
		}
		if _, ok := split[g]; !ok {
			order = append(order, g)
		}
		split[g] = append(split[g], r)
	}
	j.pending = len(order)
	for _, g := range order {
		s.enqueue(s.queueFor(queueKey{tp: b.Partition(), keyGroup: g}), piece{job: j, records: split[g]})
	}
}

// keyGroup returns the key group of key: records whose keys share a
// group run in order, one at a time. FNV-1a: the same key always lands in
// the same group, in every run.
func (s *Scheduler) keyGroup(key []byte) uint32 {
	h := uint32(2166136261)
	for _, b := range key {
		h ^= uint32(b)
		h *= 16777619
	}
	return h % uint32(s.concurrency)
}

// Next hands out the next unit to run, if one may start now. The caller
// runs it through the chain and calls Finish with the result.
func (s *Scheduler) Next() (*Unit, bool) {
	for s.active < s.concurrency && len(s.ready) > 0 {
		q := s.ready[0]
		s.ready[0] = nil
		s.ready = s.ready[1:]
		q.queued = false
		if q.busy {
			continue
		}
		u := s.take(q)
		if u == nil {
			s.requeue(q)
			continue
		}
		q.busy = true
		s.active++
		return u, true
	}
	return nil, false
}

// take makes a unit of q's waiting pieces, dropping those of batches
// fenced or stopped while they waited; nil if none is left.
func (s *Scheduler) take(q *queue) *Unit {
	u := &Unit{queue: q}
	n := 0
	var prevEnd int64
	for len(q.pieces) > 0 {
		p := q.pieces[0]
		if k := len(u.pieces); k > 0 {
			// Only what continues the unit: the same epoch, later
			// offsets (after a seek the next batch may start lower),
			// within the size.
			start, _ := p.span()
			if n+len(p.records) > MaxUnitRecords || p.job.batch.Epoch() != u.pieces[0].job.batch.Epoch() || start < prevEnd {
				break
			}
		}
		q.pieces[0] = piece{}
		q.pieces = q.pieces[1:]
		if s.dead(p.job.batch) {
			s.drop(p)
			continue
		}
		u.pieces = append(u.pieces, p)
		n += len(p.records)
		_, prevEnd = p.span()
	}
	switch len(u.pieces) {
	case 0:
		return nil
	case 1:
		u.records = u.pieces[0].records
	default:
		u.records = make([]stages.Record, 0, n)
		for _, p := range u.pieces {
			u.records = append(u.records, p.records...)
		}
	}
	return u
}

// Finish takes the result of a unit Next handed out: nil when every
// record finished every stage, a *stages.StoppedError when the partition must
// stop (its records below StoppedError.Offset finished), any other error
// when processing was aborted (nothing of the unit counts as finished).
func (s *Scheduler) Finish(u *Unit, err error) {
	s.active--
	q := u.queue
	q.busy = false
	var stop *stages.StoppedError
	isStop := errors.As(err, &stop)
	stopGiven := false
	for _, p := range u.pieces {
		j := p.job
		switch {
		case err == nil:
		case isStop:
			// Records below the stop finished; the first piece that did
			// not finish carries the error, later ones finished nothing.
			off := stop.Offset
			if start, end := p.span(); end > off {
				at := max(start, off)
				j.unfinished = min(j.unfinished, at)
				if !stopGiven && at < j.errAt {
					j.err, j.errAt = err, at
				}
				stopGiven = true
			}
			st := s.state(j.batch.Partition())
			st.isStop, st.stopped = true, max(st.stopped, j.batch.Epoch())
		default:
			j.aborted = true
		}
		if j.pending--; j.pending == 0 {
			s.complete(j)
		}
	}
	if isStop {
		s.dropQueued(u.pieces[0].job.batch.Partition())
	}
	s.requeue(q)
}

// TakeReport returns the completions gathered since the last call, or
// nil if there are none.
func (s *Scheduler) TakeReport() *Report {
	r := s.report
	s.report = nil
	return r
}

// Running is the number of units handed out and not finished.
func (s *Scheduler) Running() int { return s.active }

// Idle reports whether nothing is running or queued.
func (s *Scheduler) Idle() bool { return s.active == 0 && len(s.ready) == 0 && len(s.queues) == 0 }

func (s *Scheduler) state(tp offsetstore.TopicPartition) *partitionState {
	st := s.parts[tp]
	if st == nil {
		st = &partitionState{}
		s.parts[tp] = st
	}
	return st
}

func (s *Scheduler) dead(b *fetch.Batch) bool {
	st := s.parts[b.Partition()]
	return st != nil && (b.Epoch() <= st.fenced || (st.isStop && b.Epoch() <= st.stopped))
}

func (s *Scheduler) queueFor(k queueKey) *queue {
	q := s.queues[k]
	if q == nil {
		q = &queue{key: k}
		s.queues[k] = q
	}
	return q
}

func (s *Scheduler) enqueue(q *queue, p piece) {
	q.pieces = append(q.pieces, p)
	if !q.busy && !q.queued {
		q.queued = true
		s.ready = append(s.ready, q)
	}
}

// requeue puts q back in the ready list if it has work, or forgets it.
func (s *Scheduler) requeue(q *queue) {
	switch {
	case len(q.pieces) > 0:
		if !q.busy && !q.queued {
			q.queued = true
			s.ready = append(s.ready, q)
		}
	case !q.busy && !q.queued && s.queues[q.key] == q:
		delete(s.queues, q.key)
	}
}

// drop gives up a piece that did not run: none of its records finished.
func (s *Scheduler) drop(p piece) {
	j := p.job
	start, _ := p.span()
	j.unfinished = min(j.unfinished, start)
	if j.pending--; j.pending == 0 {
		s.complete(j)
	}
}

// dropQueued drops the queued units of dead batches of tp, key group by
// key group (in order, so a run is reproducible).
func (s *Scheduler) dropQueued(tp offsetstore.TopicPartition) {
	var keys []queueKey
	for k := range s.queues {
		if k.tp == tp {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b queueKey) int { return cmp.Compare(a.keyGroup, b.keyGroup) })
	for _, k := range keys {
		q := s.queues[k]
		keep := q.pieces[:0]
		for _, p := range q.pieces {
			if s.dead(p.job.batch) {
				s.drop(p)
				continue
			}
			keep = append(keep, p)
		}
		clear(q.pieces[len(keep):])
		q.pieces = keep
		if len(q.pieces) == 0 && !q.busy && !q.queued {
			delete(s.queues, k)
		}
	}
}

// complete reports a job whose units all finished or were dropped.
func (s *Scheduler) complete(j *job) {
	sp := j.batch.Span()
	c := Completion{Batch: j.batch, FinishedBelow: sp.End}
	switch {
	case j.aborted:
		c.FinishedBelow = sp.Start
	case j.unfinished < sp.End:
		c.FinishedBelow, c.Err = max(j.unfinished, sp.Start), j.err
	}
	if s.onDone != nil {
		if n := j.batch.RecordsBelow(c.FinishedBelow); n > 0 {
			s.onDone(n)
		}
	}
	if s.report == nil {
		s.report = &Report{}
	}
	s.report.Completions = append(s.report.Completions, c)
}
