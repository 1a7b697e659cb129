package process

import (
	"context"
	"errors"
	"hash/maphash"
	"runtime"

	"github.com/sourcegraph/conc/pool"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/fetch"
)

// Config configures a Processor.
type Config struct {
	Chain Chain
	// Concurrency is the most batches processed at once. Default
	// GOMAXPROCS.
	Concurrency int
	// KeyOrdering keeps order per key instead of per partition: records
	// of a partition with different keys are processed concurrently.
	KeyOrdering bool
	Log         *zap.Logger
	// OnDone, if set, is called with the number of records of every
	// batch that finished all stages.
	OnDone func(records int)
}

// Processor is the process stage. Run owns all its state; workers send
// their results back to it.
type Processor struct {
	cfg  Config
	seed maphash.Seed
}

// NewProcessor returns a Processor.
func NewProcessor(cfg Config) *Processor {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = runtime.GOMAXPROCS(0)
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Chain.Log == nil {
		cfg.Chain.Log = cfg.Log
	}
	return &Processor{cfg: cfg, seed: maphash.MakeSeed()}
}

type laneKey struct {
	tp  offsetstore.TopicPartition
	key uint32 // key lane, 0 with partition ordering
}

// lane is a queue of work that must run in order.
type lane struct {
	key    laneKey
	queue  []*unit
	busy   bool
	queued bool // in the ready list
}

// job is one batch handed out by the coordinator; units are its pieces
// (one, or one per key lane).
type job struct {
	batch   *fetch.Batch
	pending int
	err     error // first failure: the partition stops
	failed  int64
	aborted bool
	dropped bool
}

type unit struct {
	job     *job
	records []stages.Record
	lane    *lane
}

type unitDone struct {
	u   *unit
	err error
}

// partitionState is the processor's view of one partition: fenced epochs
// and a stop.
type partitionState struct {
	fenced  offsetstore.Epoch // batches of epochs <= fenced are dropped
	stopped offsetstore.Epoch // batches of epochs <= stopped are dropped (a record failed)
	isStop  bool
}

