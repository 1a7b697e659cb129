package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	kafka "github.com/segmentio/kafka-go"
	meta "github.com/segmentio/kafka-go/protocol/metadata"
	"github.com/sourcegraph/conc"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/commit"
	"github.com/fencepost-dev/fencepost/stages/fetch"
	"github.com/fencepost-dev/fencepost/stages/process"
	"github.com/fencepost-dev/fencepost/stages/resolve"
)

// runner is one Run of a Pipeline: the goroutines of every stage and what
// they share.
type runner struct {
	p         *Pipeline
	conn      *connection
	transport *kafka.Transport
	sink      process.DeadLetterSink
	closeSink func() error
}

func (p *Pipeline) prepare(ctx context.Context) (*runner, error) {
	conn, err := newConnection(p.cfg.Kafka)
	if err != nil {
		return nil, err
	}
	r := &runner{p: p, conn: conn, transport: conn.transport(p.cfg.Kafka.MetadataMaxAge, p.cfg.Consumer.Topics)}
	if err := r.checkCluster(ctx); err != nil {
		r.transport.CloseIdleConnections()
		return nil, err
	}
	r.sink = p.sink
	if r.sink == nil && p.cfg.DeadLetter.Policy == DeadLetterTopic {
		s := newProducer(conn, p.cfg.DeadLetter.Topic, p.cfg.Kafka.MetadataMaxAge)
		r.sink, r.closeSink = s, s.Close
	}
	return r, nil
}

// checkCluster fails fast, with a message saying what to check, when the
// brokers cannot be reached or a topic does not exist.
func (r *runner) checkCluster(ctx context.Context) error {
	cfg := r.p.cfg
	cctx, cancel := context.WithTimeout(ctx, cfg.Kafka.DialTimeout)
	defer cancel()
	m, err := r.transport.RoundTrip(cctx, r.conn.addr(), &meta.Request{TopicNames: cfg.Consumer.Topics})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("cannot reach the Kafka cluster at %v within %v: %w (%s)",
			cfg.Kafka.Brokers, cfg.Kafka.DialTimeout, err, connectHint(err))
	}
	resp, ok := m.(*meta.Response)
	if !ok {
		return fmt.Errorf("unexpected metadata response %T", m)
	}
	var errs []error
	for _, t := range resp.Topics {
		switch {
		case t.ErrorCode == int16(kafka.UnknownTopicOrPartition):
			errs = append(errs, fmt.Errorf("consumer.topics: topic %q does not exist (create it, or check the name)", t.Name))
		case t.ErrorCode == int16(kafka.TopicAuthorizationFailed):
			errs = append(errs, fmt.Errorf("consumer.topics: not authorized to read topic %q (check the topic ACLs)", t.Name))
		case t.ErrorCode != 0:
			errs = append(errs, fmt.Errorf("consumer.topics: topic %q: %w", t.Name, kafka.Error(t.ErrorCode)))
		}
	}
	return errors.Join(errs...)
}

