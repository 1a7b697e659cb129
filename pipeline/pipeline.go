// Package pipeline runs a Kafka stream processor: it joins a consumer
// group, fetches the partitions it is assigned, runs every record through
// a chain of stages, and commits the processed offsets so that nothing is
// lost and little is repeated.
//
// One goroutine, the coordinator, owns every partition's state (where it
// starts, where it is, whether it is paused, what is committed); the
// engine's steps (resolve, fetch, process, commit) send it events and
// receive immutable requests and batches. "Stage" always means a user's
// processing step, one link of the chain every record runs through. A
// reset never deletes a partition's position: it replaces it with a start
// request and a new epoch, and any result of the old epoch is dropped.
// See docs/architecture.md.
//
// A minimal pipeline:
//
//	p, err := pipeline.New(pipeline.Config{
//		Kafka:    pipeline.KafkaConfig{Brokers: []string{"localhost:9092"}},
//		Consumer: pipeline.ConsumerConfig{Group: "enricher", Topics: []string{"orders"}},
//	}, pipeline.WithStage("print", stages.StageFunc(print)))
//	if err != nil { ... }
//	err = p.Run(ctx) // until ctx ends; then drains, commits, leaves the group
package pipeline

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/internal/logging"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// Errors of the Pipeline API.
var (
	// ErrNotRunning: Seek, Pause, Resume, Flush and Stats need Run.
	ErrNotRunning = errors.New("pipeline is not running (call Run first)")
	// ErrAlreadyStarted: Run was already called; a Pipeline runs once.
	ErrAlreadyStarted = errors.New("pipeline already started; build a new one to run again")
)

// Pipeline consumes a consumer group's partitions through a chain of
// stages. Build it with New, start it with Run. Its methods are safe for
// concurrent use.
type Pipeline struct {
	cfg     Config
	stages  []process.NamedStage
	log     *zap.Logger
	onReset func(offsetstore.ResetEvent)
	onStop  func(PartitionStopped)
	sink    stages.Producer
	obs     Observer
	outputs []string
	out     *Outputs // WithOutputs
	tick    time.Duration
	// storeNames are the stores the stateful stages declare.
	storeNames []string
	// tables are the read-only stores that mirror topics (store ->
	// topic), among storeNames.
	tables map[string]string
	// globals are the global tables (store -> topic), among storeNames.
	globals map[string]string
	// cuts are the repartitions (WithRepartition), in order.
	cuts []cut

	started   atomic.Bool
	closeOnce sync.Once
	abandoned atomic.Pointer[[]string] // stages whose calls Run abandoned: not closed
	loop      atomic.Pointer[coordinatorLoop]
	stats     pipelineStats
}

// Option configures a Pipeline beyond its Config.
type Option func(*Pipeline)

// WithStage appends a stage to the chain, under a name its errors and
// dead letters carry. Records flow through stages in the order added.
//
// A stage that is a stages.Repartitioner ends a segment: its output
// records go through a repartition topic by their keys, and the stages
// added after it run on that topic (see WithRepartition). One that is a
// stages.Grouper starts one: its input goes through a repartition topic
// by its group key first.
func WithStage(name string, s stages.Stage) Option {
	return func(p *Pipeline) {
		if g, ok := s.(stages.Grouper); ok {
			if cut, key, ok := g.GroupKey(); ok {
				WithRepartition(cut, key)(p)
			}
		}
		p.stages = append(p.stages, process.NamedStage{Name: name, Stage: s})
		if r, ok := s.(stages.Repartitioner); ok {
			WithRepartition(r.RepartitionName(), recordKey)(p)
		}
	}
}

// recordKey is the repartition key of a stages.Repartitioner's output:
// the key it set.
func recordKey(r stages.Record) ([]byte, error) { return r.Key, nil }

// WithLogger sets where the pipeline logs (default: nowhere): resets,
// stopped partitions, rebalances, failures, with key-value pairs. A
// *slog.Logger is one (its handler's level decides what is written).
func WithLogger(l stages.Logger) Option { return func(p *Pipeline) { p.log = logging.ToZap(l) } }

// OnReset registers a function called for every reset (reason, from, to,
// records skipped; DataLoss marks a data-loss reset), and where each
// partition without a committed offset starts (reason
// no_committed_offset). It runs on a goroutine of its own, in order; it
// should not block for long.
func OnReset(fn func(offsetstore.ResetEvent)) Option { return func(p *Pipeline) { p.onReset = fn } }

// OnPartitionStopped registers a function called when a partition stops
// (reset policy none, or a record failed with dead_letter policy stop).
func OnPartitionStopped(fn func(PartitionStopped)) Option {
	return func(p *Pipeline) { p.onStop = fn }
}

// WithDeadLetterSink sends failed records to s instead of a dead-letter
// topic; unless DeadLetterConfig.Policy says otherwise, the policy becomes
// "topic" (dead-letter and continue). s.Produce must return nil only once
// the records are durably written: until then their partition waits and
// the write is retried. A stages.Permanent error makes the pipeline send
// a truncated dead letter instead (see stages.HeaderTruncated), and stop
// the partition if that is refused too.
func WithDeadLetterSink(s stages.Producer) Option { return func(p *Pipeline) { p.sink = s } }

// WithOutputs gives the pipeline the Outputs its stages were built with
// (their stages.Env.Producer). The pipeline writes its dead letters
// through it, checks its topics at start (as WithOutputTopics), and, with
// guarantee exactly_once, runs its writes in the pipeline's
// transactions. Without it, an exactly_once pipeline writes only its dead
// letters transactionally: stages writing through producers of their own
// are at-least-once.
func WithOutputs(o *Outputs) Option { return func(p *Pipeline) { p.out = o } }

