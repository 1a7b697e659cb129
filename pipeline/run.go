package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/createtopics"
	meta "github.com/segmentio/kafka-go/protocol/metadata"
	"github.com/sourcegraph/conc"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/commit"
	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/internal/engine/resolve"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/internal/logging"
	"github.com/fencepost-dev/fencepost/internal/produce"
	"github.com/fencepost-dev/fencepost/internal/wait"
	"github.com/fencepost-dev/fencepost/stages"
)

// runner is one Run of a Pipeline: the workers of every step (resolve,
// fetch, process, commit) and what they share.
type runner struct {
	p         *Pipeline
	conn      *connection
	transport *kafka.Transport
	sink      stages.Producer
	closeSink func() error
	// out writes the outputs under exactly_once (the pipeline's
	// WithOutputs, or one of the runner's own for the dead letters).
	out *Outputs
	// fetchers is the fetch requests in flight per broker:
	// consumer.fetch_concurrency, or the default chosen at start from
	// the partitions each broker leads (fetchersPerBroker).
	fetchers int
}

func (p *Pipeline) prepare(ctx context.Context) (*runner, error) {
	conn, err := newConnection(p.cfg.Kafka)
	if err != nil {
		return nil, err
	}
	// The transport answers Metadata requests from its cache of these
	// topics: the consumed ones and the ones checked at start.
	topics := append(slices.Clone(p.cfg.Consumer.Topics), p.outputTopics()...)
	r := &runner{p: p, conn: conn, transport: conn.transport(p.cfg.Kafka.MetadataMaxAge, topics)}
	if err := r.checkCluster(ctx); err != nil {
		r.transport.CloseIdleConnections()
		return nil, err
	}
	r.sink = p.sink
	if p.cfg.Guarantee == ExactlyOnce {
		r.out = p.out
		if r.out == nil {
			if r.out, err = NewOutputs(p.cfg); err != nil {
				r.transport.CloseIdleConnections()
				return nil, err
			}
		}
		if r.sink == nil && p.cfg.DeadLetter.Policy == DeadLetterTopic {
			// dead letters are written in the transaction too
			if r.sink, err = r.out.Producer(p.cfg.DeadLetter.Topic); err != nil {
				r.transport.CloseIdleConnections()
				return nil, err
			}
		}
	}
	if r.sink == nil && p.cfg.DeadLetter.Policy == DeadLetterTopic {
		s := newProducer(conn, p.cfg.DeadLetter.Topic, p.cfg.Kafka.MetadataMaxAge, p.cfg.Kafka.MaxBatchBytes)
		r.sink, r.closeSink = s, s.Close
	}
	return r, nil
}