func (r *runner) run(ctx context.Context) error {
	p, cfg := r.p, r.p.cfg
	log := p.log
	defer r.transport.CloseIdleConnections()
	if r.closeSink != nil {
		defer func() { _ = r.closeSink() }()
	}

	// runCtx outlives ctx by the graceful stop: it ends when the stop
	// is done, or at the shutdown deadline.
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopTimer := context.AfterFunc(ctx, func() {
		log.Info("stopping: draining in-flight records and committing", zap.Duration("deadline", cfg.ShutdownTimeout))
		time.AfterFunc(cfg.ShutdownTimeout, cancel)
	})
	defer stopTimer()

	fetcher, err := fetch.NewFetcher(fetch.Config{
		Transport: r.transport, Addr: r.conn.addr(),
		MaxWait: cfg.Consumer.FetchMaxWait, MinBytes: int32(cfg.Consumer.FetchMinBytes),
		PartitionMaxBytes: int32(cfg.Consumer.MaxPartitionFetchBytes), ReadCommitted: cfg.Consumer.ReadCommitted,
	})
	if err != nil {
		return err
	}
	resolver := resolve.NewResolver(r.transport, r.conn.addr(), cfg.Kafka.DialTimeout)
	committer := commit.NewCommitter(100*time.Millisecond, cfg.Kafka.DialTimeout)
	metadata := fetch.NewMetadata(r.transport, r.conn.addr(), cfg.Consumer.Topics)

	var wg conc.WaitGroup
	defer wg.Wait()
	defer cancel() // before wg.Wait: stop every stage

	resolveCh := make(chan offsetstore.ResolveBatch, 1)
	commitCh := make(chan commit.Request, 1)
	metaCh := make(chan struct{}, 1)
	processCh := make(chan process.Message)
	noticeCh := make(chan Notice, 64)
	fetchers := map[fetcherKey]chan fetchJob{}
	// fetchCtx is the context of the fetches sent since the last abort;
	// only the coordinator goroutine (through its outputs) touches it.
	fetchCtx, abortFetches := context.WithCancel(runCtx)
	defer func() { abortFetches() }()

	var loop *coordinatorLoop
	coord := newCoordinator(coordinatorConfig{
		policy:          cfg.Consumer.AutoOffsetReset,
		validate:        !cfg.Consumer.SkipOffsetValidation,
		commitInterval:  cfg.Consumer.CommitInterval,
		budget:          int64(cfg.Consumer.BufferBytes),
		fetchMaxBytes:   int32(min(cfg.Consumer.FetchMaxBytes, 1<<30)),
		fetchLanes:      cfg.Consumer.FetchConcurrency,
		metadataBackoff: 100 * time.Millisecond,
	}, coordinatorOutputs{
		resolve:  func(b offsetstore.ResolveBatch) { resolveCh <- b },
		commit:   func(c commit.Request) { commitCh <- c },
		metadata: func() { trySend(metaCh) },
		// Called on the coordinator goroutine only: fetchers is its.
		fetch: func(b offsetstore.FetchBatch) {
			k := fetcherKey{broker: b.Broker(), lane: b.Lane()}
			ch := fetchers[k]
			if ch == nil {
				ch = make(chan fetchJob, 1)
				fetchers[k] = ch
				wg.Go(func() {
					serve(runCtx, ch, loop, func(_ context.Context, j fetchJob) any { return fetcher.Fetch(j.ctx, j.batch) })
				})
			}
			if fetchCtx.Err() != nil {
				fetchCtx, abortFetches = context.WithCancel(runCtx)
			}
			ch <- fetchJob{ctx: fetchCtx, batch: b}
		},
		abortFetches: func() { abortFetches() },
	}, log, &p.stats.coord, time.Now())
	loop = newCoordinatorLoop(coord, processCh, noticeCh, p.tick)

	chain := process.Chain{
		Stages: p.stages,
		Policy: process.FailurePolicy{
			Retries: cfg.DeadLetter.Retries, Backoff: cfg.DeadLetter.Backoff,
			Stop: cfg.DeadLetter.Policy == DeadLetterStop, Sink: r.sink,
		},
		Log:          log,
		OnDeadLetter: func(stages.Record, string, error) { p.stats.deadLetters.Add(1) },
	}
	processor := process.NewProcessor(process.Config{
		Chain: chain, Concurrency: cfg.Consumer.Concurrency, KeyOrdering: cfg.Consumer.Ordering == OrderByKey,
		Log: log, OnDone: func(n int) { p.stats.processed.Add(int64(n)) },
	})

	wg.Go(func() { loop.run(runCtx) })
	wg.Go(func() { processor.Run(runCtx, processCh, loop.events) })
	wg.Go(func() {
		serve(runCtx, resolveCh, loop, func(ctx context.Context, b offsetstore.ResolveBatch) any { return resolver.Resolve(ctx, b) })
	})
	wg.Go(func() {
		serve(runCtx, commitCh, loop, func(ctx context.Context, c commit.Request) any { return committer.Commit(ctx, c) })
	})
	wg.Go(func() { r.refreshMetadata(runCtx, metadata, metaCh, loop) })
	wg.Go(func() { r.notify(runCtx, noticeCh) })
	p.loop.Store(loop)
	defer p.loop.Store(nil)

	m := &member{cfg: cfg, conn: r.conn, loop: loop, log: log}
	err = m.run(ctx)
	if err != nil {
		return err
	}
	if runCtx.Err() != nil {
		return fmt.Errorf("stopped at the shutdown deadline (%v) before in-flight records finished; they are redelivered after restart", cfg.ShutdownTimeout)
	}
	log.Info("stopped")
	return nil
}

// fetchJob is a fetch and the context it runs in (aborted on revoke).
type fetchJob struct {
	ctx   context.Context
	batch offsetstore.FetchBatch
}

// serve runs a worker: one request at a time, its result to the
// coordinator.
func serve[T any](ctx context.Context, in <-chan T, loop *coordinatorLoop, do func(context.Context, T) any) {
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
		l := m.Leaders(ctx, refresh)
		if ctx.Err() != nil || !loop.send(ctx, l) {
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
func (r *runner) notify(ctx context.Context, in <-chan Notice) {
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
		}
	}
}

// Close closes the pipeline's stages that hold resources (stages.Closer),
// once; later calls do nothing and return nil. Run calls it when it
// returns; call it yourself only for a Pipeline that never runs. It must
// not be called while Run is running.
func (p *Pipeline) Close(ctx context.Context) error {
	var errs []error
	p.closeOnce.Do(func() {
		for _, st := range p.stages {
			if c, ok := st.Stage.(stages.Closer); ok {
				if err := c.Close(ctx); err != nil {
					errs = append(errs, fmt.Errorf("stage %s: %w", st.Name, err))
				}
			}
		}
	})
	return errors.Join(errs...)
}

// closeStages is Close with a deadline, logging what failed.
func (p *Pipeline) closeStages() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		p.log.Warn("closing stages failed", zap.Error(err))
	}
}
