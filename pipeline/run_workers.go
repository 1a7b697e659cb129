package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sourcegraph/conc"

	"github.com/fencepost-dev/fencepost/internal/engine/commit"
	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/internal/engine/resolve"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/internal/logging"
	"github.com/fencepost-dev/fencepost/internal/produce"
	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/stages"
)

// errStoppedWhileStarting: the run's context ended while the workers were
// being built; nothing was processed.
var errStoppedWhileStarting = errors.New("stopped while starting")

// workers are one run's steps (resolve, fetch, process, commit), the
// coordinator loop between them and the channels that feed them:
// buildWorkers makes them, start runs their goroutines and release frees
// what they held once every goroutine has returned.
type workers struct {
	loop      *coordinatorLoop
	process   *process.Step
	resolver  *resolve.Resolver
	committer *commit.Committer
	metadata  *fetch.Metadata
	fetcher   *fetch.Fetcher
	chainLog  *logging.Limiter
	// txn is the transactional producer (exactly_once), else nil; its
	// failures arrive on txnFailed.
	txn       *produce.Producer
	txnFailed chan txnFailedEvent

	resolveCh chan offsets.ResolveRequest
	commitCh  chan commit.Job
	metaCh    chan struct{}
	processCh chan process.Message
	noticeCh  chan notice

	// out holds the transactional producer until release (exactly_once).
	out *Outputs
	// state is the stores of stateful stages, nil without them; reader
	// and storage are what it restores with and keeps them in.
	state        *state.Manager
	reader       *changelogReader
	storage      *state.Storage
	stateFetcher *fetch.Fetcher
	// closeRepartitions closes the repartitions' own producers
	// (at_least_once).
	closeRepartitions func()

	// abandoned is the process step's error: written by its goroutine,
	// read after the run's WaitGroup is done.
	abandoned error
}

// release frees what the workers held. Call it once every goroutine of
// the run has returned.
func (w *workers) release() {
	w.chainLog.Flush()
	w.closeRepartitions()
	if w.state != nil {
		_ = w.state.Close()
		w.reader.close()
		w.stateFetcher.Close()
		w.storage.Cache.Unref()
	}
	if w.txn != nil {
		w.out.detach()
	}
	w.fetcher.Close() // every stream is closed by now
}

// buildWorkers builds the run's workers without starting any goroutine
// but the fetch workers the coordinator asks for, which join wg. runCtx
// is the context every worker runs in; failRun ends the member's context
// with the run's fatal error. It returns errStoppedWhileStarting when ctx
// ended during the build.
func (r *runner) buildWorkers(ctx, runCtx context.Context, wg *conc.WaitGroup, failRun context.CancelCauseFunc) (*workers, error) {
	p, cfg := r.p, r.p.cfg
	client := kafkawire.New(r.transport, r.conn.addr())
	brokers := &fetch.Brokers{}
	fetcher, err := fetch.NewFetcher(fetch.Config{
		Dialer: r.conn.fetchDialer(), Brokers: brokers,
		MaxWait: cfg.Consumer.FetchMaxWait, MinBytes: int32(cfg.Consumer.FetchMinBytes),
		PartitionMaxBytes: int32(cfg.Consumer.MaxPartitionFetchBytes), ReadCommitted: cfg.Consumer.ReadCommitted,
	})
	if err != nil {
		return nil, err
	}
	w := &workers{
		fetcher:   fetcher,
		txnFailed: make(chan txnFailedEvent, 1),
		resolveCh: make(chan offsets.ResolveRequest, 1),
		commitCh:  make(chan commit.Job, 1),
		metaCh:    make(chan struct{}, 1),
		processCh: make(chan process.Message),
		noticeCh:  make(chan notice, 64),
	}
	fetchDialer := r.conn.fetchDialer()
	w.resolver = resolve.NewResolver(client, resolve.Config{
		Timeout: cfg.Kafka.DialTimeout, ReadCommitted: cfg.Consumer.ReadCommitted,
		Dial: func(ctx context.Context, broker int32) (*kafkawire.Conn, error) {
			addr, ok := brokers.Addr(broker)
			if !ok {
				return nil, fmt.Errorf("broker %d is not in the cluster's metadata", broker)
			}
			return fetchDialer.Dial(ctx, addr)
		},
	})
	committerTimeout := cfg.Kafka.DialTimeout
	if cfg.Guarantee == ExactlyOnce {
		if w.txn, err = r.startTransactions(ctx, client, w.txnFailed); err != nil {
			fetcher.Close()
			if ctx.Err() != nil {
				return nil, errStoppedWhileStarting
			}
			return nil, err
		}
		w.out = r.out
		// a transaction's commit may wait for a coordinator to move
		committerTimeout = max(committerTimeout, cfg.TransactionTimeout/2)
	}
	w.committer = commit.NewCommitter(100*time.Millisecond, committerTimeout)
	w.metadata = fetch.NewMetadata(client, cfg.Consumer.Topics, brokers)
	w.loop = r.newLoop(runCtx, w, wg, failRun)
	// A bad input can fail every record: the chain's per-record
	// warnings are rate-limited, with a count of what was left out.
	w.chainLog = logging.ForRecords(logging.ForStage(p.log))
	chain, routes, closeRepartitions, err := r.chains(r.chain(w.chainLog))
	w.closeRepartitions = closeRepartitions
	var us process.UnitState
	if err == nil && len(p.storeNames) > 0 {
		err = r.buildState(w, client, brokers)
		us = unitState{w.state}
	}
	if err != nil {
		closeRepartitions()
		fetcher.Close()
		if w.txn != nil {
			r.out.detach()
		}
		return nil, err
	}
	w.process = process.NewStep(process.Config{
		Chain: chain, Routes: routes, Concurrency: cfg.Consumer.Concurrency, KeyOrdering: cfg.Consumer.Ordering == OrderByKey,
		OnDone: func(n int) { p.stats.processed.Add(int64(n)) },
		State:  us,
	})
	return w, nil
}

