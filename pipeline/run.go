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

	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
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
	// globalPartitions are the partition counts of the global tables'
	// topics, read at start.
	globalPartitions map[string]int32
	// dir is the state directory held for the run (stateful stages on
	// disk), else nil.
	dir *stateDir
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
	topics = append(topics, p.stateTopics()...)
	r := &runner{p: p, conn: conn, transport: conn.transport(p.cfg.Kafka.MetadataMaxAge, topics)}
	p.logTopology()
	err = r.createRepartitions(ctx)
	if err == nil {
		err = r.checkCluster(ctx)
	}
	if err == nil {
		err = r.checkChangelogs(ctx)
	}
	if err != nil {
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

// run is one Run: it builds the workers of every step, starts them, runs
// the group member until ctx ends (or the run fails), then stops the
// workers and says how the run ended.
func (r *runner) run(ctx context.Context) error {
	cfg := r.p.cfg
	defer r.transport.CloseIdleConnections()
	if r.closeSink != nil {
		defer func() { _ = r.closeSink() }()
	}
	if len(r.p.storeNames) > 0 && cfg.State.Store == StoreDisk {
		dir, err := holdStateDir(cfg.State.Dir)
		if err != nil {
			return err
		}
		r.dir = dir
		defer dir.release()
	}

	// runCtx outlives ctx by the graceful stop: it ends when the stop
	// is done, or at the shutdown deadline.
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopTimer := context.AfterFunc(ctx, func() { time.AfterFunc(cfg.ShutdownTimeout, cancel) })
	defer stopTimer()
	// memberCtx is the group member's: it ends with ctx, or with the
	// transactional producer's failure (its cause).
	memberCtx, failRun := context.WithCancelCause(ctx)
	defer failRun(nil)

	var wg conc.WaitGroup
	w, err := r.buildWorkers(ctx, runCtx, &wg, failRun)
	if err != nil {
		if errors.Is(err, errStoppedWhileStarting) {
			return nil // nothing was processed
		}
		return err
	}
	defer w.release() // after wg.Wait (deferred below): every worker is done
	defer wg.Wait()
	defer cancel() // before wg.Wait: stop every step's workers
	w.start(runCtx, r, &wg)
	r.p.loop.Store(w.loop)
	defer r.p.loop.Store(nil)

	m := &member{cfg: cfg, conn: r.conn, loop: w.loop, log: r.p.log, obs: r.p.obs, txn: w.txn, state: w.state, stats: &r.p.stats}
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
	return r.howItEnded(err, w.abandoned, deadlinePassed, m.finalErr)
}

// howItEnded is Run's answer once every worker has stopped: the member's
// error, else the stage calls abandoned, the shutdown deadline passed, the
// final commit failed, or partitions left stopped; nil for a clean stop.
func (r *runner) howItEnded(memberErr, abandoned error, deadlinePassed bool, finalCommit error) error {
	p, log := r.p, r.p.log
	var ab *process.AbandonedError
	if errors.As(abandoned, &ab) {
		p.abandon(ab.Stages)
		log.Error("stage calls ignored their cancellation and were abandoned", zap.Error(abandoned))
		return &AbandonedError{Stages: slices.Sorted(maps.Keys(ab.Stages)), Records: ab.Records, Err: abandoned}
	}
	if memberErr != nil {
		return memberErr
	}
	if deadlinePassed {
		return fmt.Errorf("stopped at the shutdown deadline (%v) before in-flight records finished; they are redelivered after restart", p.cfg.ShutdownTimeout)
	}
	if finalCommit != nil {
		return fmt.Errorf("the final commit failed: %w (records processed since the last successful commit are redelivered after restart)", finalCommit)
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
	id := transactionalID(cfg.Consumer, r.dir.processID())
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
