package process

import (
	"cmp"
	"errors"
	"math"
	"slices"

	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/fetch"
)

// Scheduler decides which records run when. It keeps each partition's
// batches in order (with key ordering: each key's records), runs at most
// Concurrency units at once, drops batches of fenced or stopped epochs,
// and reports what became of every batch it accepted, exactly once.
//
// It runs nothing itself: Next hands out a Unit to run through the
// chain, Finish takes the chain's result. It is deterministic and not
// safe for concurrent use: one goroutine owns it (the Processor's, or a
// test's).
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
	units  []*Unit
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

// Unit is a piece of a batch to run through the chain: the whole batch,
// or with key ordering the batch's records of one key group. Its records
// are in offset order and read-only.
type Unit struct {
	job     *job
	records []stages.Record
	queue   *queue
}

// Records returns the unit's records.
func (u *Unit) Records() []stages.Record { return u.records }

// Batch returns the batch the unit is a piece of.
func (u *Unit) Batch() *fetch.Batch { return u.job.batch }

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
		s.enqueue(&Unit{job: j, records: recs, queue: s.queueFor(queueKey{tp: b.Partition()})})
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
		s.enqueue(&Unit{job: j, records: split[g], queue: s.queueFor(queueKey{tp: b.Partition(), keyGroup: g})})
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
		if q.busy || len(q.units) == 0 {
			continue
		}
		u := q.units[0]
		q.units[0] = nil
		q.units = q.units[1:]
		if s.dead(u.job.batch) {
			// fenced or stopped while queued
			s.drop(u)
			s.requeue(q)
			continue
		}
		q.busy = true
		s.active++
		return u, true
	}
	return nil, false
}

// Finish takes the result of a unit Next handed out: nil when every
// record finished every stage, a *stages.StoppedError when the partition must
// stop (its records below StoppedError.Offset finished), any other error
// when processing was aborted (nothing of the unit counts as finished).
func (s *Scheduler) Finish(u *Unit, err error) {
	s.active--
	q, j := u.queue, u.job
	q.busy = false
	var stop *stages.StoppedError
	switch {
	case err == nil:
	case errors.As(err, &stop):
		off := stop.Offset
		j.unfinished = min(j.unfinished, off)
		if off < j.errAt {
			j.err, j.errAt = err, off
		}
		st := s.state(j.batch.Partition())
		st.isStop, st.stopped = true, max(st.stopped, j.batch.Epoch())
		s.dropQueued(j.batch.Partition())
	default:
		j.aborted = true
	}
	if j.pending--; j.pending == 0 {
		s.complete(j)
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

func (s *Scheduler) enqueue(u *Unit) {
	q := u.queue
	q.units = append(q.units, u)
	if !q.busy && !q.queued {
		q.queued = true
		s.ready = append(s.ready, q)
	}
}

// requeue puts q back in the ready list if it has work, or forgets it.
func (s *Scheduler) requeue(q *queue) {
	switch {
	case len(q.units) > 0:
		if !q.busy && !q.queued {
			q.queued = true
			s.ready = append(s.ready, q)
		}
	case !q.busy && !q.queued && s.queues[q.key] == q:
		delete(s.queues, q.key)
	}
}

// drop gives up a unit that did not run: none of its records finished.
func (s *Scheduler) drop(u *Unit) {
	j := u.job
	if len(u.records) > 0 {
		j.unfinished = min(j.unfinished, u.records[0].Offset)
	} else {
		j.unfinished = min(j.unfinished, j.batch.Span().Start)
	}
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
		keep := q.units[:0]
		for _, u := range q.units {
			if s.dead(u.job.batch) {
				s.drop(u)
				continue
			}
			keep = append(keep, u)
		}
		clear(q.units[len(keep):])
		q.units = keep
		if len(q.units) == 0 && !q.busy && !q.queued {
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
		if n := RecordsBelow(j.batch, c.FinishedBelow); n > 0 {
			s.onDone(n)
		}
	}
	if s.report == nil {
		s.report = &Report{}
	}
	s.report.Completions = append(s.report.Completions, c)
}