// newLoop builds the coordinator and its loop, wired to the workers'
// channels. The fetch workers start on demand, one per broker and fetcher
// index, and join wg.
func (r *runner) newLoop(runCtx context.Context, w *workers, wg *conc.WaitGroup, failRun context.CancelCauseFunc) *coordinatorLoop {
	p, cfg := r.p, r.p.cfg
	fetchers := map[fetcherKey]chan fetchJob{}
	// fetchCtx is the context of the fetches sent since the last abort;
	// only the coordinator goroutine (through its outputs) touches it.
	// runCtx's end cancels every fetch context too.
	fetchCtx, abortFetches := context.WithCancel(runCtx)
	var loop *coordinatorLoop
	coord := newCoordinator(coordinatorConfig{
		policy:            cfg.Consumer.AutoOffsetReset,
		validate:          !cfg.Consumer.SkipOffsetValidation,
		commitInterval:    cfg.Consumer.CommitInterval,
		budget:            int64(cfg.Consumer.BufferBytes),
		fetchMaxBytes:     int32(min(cfg.Consumer.FetchMaxBytes, 1<<30)),
		partitionMaxBytes: int32(min(cfg.Consumer.MaxPartitionFetchBytes, 1<<30)),
		fetchersPerBroker: r.fetchers,
		metadataBackoff:   100 * time.Millisecond,
		reportCommits:     p.obs != nil,
		transactional:     w.txn != nil,
		txnDrainTimeout:   cfg.TransactionTimeout / 2,
	}, coordinatorOutputs{
		resolve:  func(b offsets.ResolveRequest) { w.resolveCh <- b },
		commit:   func(c commit.Job) { w.commitCh <- c },
		metadata: func() { trySend(w.metaCh) },
		// Called on the coordinator goroutine only: fetchers is its.
		fetch: func(b offsets.FetchRequest) {
			k := fetcherKey{broker: b.Broker(), index: b.Fetcher()}
			ch := fetchers[k]
			if ch == nil {
				ch = make(chan fetchJob, 1)
				fetchers[k] = ch
				stream := w.fetcher.Stream(k.broker)
				wg.Go(func() {
					defer stream.Close()
					serve(runCtx, ch, loop, func(_ context.Context, j fetchJob) event { return fetchedEvent{r.fetch(stream, j)} })
				})
			}
			if fetchCtx.Err() != nil {
				fetchCtx, abortFetches = context.WithCancel(runCtx)
			}
			ch <- fetchJob{ctx: fetchCtx, batch: b}
		},
		abortFetches: func() { abortFetches() },
		fatal:        func(err error) { failRun(err) },
	}, p.log, &p.stats.coord, time.Now())
	loop = newCoordinatorLoop(coord, w.processCh, w.noticeCh, p.tick)
	return loop
}

// chain is the process step's stage chain, with the run's failure policy
// and the pipeline's counters and observer.
func (r *runner) chain(log *logging.Limiter) process.Chain {
	p, cfg := r.p, r.p.cfg
	chain := process.Chain{
		Stages: p.stages,
		Policy: process.FailurePolicy{
			Retries: cfg.DeadLetter.Retries, Backoff: cfg.DeadLetter.Backoff,
			Stop: cfg.DeadLetter.Policy == DeadLetterStop, Sink: r.sink,
		},
		Timeout:      cfg.Consumer.ProcessingTimeout,
		Log:          log,
		OnDeadLetter: func(stages.Record, string, error) { p.stats.deadLetters.Add(1) },
		OnStuck:      func(_ string, delta int) { p.stats.stuck.Add(int64(delta)) },
		// an output down for every record holds its partition: counted
		// for /readyz, never dead-lettered
		OnUnavailable: p.stats.unavailable,
	}
	if p.obs != nil {
		chain.OnStage = func(s process.StageRun) {
			p.obs.StageDone(StageDone{Stage: s.Stage, Records: s.In, Out: s.Out, Dropped: s.Dropped,
				Failed: s.Failed, DeadLettered: s.DeadLettered, Duration: s.Duration})
		}
	}
	return chain
}

