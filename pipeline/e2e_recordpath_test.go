package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/process"
)

// readAll reads every record of topic with an independent client.
func readAll(t *testing.T, c *kafkatest.Cluster, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := c.Admin.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.ConsumeTopics(topic), kgo.FetchMaxBytes(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records of %s: %v", len(out), want, topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// committed returns the group's committed offset of a partition, -1 if
// there is none (yet).
func committed(c *kafkatest.Cluster, group, topic string, partition int32) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Admin.FetchOffsets(ctx, group)
	if err != nil {
		return -1
	}
	if o, ok := resp.Lookup(topic, partition); ok && o.Err == nil {
		return o.At
	}
	return -1
}

// newProducer opens a producer to topic on c, closed at the end.
func newProducer(t *testing.T, c *kafkatest.Cluster, topic string) *pipeline.Producer {
	t.Helper()
	p, err := pipeline.NewProducer(pipeline.KafkaConfig{Brokers: c.Addrs, MetadataMaxAge: 500 * time.Millisecond}, topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// writeTo is a stage that writes its input to a producer and passes it
// on once acknowledged, as the built-in produce stage does.
func writeTo(p *pipeline.Producer) stages.Stage {
	return stages.StageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
		return in, p.Produce(ctx, in)
	})
}

// rejectValue fails, for good, every record whose value is bad.
func rejectValue(bad string) stages.Stage {
	return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		var re stages.RecordErrors
		for i, r := range in {
			if string(r.Value) == bad {
				re.Fail(i, stages.Permanent(errors.New("value "+bad+" rejected")))
				continue
			}
			re.Emit(i, r)
		}
		if re.Failed() {
			return nil, &re
		}
		return in, nil
	})
}

// TestStopCommitsOnlyWhatEveryStageFinished is the first record-path bug
// found by hand: a pipeline check -> produce, dead_letter policy stop, a
// partition holding [ok, ok, bad, ok]. The records before the bad one
// must reach the output before the commit passes them, the partition
// stops at the bad one, and Run says so.
func TestStopCommitsOnlyWhatEveryStageFinished(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "in", 1)
	c.CreateTopic(t, "out", 1)
	vals := []string{"ok-0", "ok-1", "bad", "ok-3"}
	c.Produce(t, "in", 0, len(vals), func(i int) []byte { return []byte(vals[i]) })
	ev := &events{}
	cfg := fastConfig(c, "g-stop", "in")
	r := start(t, cfg, append(ev.options(),
		pipeline.WithStage("check", rejectValue("bad")),
		pipeline.WithStage("produce", writeTo(newProducer(t, c, "out"))),
		pipeline.WithOutputTopics("out"))...)
	waitFor(t, 10*time.Second, "the partition to stop", func() bool { return ev.stoppedCount() == 1 })
	waitFor(t, 10*time.Second, "the commit of the records before the bad one", func() bool { return committed(c, "g-stop", "in", 0) == 2 })

	out := readAll(t, c, "out")
	if len(out) != 2 || string(out[0].Value) != "ok-0" || string(out[1].Value) != "ok-1" {
		t.Fatalf("output %d records, want ok-0 and ok-1 written before their commit", len(out))
	}
	st, err := r.p.Stats(context.Background())
	if err != nil || st.StoppedPartitions != 1 || st.Partitions[0].State != pipeline.Stopped {
		t.Fatalf("stats %+v %v: want one stopped partition", st, err)
	}
	err = r.shutdown(t)
	var stopped *pipeline.StoppedPartitionsError
	var why *process.StoppedError
	if !errors.As(err, &stopped) || len(stopped.Partitions) != 1 || !errors.As(err, &why) || why.Failed != 2 || why.Stage != "check" {
		t.Fatalf("Run: %v, want a StoppedPartitionsError for in/0 stopped by check at offset 2", err)
	}
	if got := c.Committed(t, "g-stop", "in")[0]; got != 2 {
		t.Fatalf("committed %d after the stop, want 2", got)
	}
}

