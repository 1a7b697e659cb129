package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/fencepost-dev/fencepost/internal/logging"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// fastConfig is a configuration with timeouts short enough for tests, for
// a *kafkatest.Cluster or a *kafkatest.Kafka.
func fastConfig(c interface{ Bootstrap() []string }, group string, topics ...string) pipeline.Config {
	return pipeline.Config{
		Kafka: pipeline.KafkaConfig{Brokers: c.Bootstrap(), DialTimeout: 5 * time.Second, MetadataMaxAge: 500 * time.Millisecond},
		Consumer: pipeline.ConsumerConfig{
			Group: group, Topics: topics,
			CommitInterval: 100 * time.Millisecond, FetchMaxWait: 100 * time.Millisecond,
			SessionTimeout: 1500 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond,
			RebalanceTimeout: 3 * time.Second,
		},
		ShutdownTimeout: 10 * time.Second,
	}
}

// recorder is a stage that remembers every record it saw.
type recorder struct {
	mu     sync.Mutex
	seen   map[offsetstore.TopicPartition][]int64
	count  int
	signal chan struct{}
	delay  time.Duration
}

func newRecorder() *recorder {
	return &recorder{seen: map[offsetstore.TopicPartition][]int64{}, signal: make(chan struct{}, 1)}
}

func (r *recorder) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	if r.delay > 0 {
		select {
		case <-time.After(r.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.mu.Lock()
	for _, rec := range in {
		tp := offsetstore.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}
		r.seen[tp] = append(r.seen[tp], rec.Offset)
	}
	r.count += len(in)
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
	return in, nil
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

func (r *recorder) offsets(tp offsetstore.TopicPartition) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.seen[tp]...)
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running is a pipeline started in the background.
type running struct {
	p    *pipeline.Pipeline
	stop context.CancelFunc
	done chan error
}

func start(t testing.TB, cfg pipeline.Config, opts ...pipeline.Option) *running {
	t.Helper()
	log := zap.NewNop()
	if tt, ok := t.(*testing.T); ok && testing.Verbose() {
		lvl := zap.InfoLevel
		if os.Getenv("FENCEPOST_TEST_DEBUG") != "" {
			lvl = zap.DebugLevel
		}
		log = zaptest.NewLogger(tt, zaptest.Level(lvl))
	}
	p, err := pipeline.New(cfg, append([]pipeline.Option{pipeline.WithLogger(logging.ForStage(log))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Error("pipeline did not stop within 30s")
		}
	})
	return r
}

// shutdown stops the pipeline and returns Run's error.
func (r *running) shutdown(t testing.TB) error {
	t.Helper()
	r.stop()
	select {
	case err := <-r.done:
		r.done <- err // for Cleanup
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("pipeline did not stop within 30s")
		return nil
	}
}

func values(prefix string) func(int) []byte {
	return func(i int) []byte { return []byte(fmt.Sprintf("%s-%d", prefix, i)) }
}

type stagesRecord = stages.Record

// stageFunc adapts a function to a stage.
type stageFunc = stages.StageFunc