// start runs every worker's goroutine in wg: the coordinator loop, the
// process step, resolve, commit, metadata, the notices and, under
// exactly_once, the forwarder of the producer's failures. They all end
// with runCtx.
func (w *workers) start(runCtx context.Context, r *runner, wg *conc.WaitGroup) {
	wg.Go(func() { w.loop.run(runCtx) })
	wg.Go(func() { w.abandoned = w.process.Run(runCtx, w.processCh, w.loop.reports) })
	wg.Go(func() {
		serve(runCtx, w.resolveCh, w.loop, func(ctx context.Context, b offsets.ResolveRequest) event {
			return resolvedEvent{w.resolver.Resolve(ctx, b)}
		})
	})
	wg.Go(func() {
		serve(runCtx, w.commitCh, w.loop, func(ctx context.Context, c commit.Job) event {
			return committedEvent{r.commit(ctx, w.committer, c)}
		})
	})
	wg.Go(func() { r.refreshMetadata(runCtx, w.metadata, w.metaCh, w.loop) })
	wg.Go(func() { r.notify(runCtx, w.noticeCh) })
	if w.txn != nil {
		wg.Go(func() {
			for {
				select {
				case <-runCtx.Done():
					return
				case ev := <-w.txnFailed:
					if !w.loop.send(runCtx, ev) {
						return
					}
				}
			}
		})
	}
}

// fetchJob is a fetch and the context it runs in (aborted on revoke).
type fetchJob struct {
	ctx   context.Context
	batch offsets.FetchRequest
}

// fetch runs one fetch on a broker's stream and reports it to the
// observer, if any.
func (r *runner) fetch(s *fetch.Stream, j fetchJob) *fetch.Result {
	if r.p.obs == nil {
		return s.Fetch(j.ctx, j.batch)
	}
	began := time.Now()
	res := s.Fetch(j.ctx, j.batch)
	d := FetchDone{Broker: j.batch.Broker(), Partitions: j.batch.Len(), Latency: time.Since(began), Aborted: j.ctx.Err() != nil}
	for i := range res.Partitions {
		switch pr := &res.Partitions[i]; {
		case pr.Outcome == fetch.OK && pr.Batch != nil:
			d.Records += len(pr.Batch.Records())
			d.Bytes += pr.Payload
		case pr.Outcome != fetch.OK && !d.Aborted:
			d.Errors++
			if d.Err == nil {
				d.Err = pr.Err
			}
		}
	}
	r.p.obs.FetchDone(d)
	return res
}

// commit runs one commit and reports it to the observer, if any.
func (r *runner) commit(ctx context.Context, committer *commit.Committer, c commit.Job) *commit.Result {
	began := time.Now()
	res := committer.Commit(ctx, c)
	if r.p.obs != nil {
		r.p.obs.CommitDone(CommitDone{Partitions: c.Request.Len(), Latency: time.Since(began), Err: res.Err, Abort: c.Abort})
	}
	return res
}

// serve runs a worker: one request at a time, its result to the
// coordinator.
func serve[T any](ctx context.Context, in <-chan T, loop *coordinatorLoop, do func(context.Context, T) event) {
	for {
		select {
		case <-ctx.Done():
			return
		case v := <-in:
			if !loop.send(ctx, do(ctx, v)) {
				return
			}
		}
	}
}

func trySend(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// refreshMetadata sends the coordinator the partition leaders: at start,
// when it asks (a NotLeader answer), and every metadata_max_age.
func (r *runner) refreshMetadata(ctx context.Context, m *fetch.Metadata, asked <-chan struct{}, loop *coordinatorLoop) {
	t := time.NewTicker(r.p.cfg.Kafka.MetadataMaxAge)
	defer t.Stop()
	refresh := false
	for {
		lctx, cancel := context.WithTimeout(ctx, r.p.cfg.Kafka.DialTimeout)
		l := m.Leaders(lctx, refresh)
		cancel()
		if ctx.Err() != nil || !loop.send(ctx, leadersEvent{l}) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-asked:
			refresh = true
		case <-t.C:
			refresh = false
		}
	}
}

// notify hands notices to the application's hooks, in order.
func (r *runner) notify(ctx context.Context, in <-chan notice) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-in:
			if n.Reset != nil && r.p.onReset != nil {
				r.p.onReset(*n.Reset)
			}
			if n.Stopped != nil && r.p.onStop != nil {
				r.p.onStop(*n.Stopped)
			}
			if n.Committed != nil && r.p.obs != nil {
				r.p.obs.OffsetsCommitted(n.Committed)
			}
		}
	}
}
