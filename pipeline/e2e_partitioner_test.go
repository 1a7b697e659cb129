package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/partitioner"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestOutputsPlaceKeys: a pipeline writes each keyed output record and
// dead letter to the partition of 7 that kafka.partitioner gives its
// key, murmur2 (where the Java producer puts it) by default and fnv1a
// when configured, under both guarantees: through Outputs (each topic's
// own producer under at_least_once, the transactional producer under
// exactly_once) and the dead-letter producer (its own, or the
// transaction's).
func TestOutputsPlaceKeys(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	for _, g := range []pipeline.Guarantee{pipeline.AtLeastOnce, pipeline.ExactlyOnce} {
		for _, tt := range []struct {
			name  string
			p     pipeline.Partitioner
			place partitioner.Func
		}{{"default", "", partitioner.Murmur2}, {"fnv1a", pipeline.PartitionerFNV1a, partitioner.FNV1a}} {
			name := string(g) + "-" + tt.name
			t.Run(name, func(t *testing.T) { outputsPlaceKeys(t, c.Named(name+"-"), g, tt.p, tt.place) })
		}
	}
}

func outputsPlaceKeys(t *testing.T, c *kafkatest.Kafka, g pipeline.Guarantee, p pipeline.Partitioner, place partitioner.Func) {
	in, out, dlq, group := c.Name("in"), c.Name("out"), c.Name("dlq"), c.Name("g")
	c.CreateTopic(t, in, 2)
	c.CreateTopic(t, out, 7)
	c.CreateTopic(t, dlq, 7)
	const n = 300 // every tenth is dead-lettered
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: in, Partition: int32(i % 2), Key: fmt.Appendf(nil, "src-%d", i), Value: fmt.Appendf(nil, "user-%d", i)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(c, group, in)
	cfg.Guarantee = g
	cfg.Kafka.Partitioner = p
	cfg.DeadLetter = pipeline.DeadLetterConfig{Topic: dlq, Retries: -1}
	outputs, err := pipeline.NewOutputs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = outputs.Close() })
	prod, err := outputs.Producer(out)
	if err != nil {
		t.Fatal(err)
	}
	reject := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		var re stages.RecordErrors
		for i, r := range in {
			if k, _ := strconv.Atoi(strings.TrimPrefix(string(r.Value), "user-")); k%10 == 0 {
				re.Fail(i, stages.Permanent(errors.New("rejected")))
				continue
			}
			re.Emit(i, r)
		}
		if re.Failed() {
			return nil, &re
		}
		return in, nil
	})
	// keyed by the value, as "map key: json.user" keys a record by a
	// field of its value
	rekey := stages.StageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
		w := make([]stages.Record, len(in))
		for i, r := range in {
			w[i] = stages.Record{Key: r.Value, Value: r.Value}
		}
		if err := prod.Produce(ctx, w); err != nil {
			return nil, err
		}
		return in, nil
	})
	r := start(t, cfg, pipeline.WithOutputs(outputs), pipeline.WithStage("reject", reject), pipeline.WithStage("rekey", rekey))
	waitFor(t, 30*time.Second, "every offset committed", func() bool {
		got := c.Committed(t, group, in)
		return got[0] == n/2 && got[1] == n/2
	})
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	moved := 0 // keys the other placement would have put elsewhere
	for _, topic := range []struct {
		name string
		n    int
	}{{out, n - n/10}, {dlq, n / 10}} {
		got := readCommittedRecords(t, c, topic.name, topic.n)
		seen := map[string]bool{}
		for _, rec := range got {
			seen[string(rec.Value)] = true
			if want := place(rec.Key, 7); rec.Partition != want {
				t.Errorf("%s: key %s on partition %d, want %d", topic.name, rec.Key, rec.Partition, want)
			}
			if partitioner.Murmur2(rec.Key, 7) != partitioner.FNV1a(rec.Key, 7) {
				moved++
			}
		}
		if len(seen) != topic.n {
			t.Errorf("%s holds %d distinct records, want %d", topic.name, len(seen), topic.n)
		}
	}
	if moved == 0 {
		t.Fatal("no key is placed differently by murmur2 and fnv1a: the test tells nothing")
	}
}

// readCommittedRecords reads topic read_committed from the start until
// it has n records, or 20s passed.
func readCommittedRecords(t *testing.T, c *kafkatest.Kafka, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}