// outputTopics are the topics the pipeline writes to: its dead-letter
// topic, and the topics WithOutputTopics named.
func (p *Pipeline) outputTopics() []string {
	var out []string
	if p.sink == nil && p.cfg.DeadLetter.Policy == DeadLetterTopic {
		out = append(out, p.cfg.DeadLetter.Topic)
	}
	more := p.outputs
	if p.out != nil {
		more = append(slices.Clone(more), p.out.Topics()...)
	}
	for _, t := range more {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// checkCluster fails fast, with a message saying what to check, when the
// brokers cannot be reached, a consumed topic does not exist, or an
// output or dead-letter topic does not exist (unless kafka.create_topics
// asks to create those).
func (r *runner) checkCluster(ctx context.Context) error {
	cfg := r.p.cfg
	cctx, cancel := context.WithTimeout(ctx, cfg.Kafka.DialTimeout)
	defer cancel()
	outputs := r.p.outputTopics()
	topics := append(slices.Clone(cfg.Consumer.Topics), outputs...)
	var resp *meta.Response
	// A topic created a moment ago is known to some brokers before the
	// others: ask again, with fresh metadata, for a few seconds before
	// calling it missing.
	for d := 250 * time.Millisecond; ; d *= 2 {
		m, err := r.transport.RoundTrip(cctx, r.conn.addr(), &meta.Request{TopicNames: topics})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("cannot reach the Kafka cluster at %v within %v: %w (%s)",
				cfg.Kafka.Brokers, cfg.Kafka.DialTimeout, err, connectHint(err))
		}
		var ok bool
		if resp, ok = m.(*meta.Response); !ok {
			return fmt.Errorf("unexpected metadata response %T", m)
		}
		unknown := slices.ContainsFunc(resp.Topics, func(t meta.ResponseTopic) bool {
			creatable := cfg.Kafka.CreateTopics && !slices.Contains(cfg.Consumer.Topics, t.Name)
			return t.ErrorCode == int16(kafka.UnknownTopicOrPartition) && !creatable
		})
		if !unknown || d > time.Second || !wait.For(cctx, d) {
			break
		}
		// an empty CreateTopics makes the transport reload its metadata
		_, _ = r.transport.RoundTrip(cctx, r.conn.addr(), &createtopics.Request{})
	}
	var errs []error
	var create []string
	for _, t := range resp.Topics {
		what, key := "read", "consumer.topics"
		if !slices.Contains(cfg.Consumer.Topics, t.Name) {
			what, key = "write", "output topic"
			if cfg.DeadLetter.Topic == t.Name {
				key = "dead_letter.topic"
			}
		}
		switch {
		case t.ErrorCode == int16(kafka.UnknownTopicOrPartition) && what == "write" && cfg.Kafka.CreateTopics:
			create = append(create, t.Name)
		case t.ErrorCode == int16(kafka.UnknownTopicOrPartition) && what == "write":
			errs = append(errs, fmt.Errorf("%s: topic %q does not exist (create it, or set kafka.create_topics: true to create missing output topics at start)", key, t.Name))
		case t.ErrorCode == int16(kafka.UnknownTopicOrPartition):
			errs = append(errs, fmt.Errorf("%s: topic %q does not exist (create it, or check the name)", key, t.Name))
		case t.ErrorCode == int16(kafka.TopicAuthorizationFailed):
			errs = append(errs, fmt.Errorf("%s: not authorized to %s topic %q (check the topic ACLs)", key, what, t.Name))
		case t.ErrorCode != 0:
			errs = append(errs, fmt.Errorf("%s: topic %q: %w", key, t.Name, kafka.Error(t.ErrorCode)))
		}
	}
	if len(errs) == 0 && len(create) > 0 {
		errs = append(errs, r.createTopics(cctx, create))
	}
	r.fetchers = fetchersPerBroker(cfg.Consumer.FetchConcurrency, cfg.Consumer.Topics, resp)
	return errors.Join(errs...)
}

// createTopics creates output topics with the broker's default
// partitions and replication factor.
func (r *runner) createTopics(ctx context.Context, names []string) error {
	req := &createtopics.Request{TimeoutMs: int32(r.p.cfg.Kafka.DialTimeout / time.Millisecond)}
	for _, n := range names {
		req.Topics = append(req.Topics, createtopics.RequestTopic{Name: n, NumPartitions: -1, ReplicationFactor: -1})
	}
	m, err := r.transport.RoundTrip(ctx, r.conn.addr(), req)
	if err != nil {
		return fmt.Errorf("kafka.create_topics: creating %v: %w", names, err)
	}
	resp, ok := m.(*createtopics.Response)
	if !ok {
		return fmt.Errorf("kafka.create_topics: unexpected response %T", m)
	}
	var errs []error
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 && t.ErrorCode != int16(kafka.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("kafka.create_topics: creating topic %q: %w (check the principal may create topics, or create it yourself)",
				t.Name, kafka.Error(t.ErrorCode)))
			continue
		}
		r.p.log.Info("created output topic", zap.String("topic", t.Name))
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
	stopTimer := context.AfterFunc(ctx, func() { time.AfterFunc(cfg.ShutdownTimeout, cancel) })
	defer stopTimer()

	client := kafkawire.New(r.transport, r.conn.addr())
	brokers := &fetch.Brokers{}
	fetcher, err := fetch.NewFetcher(fetch.Config{
		Dialer: r.conn.fetchDialer(), Brokers: brokers,
		MaxWait: cfg.Consumer.FetchMaxWait, MinBytes: int32(cfg.Consumer.FetchMinBytes),
		PartitionMaxBytes: int32(cfg.Consumer.MaxPartitionFetchBytes), ReadCommitted: cfg.Consumer.ReadCommitted,
	})
	if err != nil {
		return err
	}
	defer fetcher.Close() // after wg.Wait (deferred below): every stream is closed
	fetchDialer := r.conn.fetchDialer()
	resolver := resolve.NewResolver(client, resolve.Config{
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
	// memberCtx is the group member's: it ends with ctx, or with the
	// transactional producer's failure (its cause).
	memberCtx, failRun := context.WithCancelCause(ctx)
	defer failRun(nil)
	var txn *produce.Producer
	txnFailed := make(chan txnFailedEvent, 1)
	if cfg.Guarantee == ExactlyOnce {
		if txn, err = r.startTransactions(ctx, client, txnFailed); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while starting: nothing was processed
			}
			return err
		}
		defer r.out.detach()
		// a transaction's commit may wait for a coordinator to move
		committerTimeout = max(committerTimeout, cfg.TransactionTimeout/2)
	}
	committer := commit.NewCommitter(100*time.Millisecond, committerTimeout)
	metadata := fetch.NewMetadata(client, cfg.Consumer.Topics, brokers)

	var wg conc.WaitGroup
	defer wg.Wait()
	defer cancel() // before wg.Wait: stop every step's workers

	resolveCh := make(chan offsets.ResolveRequest, 1)
	commitCh := make(chan commit.Job, 1)
	metaCh := make(chan struct{}, 1)
	processCh := make(chan process.Message)
	noticeCh := make(chan notice, 64)
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
		transactional:     txn != nil,
		txnDrainTimeout:   cfg.TransactionTimeout / 2,
	}, coordinatorOutputs{
		resolve:  func(b offsets.ResolveRequest) { resolveCh <- b },
		commit:   func(c commit.Job) { commitCh <- c },
		metadata: func() { trySend(metaCh) },
		// Called on the coordinator goroutine only: fetchers is its.
		fetch: func(b offsets.FetchRequest) {
			k := fetcherKey{broker: b.Broker(), index: b.Fetcher()}
			ch := fetchers[k]
			if ch == nil {
				ch = make(chan fetchJob, 1)
				fetchers[k] = ch
				stream := fetcher.Stream(k.broker)
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
	}, log, &p.stats.coord, time.Now())
	loop = newCoordinatorLoop(coord, processCh, noticeCh, p.tick)

	// A bad input can fail every record: the chain's per-record
	// warnings are rate-limited, with a count of what was left out.
	chainLog := logging.ForRecords(logging.ForStage(log))
	defer chainLog.Flush()
	chain := process.Chain{
		Stages: p.stages,
		Policy: process.FailurePolicy{
			Retries: cfg.DeadLetter.Retries, Backoff: cfg.DeadLetter.Backoff,
			Stop: cfg.DeadLetter.Policy == DeadLetterStop, Sink: r.sink,
		},
		Timeout:      cfg.Consumer.ProcessingTimeout,
		Log:          chainLog,
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
	step := process.NewStep(process.Config{
		Chain: chain, Concurrency: cfg.Consumer.Concurrency, KeyOrdering: cfg.Consumer.Ordering == OrderByKey,
		OnDone: func(n int) { p.stats.processed.Add(int64(n)) },
	})

	wg.Go(func() { loop.run(runCtx) })
	var abandoned error // step.Run's, read after wg.Wait
	wg.Go(func() { abandoned = step.Run(runCtx, processCh, loop.reports) })
	wg.Go(func() {
		serve(runCtx, resolveCh, loop, func(ctx context.Context, b offsets.ResolveRequest) event {
			return resolvedEvent{resolver.Resolve(ctx, b)}
		})
	})
	wg.Go(func() {
		serve(runCtx, commitCh, loop, func(ctx context.Context, c commit.Job) event { return committedEvent{r.commit(ctx, committer, c)} })
	})
	wg.Go(func() { r.refreshMetadata(runCtx, metadata, metaCh, loop) })
	wg.Go(func() { r.notify(runCtx, noticeCh) })
	if txn != nil {
		wg.Go(func() {
			for {
				select {
				case <-runCtx.Done():
					return
				case ev := <-txnFailed:
					if !loop.send(runCtx, ev) {
						return
					}
				}
			}
		})
	}
	p.loop.Store(loop)
	defer p.loop.Store(nil)

	m := &member{cfg: cfg, conn: r.conn, loop: loop, log: log, obs: p.obs, txn: txn, stats: &p.stats}
	err = m.run(memberCtx)
	if cause := context.Cause(memberCtx); ctx.Err() == nil && cause != nil && err == nil {
		err = fmt.Errorf("exactly_once: %w", cause)
	}
	deadlinePassed := runCtx.Err() != nil
	// Stop every step now. A stage call still running gets
	// process.DefaultAbandonAfter to return, then is abandoned: Run does
	// not wait for a stage that ignores its context.
	cancel()
	wg.Wait()
	var ab *process.AbandonedError
	if errors.As(abandoned, &ab) {
		p.abandon(ab.Stages)
		log.Error("stage calls ignored their cancellation and were abandoned", zap.Error(abandoned))
		return &AbandonedError{Stages: slices.Sorted(maps.Keys(ab.Stages)), Records: ab.Records, Err: abandoned}
	}
	if err != nil {
		return err
	}
	if deadlinePassed {
		return fmt.Errorf("stopped at the shutdown deadline (%v) before in-flight records finished; they are redelivered after restart", cfg.ShutdownTimeout)
	}
	if m.finalErr != nil {
		return fmt.Errorf("the final commit failed: %w (records processed since the last successful commit are redelivered after restart)", m.finalErr)
	}
	if st := p.stats.coord.stoppedAtRelease.Load(); st != nil && len(*st) > 0 {
		err := &StoppedPartitionsError{Partitions: *st}
		log.Error("stopped with stopped partitions", zap.Error(err))
		return err
	}
	log.Info("stopped")
	return nil
}

// StoppedPartitionsError is what Run returns after a graceful stop that
// left partitions stopped: a record failed under dead_letter policy stop,
// could not be written to the dead-letter topic, or auto_offset_reset
// none found no valid offset. Each partition's commit stops before the
// record that stopped it; fix the cause, then seek past the record or
// restart.
type StoppedPartitionsError struct {
	Partitions []PartitionStopped
}

func (e *StoppedPartitionsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d partition(s) stopped", len(e.Partitions))
	for i, s := range e.Partitions {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Partitions)-3)
			break
		}
		fmt.Fprintf(&b, "; %s: %v", s.Partition, s.Err)
	}
	return b.String()
}