// WithOutputTopics names topics the stages write to. Run checks at start
// that they exist, as it does for the consumed topics and the
// dead-letter topic, and fails with a clear error if one does not (or
// creates it, with kafka.create_topics). Without it, a stage writing to a
// missing topic would retry forever.
func WithOutputTopics(topics ...string) Option {
	return func(p *Pipeline) { p.outputs = append(p.outputs, topics...) }
}

// New checks cfg and returns a Pipeline. It does not connect to Kafka;
// Run does.
func New(cfg Config, opts ...Option) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pipeline{cfg: cfg.withDefaults(), log: zap.NewNop(), tick: 50 * time.Millisecond}
	for _, o := range opts {
		o(p)
	}
	if p.sink != nil && p.cfg.DeadLetter.Policy == DeadLetterStop && cfg.DeadLetter.Policy == "" {
		p.cfg.DeadLetter.Policy = DeadLetterTopic
	}
	if err := p.checkCuts(); err != nil {
		return nil, err
	}
	var err error
	if p.storeNames, err = p.stores(); err != nil {
		return nil, err
	}
	if err := p.checkStateful(); err != nil {
		return nil, err
	}
	return p, nil
}

// Config returns the configuration with defaults applied.
func (p *Pipeline) Config() Config { return p.cfg }

// loopStopped returns a channel closed when the current run's coordinator
// stopped (a closed channel if none runs).
func (p *Pipeline) loopStopped() <-chan struct{} {
	if l := p.loop.Load(); l != nil {
		return l.stopped
	}
	c := make(chan struct{})
	close(c)
	return c
}

// send delivers an application request to the running coordinator.
func (p *Pipeline) send(ctx context.Context, ev event) error {
	l := p.loop.Load()
	if l == nil {
		return ErrNotRunning
	}
	if !l.send(ctx, ev) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrNotRunning
	}
	return nil
}

func (p *Pipeline) await(ctx context.Context, ev event, done chan error) error {
	stopped := p.loopStopped()
	if err := p.send(ctx, ev); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-stopped:
		return ErrNotRunning
	}
}

// Seek moves a partition this member owns to where req says: Exact(n),
// Earliest(), Latest() or AtTime(t). Fetching continues from the new
// position, and a reset event (reason seek) reports the move; with offset
// validation on (the default), an offset outside the log is clamped to
// its bounds. A stopped partition restarts.
//
// Records already handed to the stages still run, but the commit no
// longer waits for them: a seek forward commits the new position, and a
// record handed out before the seek that fails does not stop the
// partition (the records below the new position are skipped by the seek,
// those from it on are fetched again). It fails with ErrNotAssigned if
// the partition is not assigned here now.
func (p *Pipeline) Seek(ctx context.Context, tp offsetstore.TopicPartition, req offsetstore.StartRequest) error {
	done := make(chan error, 1)
	return p.await(ctx, &seekEvent{tp: tp, req: req, done: done}, done)
}

// Pause stops fetching the partitions. Records already handed to the
// stages finish; nothing more of these partitions is handed out until
// Resume. A pause outlives rebalances: a paused partition assigned again
// stays paused.
func (p *Pipeline) Pause(ctx context.Context, tps ...offsetstore.TopicPartition) error {
	done := make(chan error, 1)
	return p.await(ctx, &pauseEvent{tps: tps, pause: true, done: done}, done)
}

// Resume undoes Pause.
func (p *Pipeline) Resume(ctx context.Context, tps ...offsetstore.TopicPartition) error {
	done := make(chan error, 1)
	return p.await(ctx, &pauseEvent{tps: tps, pause: false, done: done}, done)
}

// Flush commits every processed offset now and returns the commit's
// result (nil if there was nothing to commit).
func (p *Pipeline) Flush(ctx context.Context) error {
	done := make(chan error, 1)
	return p.await(ctx, &flushEvent{done: done}, done)
}

// Stats returns counters and the state of every assigned partition.
func (p *Pipeline) Stats(ctx context.Context) (Stats, error) {
	s := p.stats.snapshot()
	done := make(chan []PartitionStatus, 1)
	if err := p.send(ctx, &statsEvent{done: done}); err != nil {
		return s, err
	}
	select {
	case s.Partitions = <-done:
		return s, nil
	case <-ctx.Done():
		return s, ctx.Err()
	case <-p.loopStopped():
		return s, ErrNotRunning
	}
}

// Run consumes until ctx ends, then stops gracefully within
// ShutdownTimeout: it stops fetching, lets the stages finish the records
// they hold, commits the processed offsets, and leaves the group.
//
// It returns nil after a graceful stop with every partition healthy. It
// returns an error if the pipeline could not start (the cluster is
// unreachable within kafka.dial_timeout, a consumed, output or
// dead-letter topic does not exist), if the shutdown deadline passed
// before in-flight records finished, an *AbandonedError if a stage call
// ignored its cancellation (Run returns about a second after the
// deadline anyway), if the final commit failed, or a
// *StoppedPartitionsError if partitions were stopped when it ended. A
// Pipeline runs once. When Run returns, it has closed every stage that
// implements stages.Closer (except a stage whose call was abandoned).
func (p *Pipeline) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	defer p.closeStages()
	r, err := p.prepare(ctx)
	if err != nil {
		return err
	}
	return r.run(ctx)
}
