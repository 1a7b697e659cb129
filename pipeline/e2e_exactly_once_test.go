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

// eosCopy is an exactly_once pipeline copying topic in to topic out, and
// what a test checks of it.
type eosCopy struct {
	c                *kafkatest.Kafka
	in, out, group   string
	partitions       int32
	per              int
	cfg              pipeline.Config
	abortedPositions atomic.Int32 // transaction_aborted resets seen
}

// newEOSCopy creates the topics of a copy of partitions×per records.
func newEOSCopy(t *testing.T, c *kafkatest.Kafka, name string, partitions int32, per int) *eosCopy {
	t.Helper()
	e := &eosCopy{c: c, in: c.Name(name + "-in"), out: c.Name(name + "-out"), group: c.Name("g-" + name),
		partitions: partitions, per: per}
	c.CreateTopic(t, e.in, partitions)
	c.CreateTopic(t, e.out, partitions)
	e.cfg = fastConfig(c, e.group, e.in)
	e.cfg.Guarantee = pipeline.ExactlyOnce
	e.cfg.TransactionTimeout = 10 * time.Second
	return e
}

// start runs a member of the copy; wrap, if set, wraps its copy stage.
func (e *eosCopy) start(t *testing.T, wrap func(stages.Stage) stages.Stage) *running {
	t.Helper()
	out, err := pipeline.NewOutputs(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close() })
	st := copyStage(t, out, e.out)
	if wrap != nil {
		st = wrap(st)
	}
	return start(t, e.cfg, pipeline.WithOutputs(out), pipeline.WithStage("copy", st),
		pipeline.OnReset(func(ev offsetstore.ResetEvent) {
			if ev.Reason == offsetstore.ReasonTransactionAborted {
				e.abortedPositions.Add(1)
			}
		}))
}

// finish waits until every input offset is committed, stops the members
// and checks the output, read read_committed, holds each record once.
func (e *eosCopy) finish(t *testing.T, members ...*running) {
	t.Helper()
	waitFor(t, 30*time.Second, "every offset committed", func() bool {
		got := e.c.Committed(t, e.group, e.in)
		for p := range e.partitions {
			if got[p] != int64(e.per) {
				return false
			}
		}
		return true
	})
	for _, r := range members {
		if err := r.shutdown(t); err != nil {
			t.Fatal(err)
		}
	}
	checkExactlyOnce(t, readCommitted(t, e.c, e.out, int(e.partitions)*e.per), e.partitions, e.per)
}

// Every record's output is written once and committed with its offset.
func TestExactlyOnceCopiesEveryRecordOnce(t *testing.T) {
	exactlyOnceCopiesEveryRecordOnce(t, kafkatest.New(t, 1).Kafka)
}

func exactlyOnceCopiesEveryRecordOnce(t *testing.T, c *kafkatest.Kafka) {
	e := newEOSCopy(t, c, "eos", 3, 300)
	produceInput(t, c, e.in, e.partitions, e.per)
	e.finish(t, e.start(t, nil))
}

// A transaction whose offsets cannot be added in time is aborted: its
// outputs are discarded and its records processed again, so the output
// still holds each record once; the abort is reported as a reset.
func TestExactlyOnceAbortedTransactionIsRedone(t *testing.T) {
	exactlyOnceAbortedTransactionIsRedone(t, kafkatest.New(t, 1).Kafka)
}

func exactlyOnceAbortedTransactionIsRedone(t *testing.T, c *kafkatest.Kafka) {
	e := newEOSCopy(t, c, "eos-abort", 2, 200)
	var held atomic.Int32
	c.Intercept(t, kmsg.TxnOffsetCommit, func(int32, kmsg.Request) kafkatest.Action {
		if held.Add(1) == 1 {
			// the first transaction's offsets arrive after the
			// commit step gave up on them
			return kafkatest.Action{Delay: 7 * time.Second}
		}
		return kafkatest.Action{}
	})
	produceInput(t, c, e.in, e.partitions, e.per)
	e.finish(t, e.start(t, nil))
	if e.abortedPositions.Load() == 0 {
		t.Errorf("no transaction_aborted reset reported (TxnOffsetCommit requests: %d)", held.Load())
	}
}

// Members join and leave while records flow: every revoke commits the
// transaction before the partitions move, a new owner starts from the
// offsets that transaction committed (read with RequireStable), and the
// output holds each record once.
func TestExactlyOnceThroughRebalances(t *testing.T) {
	exactlyOnceThroughRebalances(t, kafkatest.New(t, 2).Kafka)
}

func exactlyOnceThroughRebalances(t *testing.T, c *kafkatest.Kafka) {
	e := newEOSCopy(t, c, "eos-rebalance", 4, 600)
	produced := make(chan error, 1)
	go func() {
		for i := 0; i < e.per; i += 20 {
			for p := range e.partitions {
				if err := c.ProduceE(e.in, p, 20, 20, func(j int) []byte { return []byte(fmt.Sprintf("p%d-%d", p, i+j)) }); err != nil {
					produced <- err
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		produced <- nil
	}()
	a := e.start(t, nil)
	time.Sleep(800 * time.Millisecond)
	b := e.start(t, nil) // a cooperative rebalance: a gives b some partitions
	time.Sleep(800 * time.Millisecond)
	if err := a.shutdown(t); err != nil { // b takes them all
		t.Fatal(err)
	}
	a2 := e.start(t, nil) // and gives some back
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	e.finish(t, a2, b)
	// A commit the group refuses during a rebalance aborts its
	// transaction (Apache Kafka does refuse some; its records are done
	// again): what counts is the output above.
	t.Logf("partitions sent back by aborted transactions: %d", e.abortedPositions.Load())
}

// A transaction held open past transaction_timeout (a stage call that
// ignores its context for longer) is aborted by the broker, which bumps
// the producer's epoch: the run recovers (KIP-588: the abort
// re-initializes the producer) instead of stopping, and the output still
// holds each record once.
func TestExactlyOnceTransactionTimeoutRecovers(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	e := newEOSCopy(t, c, "eos-timeout", 2, 100)
	e.cfg.TransactionTimeout = time.Second
	produceInput(t, c, e.in, e.partitions, e.per)
	var slow atomic.Bool
	r := e.start(t, func(write stages.Stage) stages.Stage {
		return stageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
			recs, err := write.Process(ctx, in)
			if err == nil && slow.CompareAndSwap(false, true) {
				time.Sleep(2500 * time.Millisecond) // its outputs are written; the transaction outlives its timeout
			}
			return recs, err
		})
	})
	e.finish(t, r)
	if e.abortedPositions.Load() == 0 {
		t.Error("no transaction_aborted reset: the stalled transaction was committed")
	}
}
