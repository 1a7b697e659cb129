package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestGracefulShutdownCommitsProcessed: a stop while a slow stage holds
// records lets it finish them, commits exactly what was processed, and
// returns within the shutdown deadline; nothing is processed after Run
// returns.
func TestGracefulShutdownCommitsProcessed(t *testing.T) {
	gracefulShutdownCommitsProcessed(t, kafkatest.New(t, 1).Kafka)
}

func gracefulShutdownCommitsProcessed(t *testing.T, c *kafkatest.Kafka) {
	topic, group := c.Name("orders"), c.Name("g-stop")
	tp := offsetstore.TopicPartition{Topic: topic, Partition: 0}
	c.CreateTopic(t, topic, 1)
	c.Produce(t, topic, 0, 300, values("o"))
	rec := newRecorder()
	var started, finished atomic.Int64
	slow := stages.StageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
		started.Add(1)
		defer finished.Add(1)
		time.Sleep(200 * time.Millisecond) // ignores ctx: the stop must wait for it
		return rec.Process(ctx, in)
	})
	cfg := fastConfig(c, group, topic)
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.Consumer.MaxPartitionFetchBytes = 200 // a few records per batch
	cfg.Consumer.CommitInterval = time.Hour   // only the shutdown commits
	r := start(t, cfg, pipeline.WithStage("slow", slow))
	waitFor(t, 10*time.Second, "a batch in progress after some were done", func() bool {
		return finished.Load() > 0 && started.Load() > finished.Load()
	})
	inFlight := started.Load()
	began := time.Now()
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	processed := rec.offsets(tp)
	if took > cfg.ShutdownTimeout {
		t.Fatalf("shutdown took %v, deadline %v", took, cfg.ShutdownTimeout)
	}
	n := int64(len(processed))
	if finished.Load() < inFlight {
		t.Fatalf("%d batches started before the stop, %d finished: in-flight work was not drained", inFlight, finished.Load())
	}
	for i, o := range processed {
		if o != int64(i) {
			t.Fatalf("processed %v: out of order", processed)
		}
	}
	if got := c.Committed(t, group, topic)[0]; got != n {
		t.Fatalf("committed %d after processing %d records: the commit must be exactly the processed watermark", got, n)
	}
	time.Sleep(200 * time.Millisecond)
	if after := int64(len(rec.offsets(tp))); after != n {
		t.Fatalf("%d records processed after Run returned", after-n)
	}
	t.Logf("stopped in %v with %d records processed and committed", took, n)
}

// TestByteBudgetBoundsBuffering: with a slow stage and a 4 MiB budget,
// fetched-but-unfinished bytes never exceed the budget plus one fetch
// response.
func TestByteBudgetBoundsBuffering(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "big", 2)
	value := make([]byte, 10<<10)
	for p := int32(0); p < 2; p++ {
		if err := c.ProduceE("big", p, 1000, 50, func(int) []byte { return value }); err != nil { // 20 MiB in all
			t.Fatal(err)
		}
	}
	cfg := fastConfig(c, "g-budget", "big")
	cfg.Consumer.BufferBytes = 4 * pipeline.MiB
	cfg.Consumer.FetchMaxBytes = 1 * pipeline.MiB
	slow := stages.StageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
		time.Sleep(200 * time.Millisecond)
		return in, nil
	})
	r := start(t, cfg, pipeline.WithStage("slow", slow))
	waitFor(t, 10*time.Second, "the pipeline to run", func() bool {
		_, err := r.p.Stats(context.Background())
		return err == nil
	})
	var maxSeen int64
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		st, err := r.p.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		maxSeen = max(maxSeen, st.BufferedBytes)
		time.Sleep(10 * time.Millisecond)
	}
	st, _ := r.p.Stats(context.Background())
	limit := int64(cfg.Consumer.BufferBytes + cfg.Consumer.FetchMaxBytes)
	if st.MaxBufferedBytes > limit || maxSeen > limit {
		t.Fatalf("buffered up to %d bytes (sampled %d), limit %d (budget + one fetch response)", st.MaxBufferedBytes, maxSeen, limit)
	}
	if st.MaxBufferedBytes < int64(cfg.Consumer.BufferBytes)/2 {
		t.Fatalf("buffered only %d bytes: the slow stage never filled the budget, the test proves nothing", st.MaxBufferedBytes)
	}
	t.Logf("max buffered %d bytes (budget %d), %d records processed", st.MaxBufferedBytes, int64(cfg.Consumer.BufferBytes), st.RecordsProcessed)
}

// TestShutdownAbandonsStageIgnoringCancellation: a stage call that ignores
// its context and blocks forever does not hold the shutdown: Run returns
// within shutdown_timeout plus a small bound, with an *AbandonedError
// naming the stage, the stuck record's offset is not committed, and the
// stage is not closed (its call still runs). The
// abandoned goroutine is the stage's call, blocked in the stage's code;
// the test releases it when it ends so goleak finds nothing left.
func TestShutdownAbandonsStageIgnoringCancellation(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	topic, group := c.Name("stuck"), c.Name("g-stuck")
	c.CreateTopic(t, topic, 1)
	c.Produce(t, topic, 0, 20, values("s"))
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var entered atomic.Bool
	deaf := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		for _, r := range in {
			if r.Offset == 12 {
				entered.Store(true)
				<-release // ignores ctx, forever
			}
		}
		return in, nil
	})
	cfg := fastConfig(c, group, topic)
	cfg.ShutdownTimeout = 2 * time.Second
	cfg.Consumer.MaxPartitionFetchBytes = 50 // a few records per batch
	closed := &closeRecorder{Stage: deaf}
	r := start(t, cfg, pipeline.WithStage("deaf", closed))
	waitFor(t, 10*time.Second, "the stage to block on offset 12", entered.Load)
	began := time.Now()
	err := r.shutdown(t)
	took := time.Since(began)
	if took > cfg.ShutdownTimeout+2*time.Second {
		t.Fatalf("Run returned %v after the stop, want within shutdown_timeout (%v) + 2s", took, cfg.ShutdownTimeout)
	}
	var ab *pipeline.AbandonedError
	if !errors.As(err, &ab) || !slices.Equal(ab.Stages, []string{"deaf"}) || !strings.Contains(err.Error(), "ignore cancellation") {
		t.Fatalf("Run returned %v, want an *AbandonedError naming stage deaf", err)
	}
	if got := c.Committed(t, group, topic)[0]; got > 12 {
		t.Fatalf("committed %d: passes the record whose stage call was abandoned (offset 12)", got)
	}
	if closed.closed.Load() {
		t.Fatal("the stage was closed while its call was still running")
	}
	t.Logf("Run returned in %v: %v", took, err)
}

// closeRecorder is a stage that remembers whether it was closed.
type closeRecorder struct {
	stages.Stage
	closed atomic.Bool
}

func (c *closeRecorder) Close(context.Context) error {
	c.closed.Store(true)
	return nil
}
