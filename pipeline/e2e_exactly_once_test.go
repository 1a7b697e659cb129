package pipeline_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// copyStage writes every record to the output topic through out and
// passes it on, as the built-in produce stage does.
func copyStage(t testing.TB, out *pipeline.Outputs, topic string) stages.Stage {
	t.Helper()
	prod, err := out.Producer(topic)
	if err != nil {
		t.Fatal(err)
	}
	return stageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
		recs := make([]stages.Record, len(in))
		for i, r := range in {
			recs[i] = stages.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
		}
		if err := prod.Produce(ctx, recs); err != nil {
			return nil, err
		}
		return in, nil
	})
}

// readCommitted returns how many times each value appears in topic,
// read read_committed from the start to the end, within 20s.
func readCommitted(t testing.TB, c *kafkatest.Kafka, topic string, want int) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int{}
	n := 0
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for n < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; n++ })
	}
	// anything beyond want would be a duplicate: look a moment longer
	qctx, qcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer qcancel()
	cl.PollFetches(qctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	return seen
}

func checkExactlyOnce(t *testing.T, seen map[string]int, partitions int32, perPartition int) {
	t.Helper()
	missing, dups := 0, 0
	for p := range partitions {
		for i := range perPartition {
			switch n := seen[fmt.Sprintf("p%d-%d", p, i)]; {
			case n == 0:
				missing++
			case n > 1:
				dups += n - 1
			}
		}
	}
	if missing > 0 || dups > 0 || len(seen) != int(partitions)*perPartition {
		t.Fatalf("output read_committed: %d missing, %d duplicates, %d distinct of %d", missing, dups, len(seen), int(partitions)*perPartition)
	}
}

func produceInput(t *testing.T, c *kafkatest.Kafka, topic string, partitions int32, perPartition int) {
	t.Helper()
	for p := range partitions {
		if err := c.ProduceE(topic, p, perPartition, 50, func(i int) []byte { return []byte(fmt.Sprintf("p%d-%d", p, i)) }); err != nil {
			t.Fatal(err)
		}
	}
}

func exactlyOnceConfig(c *kafkatest.Kafka, group string, topics ...string) pipeline.Config {
	cfg := fastConfig(c, group, topics...)
	cfg.Guarantee = pipeline.ExactlyOnce
	cfg.TransactionTimeout = 10 * time.Second
	return cfg
}

func waitCommitted(t *testing.T, c *kafkatest.Kafka, group, topic string, partitions int32, want int64) {
	t.Helper()
	waitFor(t, 30*time.Second, "every offset committed", func() bool {
		got := c.Committed(t, group, topic)
		for p := range partitions {
			if got[p] != want {
				return false
			}
		}
		return true
	})
}

// Every record's output is written once and committed with its offset.
func TestExactlyOnceCopiesEveryRecordOnce(t *testing.T) {
	exactlyOnceCopiesEveryRecordOnce(t, kafkatest.New(t, 1).Kafka)
}

func exactlyOnceCopiesEveryRecordOnce(t *testing.T, c *kafkatest.Kafka) {
	in, outT, group := c.Name("in"), c.Name("out"), c.Name("g-eos")
	const partitions, per = 3, 300
	c.CreateTopic(t, in, partitions)
	c.CreateTopic(t, outT, partitions)
	produceInput(t, c, in, partitions, per)
	cfg := exactlyOnceConfig(c, group, in)
	out, err := pipeline.NewOutputs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	r := start(t, cfg, pipeline.WithOutputs(out), pipeline.WithStage("copy", copyStage(t, out, outT)))
	waitCommitted(t, c, group, in, partitions, per)
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, readCommitted(t, c, outT, partitions*per), partitions, per)
}

// A transaction whose offsets cannot be added in time is aborted: its
// outputs are discarded and its records processed again, so the output
// still holds each record once; the abort is reported as a reset.
func TestExactlyOnceAbortedTransactionIsRedone(t *testing.T) {
	exactlyOnceAbortedTransactionIsRedone(t, kafkatest.New(t, 1).Kafka)
}