// Unwrap returns the partitions' errors.
func (e *StoppedPartitionsError) Unwrap() []error {
	errs := make([]error, len(e.Partitions))
	for i, s := range e.Partitions {
		errs[i] = s.Err
	}
	return errs
}

// AbandonedError is what Run returns when, at the end of a stop, stage
// calls were still running although their context had ended: the stage
// ignores cancellation (a loop that never checks ctx, a blocking call
// without a deadline). Run does not wait for them: it returns about a
// second after the stop's deadline (or its drain, if that came first),
// leaving the calls' goroutines in the stage's code. Their records are not
// committed and are redelivered after a restart. The abandoned stages are
// not closed (stages.Closer), since a call of theirs is still running.
type AbandonedError struct {
	// Stages are the names of the stages with a call still running.
	Stages []string
	// Records is how many records the abandoned calls held.
	Records int
	Err     error
}

func (e *AbandonedError) Error() string {
	return "stopped without waiting for stage calls that ignore cancellation: " + e.Err.Error()
}

func (e *AbandonedError) Unwrap() error { return e.Err }

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

// Close closes the pipeline's stages that hold resources (stages.Closer),
// once; later calls do nothing and return nil. Run calls it when it
// returns; call it yourself only for a Pipeline that never runs. It must
// not be called while Run is running.
func (p *Pipeline) Close(ctx context.Context) error {
	var errs []error
	p.closeOnce.Do(func() {
		abandoned := p.abandoned.Load()
		for _, st := range p.stages {
			if abandoned != nil && slices.Contains(*abandoned, st.Name) {
				p.log.Warn("not closing a stage whose call was abandoned (it is still running)", zap.String("stage", st.Name))
				continue
			}
			if c, ok := st.Stage.(stages.Closer); ok {
				if err := c.Close(ctx); err != nil {
					errs = append(errs, fmt.Errorf("stage %s: %w", st.Name, err))
				}
			}
		}
	})
	return errors.Join(errs...)
}

