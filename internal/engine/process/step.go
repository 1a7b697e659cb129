package process

import (
	"context"
	"runtime"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/sourcegraph/conc/pool"
)

// Config configures a Step.
type Config struct {
	Chain Chain
	// Concurrency is the most units (batches, or key groups of batches)
	// processed at once. Default GOMAXPROCS.
	Concurrency int
	// KeyOrdering keeps order per key instead of per partition: records
	// of a partition with different keys are processed concurrently,
	// records with the same key never are.
	KeyOrdering bool
	// OnDone, if set, is called with the number of source records of
	// every batch that finished them.
	OnDone func(records int)
}

// Step is the process step: a Scheduler owned by Run's goroutine,
// and workers that run its units through the chain.
type Step struct {
	cfg   Config
	sched *Scheduler
}

// NewStep returns a Step.
func NewStep(cfg Config) *Step {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = runtime.GOMAXPROCS(0)
	}
	if cfg.Chain.Log == nil {
		cfg.Chain.Log = stages.NopLogger
	}
	s := NewScheduler(cfg.Concurrency, cfg.KeyOrdering)
	s.onDone = cfg.OnDone
	return &Step{cfg: cfg, sched: s}
}

type unitDone struct {
	u   *Unit
	err error
}

// Run processes messages from in until ctx ends or in is closed, and
// sends every report of completions to out (the coordinator's). Before returning it waits for running work: stage calls see
// ctx, so a cancelled ctx makes them return early.
func (p *Step) Run(ctx context.Context, in <-chan Message, out chan<- *Report) {
	s := p.sched
	workers := pool.New().WithMaxGoroutines(p.cfg.Concurrency)
	done := make(chan unitDone, p.cfg.Concurrency)
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
	var report *Report
	for {
		for {
			u, ok := s.Next()
			if !ok {
				break
			}
			workers.Go(func() {
				_, err := p.cfg.Chain.Run(ctx, u.Records())
				done <- unitDone{u: u, err: err}
			})
		}
		if r := s.TakeReport(); r != nil {
			if report == nil {
				report = r
			} else {
				report.Completions = append(report.Completions, r.Completions...)
			}
		}
		if in == nil && s.Running() == 0 && report == nil {
			return
		}
		var sendCh chan<- *Report
		if report != nil {
			sendCh = out
		}
		select {
		case <-ctx.Done():
			return
		case m, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			s.Accept(m)
		case d := <-done:
			s.Finish(d.u, d.err)
		case sendCh <- report:
			report = nil
		}
	}
}