// Run processes messages from in until ctx ends or in is closed, and
// sends every completion to out (the coordinator's event channel). Before
// returning it waits for running work: stage calls see ctx, so a
// cancelled ctx makes them return early.
func (p *Processor) Run(ctx context.Context, in <-chan Message, out chan<- any) {
	workers := pool.New().WithMaxGoroutines(p.cfg.Concurrency)
	done := make(chan unitDone, p.cfg.Concurrency)
	lanes := map[laneKey]*lane{}
	parts := map[offsetstore.TopicPartition]*partitionState{}
	var ready []*lane
	var report *Report
	active := 0

	complete := func(j *job) {
		if report == nil {
			report = &Report{}
		}
		c := Completion{Batch: j.batch, Dropped: j.dropped || j.aborted}
		if j.err != nil && !j.dropped && !j.aborted {
			c.Err, c.Failed = j.err, j.failed
		}
		if !c.Dropped && c.Err == nil && p.cfg.OnDone != nil {
			p.cfg.OnDone(len(j.batch.Records()))
		}
		report.Completions = append(report.Completions, c)
	}
	state := func(tp offsetstore.TopicPartition) *partitionState {
		s := parts[tp]
		if s == nil {
			s = &partitionState{}
			parts[tp] = s
		}
		return s
	}
	dead := func(b *fetch.Batch) bool {
		s := parts[b.Partition()]
		return s != nil && (b.Epoch() <= s.fenced || (s.isStop && b.Epoch() <= s.stopped))
	}
	// dropQueued drops queued units of dead batches of tp.
	dropQueued := func(tp offsetstore.TopicPartition) {
		for k, l := range lanes {
			if k.tp != tp {
				continue
			}
			keep := l.queue[:0]
			for _, u := range l.queue {
				if dead(u.job.batch) {
					u.job.dropped = true
					if u.job.pending--; u.job.pending == 0 {
						complete(u.job)
					}
					continue
				}
				keep = append(keep, u)
			}
			clear(l.queue[len(keep):])
			l.queue = keep
			if len(l.queue) == 0 && !l.busy {
				delete(lanes, k)
			}
		}
	}
	enqueue := func(u *unit) {
		l := u.lane
		l.queue = append(l.queue, u)
		if !l.busy && !l.queued {
			l.queued = true
			ready = append(ready, l)
		}
	}
	laneFor := func(k laneKey) *lane {
		l := lanes[k]
		if l == nil {
			l = &lane{key: k}
			lanes[k] = l
		}
		return l
	}
	accept := func(b *fetch.Batch) {
		if dead(b) {
			complete(&job{batch: b, dropped: true})
			return
		}
		j := &job{batch: b}
		recs := b.Records()
		if !p.cfg.KeyOrdering || p.cfg.Concurrency == 1 || len(recs) <= 1 {
			j.pending = 1
			enqueue(&unit{job: j, records: recs, lane: laneFor(laneKey{tp: b.Partition()})})
			return
		}
		split := map[uint32][]stages.Record{}
		order := []uint32{}
		for _, r := range recs {
			k := uint32(maphash.Bytes(p.seed, r.Key) % uint64(p.cfg.Concurrency))
			if _, ok := split[k]; !ok {
				order = append(order, k)
			}
			split[k] = append(split[k], r)
		}
		j.pending = len(order)
		for _, k := range order {
			enqueue(&unit{job: j, records: split[k], lane: laneFor(laneKey{tp: b.Partition(), key: k})})
		}
	}
	start := func() {
		for active < p.cfg.Concurrency && len(ready) > 0 {
			l := ready[0]
			ready[0] = nil
			ready = ready[1:]
			l.queued = false
			if l.busy || len(l.queue) == 0 {
				continue
			}
			u := l.queue[0]
			l.queue[0] = nil
			l.queue = l.queue[1:]
			if dead(u.job.batch) || u.job.err != nil {
				// fenced or stopped while queued, or a sibling unit of
				// the same batch failed
				u.job.dropped = u.job.dropped || u.job.err == nil
				if u.job.pending--; u.job.pending == 0 {
					complete(u.job)
				}
				if len(l.queue) > 0 {
					l.queued = true
					ready = append(ready, l)
				}
				continue
			}
			l.busy = true
			active++
			workers.Go(func() {
				_, err := p.cfg.Chain.Run(ctx, u.records)
				done <- unitDone{u: u, err: err}
			})
		}
	}
	finish := func(d unitDone) {
		active--
		l, j := d.u.lane, d.u.job
		l.busy = false
		if d.err != nil {
			var stop *StoppedError
			switch {
			case errors.As(d.err, &stop):
				if j.err == nil {
					j.err, j.failed = d.err, stop.Offset
					if p.cfg.KeyOrdering && p.cfg.Concurrency > 1 {
						// other keys' records before the failure may not
						// have run: mark nothing of this batch
						j.failed = j.batch.Span().Start
					}
				}
				s := state(j.batch.Partition())
				s.isStop, s.stopped = true, max(s.stopped, j.batch.Epoch())
				p.cfg.Log.Error("partition stopped", zap.Stringer("partition", j.batch.Partition()), zap.Error(d.err))
				dropQueued(j.batch.Partition())
			default:
				j.aborted = true
			}
		}
		if j.pending--; j.pending == 0 {
			complete(j)
		}
		if len(l.queue) > 0 {
			if !l.queued {
				l.queued = true
				ready = append(ready, l)
			}
		} else if lanes[l.key] == l {
			delete(lanes, l.key)
		}
	}

	defer func() {
		// Wait for running work; report nothing more (the coordinator is
		// stopping too).
		go func() {
			for range done {
			}
		}()
		workers.Wait()
		close(done)
	}()
	for {
		start()
		var sendCh chan<- any
		if report != nil {
			sendCh = out
		}
		select {
		case <-ctx.Done():
			return
		case m, ok := <-in:
			if !ok {
				in = nil
				if active == 0 && report == nil {
					return
				}
				continue
			}
			for _, f := range m.Fences {
				s := state(f.Partition)
				if f.Epoch > s.fenced {
					s.fenced = f.Epoch
				}
				dropQueued(f.Partition)
			}
			for _, b := range m.Batches {
				accept(b)
			}
		case d := <-done:
			finish(d)
		case sendCh <- report:
			report = nil
		}
		if in == nil && active == 0 && report == nil && len(ready) == 0 {
			return
		}
	}
}