// abandon notes the stages whose calls Run abandoned: Close leaves them.
func (p *Pipeline) abandon(running map[string]int) {
	names := slices.Sorted(maps.Keys(running))
	p.abandoned.Store(&names)
}

// closeStages is Close with a deadline, logging what failed.
func (p *Pipeline) closeStages() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		p.log.Warn("closing stages failed", zap.Error(err))
	}
}

// startTransactions builds the run's transactional producer (guarantee
// exactly_once), gives it to the outputs, and initializes it, which fences
// an older producer with the same transactional id and opens the first
// transaction. The producer's reports of failed transactions go to
// failed (dropped when one is pending: the coordinator reads the
// producer's state from the commit step's answers too).
func (r *runner) startTransactions(ctx context.Context, client *kafkawire.Client, failed chan<- txnFailedEvent) (*produce.Producer, error) {
	cfg := r.p.cfg
	id := transactionalID(cfg.Consumer)
	prod := produce.New(client, produce.Config{
		TransactionalID: id, TransactionTimeout: cfg.TransactionTimeout, MaxBatchBytes: int(cfg.Kafka.MaxBatchBytes),
		OnTxnFailed: func(err error) {
			select {
			// fenced is not fatal yet: the abort finds out whether a
			// transaction timeout (recoverable) or another instance
			// fenced the producer
			case failed <- txnFailedEvent{err: err, fatal: isFatal(err)}:
			default:
			}
		},
	})
	if err := r.out.attach(prod); err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, max(cfg.Kafka.DialTimeout, 30*time.Second))
	defer cancel()
	if err := prod.Begin(ictx); err != nil {
		r.out.detach()
		if errors.Is(err, kafka.InvalidTransactionTimeout) {
			return nil, fmt.Errorf("exactly_once: starting the transactional producer %q: the brokers' maximum transaction timeout "+
				"(transaction.max.timeout.ms) is lower than transaction_timeout (%v): lower transaction_timeout, or raise "+
				"transaction.max.timeout.ms on every broker: %w", id, cfg.TransactionTimeout, err)
		}
		return nil, fmt.Errorf("exactly_once: starting the transactional producer %q: %w (check that the cluster supports "+
			"transactions, with enough brokers for transaction.state.log.replication.factor, and that the principal may "+
			"WRITE and DESCRIBE transactional ids starting with %q)", id, err, cfg.Consumer.Group+"-")
	}
	r.p.log.Info("exactly_once: transactional producer ready", zap.String("transactional_id", id),
		zap.Duration("transaction_timeout", cfg.TransactionTimeout))
	return prod, nil
}