func exactlyOnceAbortedTransactionIsRedone(t *testing.T, c *kafkatest.Kafka) {
	in, outT, group := c.Name("in"), c.Name("out"), c.Name("g-eos-abort")
	const partitions, per = 2, 200
	c.CreateTopic(t, in, partitions)
	c.CreateTopic(t, outT, partitions)
	var held atomic.Int32
	c.Intercept(t, kmsg.TxnOffsetCommit, func(int32, kmsg.Request) kafkatest.Action {
		if held.Add(1) == 1 {
			// the first transaction's offsets arrive after the
			// commit step gave up on them
			return kafkatest.Action{Delay: 7 * time.Second}
		}
		return kafkatest.Action{}
	})
	produceInput(t, c, in, partitions, per)
	cfg := exactlyOnceConfig(c, group, in)
	out, err := pipeline.NewOutputs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var aborted atomic.Int32
	r := start(t, cfg, pipeline.WithOutputs(out), pipeline.WithStage("copy", copyStage(t, out, outT)),
		pipeline.OnReset(func(e offsetstore.ResetEvent) {
			if e.Reason == offsetstore.ReasonTransactionAborted {
				aborted.Add(1)
			}
		}))
	waitCommitted(t, c, group, in, partitions, per)
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	if aborted.Load() == 0 {
		t.Errorf("no transaction_aborted reset reported (TxnOffsetCommit requests: %d)", held.Load())
	}
	checkExactlyOnce(t, readCommitted(t, c, outT, partitions*per), partitions, per)
}

// Members join and leave while records flow: every revoke commits the
// transaction before the partitions move, a new owner starts from the
// offsets that transaction committed (read with RequireStable), and the
// output holds each record once.
func TestExactlyOnceThroughRebalances(t *testing.T) {
	exactlyOnceThroughRebalances(t, kafkatest.New(t, 2).Kafka)
}

func exactlyOnceThroughRebalances(t *testing.T, c *kafkatest.Kafka) {
	in, outT, group := c.Name("in"), c.Name("out"), c.Name("g-eos-rebalance")
	const partitions, per = 4, 600
	c.CreateTopic(t, in, partitions)
	c.CreateTopic(t, outT, partitions)
	produced := make(chan error, 1)
	go func() {
		for i := 0; i < per; i += 20 {
			for p := range int32(partitions) {
				if err := c.ProduceE(in, p, 20, 20, func(j int) []byte { return []byte(fmt.Sprintf("p%d-%d", p, i+j)) }); err != nil {
					produced <- err
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		produced <- nil
	}()
	cfg := exactlyOnceConfig(c, group, in)
	member := func() *running {
		out, err := pipeline.NewOutputs(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = out.Close() })
		return start(t, cfg, pipeline.WithOutputs(out), pipeline.WithStage("copy", copyStage(t, out, outT)))
	}
	a := member()
	time.Sleep(800 * time.Millisecond)
	b := member() // a cooperative rebalance: a gives b some partitions
	time.Sleep(800 * time.Millisecond)
	if err := a.shutdown(t); err != nil { // b takes them all
		t.Fatal(err)
	}
	a2 := member() // and gives some back
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, c, group, in, partitions, per)
	for _, r := range []*running{a2, b} {
		if err := r.shutdown(t); err != nil {
			t.Fatal(err)
		}
	}
	checkExactlyOnce(t, readCommitted(t, c, outT, partitions*per), partitions, per)
}

// A transaction held open past transaction_timeout (a stage call that
// ignores its context for longer) is aborted by the broker, which bumps
// the producer's epoch: the run recovers (KIP-588: the abort
// re-initializes the producer) instead of stopping, and the output still
// holds each record once.
func TestExactlyOnceTransactionTimeoutRecovers(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	in, outT, group := c.Name("in"), c.Name("out"), c.Name("g-eos-timeout")
	const partitions, per = 2, 100
	c.CreateTopic(t, in, partitions)
	c.CreateTopic(t, outT, partitions)
	produceInput(t, c, in, partitions, per)
	cfg := exactlyOnceConfig(c, group, in)
	cfg.TransactionTimeout = time.Second
	out, err := pipeline.NewOutputs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	write := copyStage(t, out, outT)
	var slow atomic.Bool
	stall := stageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
		recs, err := write.Process(ctx, in)
		if err == nil && slow.CompareAndSwap(false, true) {
			time.Sleep(2500 * time.Millisecond) // its outputs are written; the transaction outlives its timeout
		}
		return recs, err
	})
	var aborted atomic.Int32
	r := start(t, cfg, pipeline.WithOutputs(out), pipeline.WithStage("copy", stall),
		pipeline.OnReset(func(e offsetstore.ResetEvent) {
			if e.Reason == offsetstore.ReasonTransactionAborted {
				aborted.Add(1)
			}
		}))
	waitCommitted(t, c, group, in, partitions, per)
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	if aborted.Load() == 0 {
		t.Error("no transaction_aborted reset: the stalled transaction was committed")
	}
	checkExactlyOnce(t, readCommitted(t, c, outT, partitions*per), partitions, per)
}