// TestRecordTooLargeForEveryOutput: a record the input topic accepted but
// the output and dead-letter topics refuse (too large). With a
// dead-letter topic, a truncated dead letter stands for it and the
// partition goes on; with the stop policy, the partition stops saying
// why. Neither waits forever.
func TestRecordTooLargeForEveryOutput(t *testing.T) {
	for _, policy := range []pipeline.DeadLetterPolicy{pipeline.DeadLetterTopic, pipeline.DeadLetterStop} {
		t.Run(string(policy), func(t *testing.T) {
			c := kafkatest.New(t, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			big := "4194304"
			if _, err := c.Admin.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &big}, "in"); err != nil {
				t.Fatal(err)
			}
			c.CreateTopic(t, "out", 1)
			c.CreateTopic(t, "dlq", 1)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.ProducerBatchMaxBytes(8<<20), kgo.ProducerLinger(0))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			large := make([]byte, 1536<<10)
			for i, v := range [][]byte{[]byte("small-0"), large, []byte("small-2")} {
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Key: []byte{byte('a' + i)}, Value: v}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			ev := &events{}
			cfg := fastConfig(c, "g-large-"+string(policy), "in")
			cfg.DeadLetter = pipeline.DeadLetterConfig{Policy: policy, Retries: 1, Backoff: 10 * time.Millisecond}
			if policy == pipeline.DeadLetterTopic {
				cfg.DeadLetter.Topic = "dlq"
			}
			began := time.Now()
			r := start(t, cfg, append(ev.options(), pipeline.WithStage("produce", writeTo(newProducer(t, c, "out"))),
				pipeline.WithOutputTopics("out"))...)
			if policy == pipeline.DeadLetterStop {
				waitFor(t, 15*time.Second, "the partition to stop", func() bool { return ev.stoppedCount() == 1 })
				err := r.shutdown(t)
				var stopped *pipeline.StoppedPartitionsError
				if !errors.As(err, &stopped) || !strings.Contains(strings.ToLower(err.Error()), "too large") {
					t.Fatalf("Run: %v, want the partition stopped because the record is too large", err)
				}
				if got := c.Committed(t, cfg.Consumer.Group, "in")[0]; got != 1 {
					t.Fatalf("committed %d, want 1 (up to the large record)", got)
				}
				return
			}
			waitFor(t, 15*time.Second, "everything committed", func() bool { return committed(c, cfg.Consumer.Group, "in", 0) == 3 })
			if d := time.Since(began); d > 10*time.Second {
				t.Errorf("the large record held the partition for %v", d)
			}
			dl := readAll(t, c, "dlq")
			if len(dl) != 1 {
				t.Fatalf("%d dead letters, want 1", len(dl))
			}
			headers := map[string]string{}
			for _, h := range dl[0].Headers {
				headers[h.Key] = string(h.Value)
			}
			if headers[process.HeaderTruncated] != "true" || headers[process.HeaderSourceSize] != "1572865" ||
				headers[process.HeaderSourceOffset] != "1" || headers[process.HeaderStage] != "produce" || len(dl[0].Value) != 0 {
				t.Fatalf("dead letter %q (value %d bytes), want a truncated one for offset 1 of 1572865 bytes", headers, len(dl[0].Value))
			}
			if out := readAll(t, c, "out"); len(out) != 2 {
				t.Fatalf("%d records written, want the two small ones", len(out))
			}
			if err := r.shutdown(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMissingOutputTopics: a dead-letter or output topic that does not
// exist fails the start at once, naming it; kafka.create_topics creates
// it instead.
func TestMissingOutputTopics(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "in", 1)
	cfg := fastConfig(c, "g-missing", "in")
	cfg.DeadLetter.Topic = "no-dlq"
	p, err := pipeline.New(cfg, pipeline.WithOutputTopics("no-out"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = p.Run(ctx)
	for _, want := range []string{`dead_letter.topic: topic "no-dlq" does not exist`, `output topic: topic "no-out" does not exist`, "kafka.create_topics"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run: %v, want it to say %q", err, want)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("Run waited for the context instead of failing at start")
	}

	cfg.Kafka.CreateTopics = true
	r := start(t, cfg, pipeline.WithOutputTopics("no-out"), pipeline.WithStage("nop", stages.StageFunc(
		func(_ context.Context, in []stages.Record) ([]stages.Record, error) { return in, nil })))
	waitFor(t, 10*time.Second, "the topics to be created", func() bool {
		topics, err := c.Admin.ListTopics(context.Background(), "no-dlq", "no-out")
		return err == nil && topics.Has("no-dlq") && topics.Has("no-out") && topics.Error() == nil
	})
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
}

// TestProducerCloseReleasesEverything: a Producer leaves no goroutine or
// connection behind once closed.
func TestProducerCloseReleasesEverything(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 2)
	before := goleak.IgnoreCurrent()
	p, err := pipeline.NewProducer(pipeline.KafkaConfig{Brokers: c.Addrs}, "out")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Produce(ctx, []stages.Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}
