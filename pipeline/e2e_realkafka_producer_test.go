//go:build realkafka

package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/partitioner"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// producerKeysAndAcks: on Apache Kafka, Producer (at_least_once's
// output, an idempotent producer) writes every record once, a key on the
// partition the Java producer gives it (murmur2), in order within the
// partition, from concurrent calls.
func producerKeysAndAcks(t *testing.T, c *kafkatest.Kafka) {
	topic := c.Name("out")
	c.CreateTopic(t, topic, 6)
	p, err := pipeline.NewProducer(pipeline.KafkaConfig{Brokers: c.Bootstrap()}, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const calls, per = 8, 250
	errs := make(chan error, calls)
	for w := range calls {
		go func() {
			recs := make([]stages.Record, per)
			for i := range recs {
				recs[i] = stages.Record{Key: fmt.Appendf(nil, "k%d", i%37), Value: fmt.Appendf(nil, "%d/%d", w, i)}
			}
			errs <- p.Produce(ctx, recs)
		}()
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	last := map[string]int{} // per writer and key: the last index read
	for len(seen) < calls*per && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if seen[string(r.Value)] {
				t.Fatalf("%s read twice", r.Value)
			}
			seen[string(r.Value)] = true
			if want := partitioner.Murmur2(r.Key, 6); want != r.Partition {
				t.Fatalf("key %s on partition %d, murmur2 says %d", r.Key, r.Partition, want)
			}
			var w, i int
			fmt.Sscanf(string(r.Value), "%d/%d", &w, &i)
			k := fmt.Sprintf("%d/%s", w, r.Key)
			if prev, ok := last[k]; ok && i < prev {
				t.Fatalf("writer %d key %s: record %d after %d", w, r.Key, i, prev)
			}
			last[k] = i
		})
	}
	if len(seen) != calls*per {
		t.Fatalf("read %d records, want %d", len(seen), calls*per)
	}
}
