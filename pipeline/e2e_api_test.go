package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestSeekPauseResume drives the application API against a running
// pipeline.
func TestSeekPauseResume(t *testing.T) {
	tp := offsetstore.TopicPartition{Topic: "api", Partition: 0}
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "api", 1)
	c.Produce(t, "api", 0, 20, values("a"))
	rec := newRecorder()
	ev := &events{}
	r := start(t, fastConfig(c, "g-api", "api"), append(ev.options(), pipeline.WithStage("record", rec))...)
	ctx := context.Background()
	waitFor(t, 10*time.Second, "20 records", func() bool { return rec.total() == 20 })

	// Seek back to 15: 15..19 are processed again, and a seek reset is
	// reported.
	if err := r.p.Seek(ctx, tp, offsetstore.Exact(15)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the replay", func() bool { return rec.total() == 25 })
	got := rec.offsets(tp)
	if !slices.Equal(got[20:], seq(15, 20)) {
		t.Fatalf("after seek to 15 processed %v", got[20:])
	}
	rs := ev.resetsOf(tp)
	if last := rs[len(rs)-1]; last.Reason != offsetstore.ReasonSeek || last.From != 20 || last.To != 15 || last.Skipped != 0 {
		t.Fatalf("seek reset %+v, want seek 20 -> 15", last)
	}

	// Pause: new records are not processed until Resume.
	if err := r.p.Pause(ctx, tp); err != nil {
		t.Fatal(err)
	}
	c.Produce(t, "api", 0, 5, values("b"))
	time.Sleep(400 * time.Millisecond)
	if n := rec.total(); n != 25 {
		t.Fatalf("%d records processed while paused, want 25", n)
	}
	st, err := r.p.Stats(ctx)
	if err != nil || len(st.Partitions) != 1 || !st.Partitions[0].Paused {
		t.Fatalf("stats %+v %v: want the partition paused", st.Partitions, err)
	}
	if err := r.p.Resume(ctx, tp); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "records after resume", func() bool { return rec.total() == 30 })

	// Flush commits the watermark now; Seek of a partition not assigned
	// here says so.
	if err := r.p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.Committed(t, "g-api", "api")[0]; got != 25 {
		t.Fatalf("committed %d after flush, want 25", got)
	}
	err = r.p.Seek(ctx, offsetstore.TopicPartition{Topic: "api", Partition: 7}, offsetstore.Earliest())
	if !errors.Is(err, pipeline.ErrNotAssigned) {
		t.Fatalf("seek of an unassigned partition: %v, want ErrNotAssigned", err)
	}
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	if err := r.p.Pause(ctx, tp); !errors.Is(err, pipeline.ErrNotRunning) {
		t.Fatalf("pause after stop: %v, want ErrNotRunning", err)
	}
	if err := r.p.Run(ctx); !errors.Is(err, pipeline.ErrAlreadyStarted) {
		t.Fatalf("second Run: %v, want ErrAlreadyStarted", err)
	}
}

// TestCompressedBatches: batches compressed with every codec Kafka has
// are read, and records below the requested offset (the broker returns
// whole batches) are skipped.
func TestCompressedBatches(t *testing.T) {
	codecs := map[string]kgo.CompressionCodec{
		"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(), "none": kgo.NoCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			tp := offsetstore.TopicPartition{Topic: "z", Partition: 0}
			c := kafkatest.New(t, 1)
			c.CreateTopic(t, "z", 1)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerBatchCompression(codec))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			for b := 0; b < 3; b++ { // three batches of ten records
				recs := make([]*kgo.Record, 10)
				for i := range recs {
					recs[i] = &kgo.Record{Topic: "z", Partition: 0, Value: []byte(fmt.Sprintf("%s-%d-%d", name, b, i)),
						Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}}
				}
				if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			// start mid-batch: offsets 0..14 must not be processed
			c.CommitOffsets(t, "g-"+name, "z", map[int32]int64{0: 15})
			rec := newRecorder()
			var values []string
			var headersOK = true
			check := stageFunc(func(ctx context.Context, in []stagesRecord) ([]stagesRecord, error) {
				for _, r := range in {
					values = append(values, string(r.Value))
					if h, ok := r.Header("h"); !ok || string(h) != "v" {
						headersOK = false
					}
				}
				return rec.Process(ctx, in)
			})
			cfg := fastConfig(c, "g-"+name, "z")
			cfg.Consumer.Concurrency = 1
			r := start(t, cfg, pipeline.WithStage("check", check))
			waitFor(t, 10*time.Second, "15 records", func() bool { return rec.total() >= 15 })
			if err := r.shutdown(t); err != nil {
				t.Fatal(err)
			}
			if got := rec.offsets(tp); !slices.Equal(got, seq(15, 30)) {
				t.Fatalf("processed %v, want 15..29", got)
			}
			if values[0] != name+"-1-5" || values[14] != name+"-2-9" || !headersOK {
				t.Fatalf("values %q..%q headers ok %v", values[0], values[14], headersOK)
			}
		})
	}
}

type closingStage struct {
	stageFunc
	closed chan struct{}
}

func (c closingStage) Close(context.Context) error { close(c.closed); return nil }

// TestStagesClosedAfterRun: a stage holding resources is closed once,
// after Run's last Process call.
func TestStagesClosedAfterRun(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "close", 1)
	c.Produce(t, "close", 0, 3, values("c"))
	rec := newRecorder()
	st := closingStage{stageFunc: rec.Process, closed: make(chan struct{})}
	r := start(t, fastConfig(c, "g-close", "close"), pipeline.WithStage("closing", st))
	waitFor(t, 10*time.Second, "records", func() bool { return rec.total() == 3 })
	select {
	case <-st.closed:
		t.Fatal("stage closed while running")
	default:
	}
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.closed:
	default:
		t.Fatal("stage not closed after Run returned")
	}
}
