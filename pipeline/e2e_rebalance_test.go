package pipeline_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// processingLog records which member processed which record, in the
// order processing happened.
type processingLog struct {
	mu      sync.Mutex
	entries []processed
}

type processed struct {
	member string
	tp     offsetstore.TopicPartition
	offset int64
}

func (l *processingLog) stage(member string) stages.Stage {
	return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		l.mu.Lock()
		for _, r := range in {
			l.entries = append(l.entries, processed{member, offsetstore.TopicPartition{Topic: r.Topic, Partition: r.Partition}, r.Offset})
		}
		l.mu.Unlock()
		return in, nil
	})
}

func (l *processingLog) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[processed]bool{}
	for _, e := range l.entries {
		seen[processed{tp: e.tp, offset: e.offset}] = true
	}
	return len(seen)
}

// TestRebalanceUnderLoad: two members consume while a producer runs; a
// third joins, then one leaves. Nothing is lost; since every revoke drains
// and commits before the partition moves, nothing is processed twice
// either; no commit of an old generation reaches the broker; and once a
// partition moved to a new owner, its old owner processes none of it.
func TestRebalanceUnderLoad(t *testing.T) {
	rebalanceUnderLoad(t, kafkatest.New(t, 2).Kafka)
}

func rebalanceUnderLoad(t *testing.T, c *kafkatest.Kafka) {
	const partitions, perPartition = 6, 400
	topic, group := c.Name("load"), c.Name("g-load")
	c.CreateTopic(t, topic, partitions)

	// Watch the group from the broker: the generation each member syncs
	// into, and the generation of every commit. A member never sends a
	// commit of a generation older than one it synced into. (With
	// cooperative rebalancing a member keeps committing the partitions
	// it keeps while the others rejoin, under the generation it knows:
	// the broker fences such a commit once a newer one exists, and the
	// member commits again after it joins the new one.)
	var latestSync atomic.Int32
	var mu sync.Mutex
	synced := map[string]int32{} // member id -> latest generation it synced into
	var commits, staleCommits atomic.Int32
	c.Intercept(t, kmsg.SyncGroup, func(_ int32, req kmsg.Request) kafkatest.Action {
		r := req.(*kmsg.SyncGroupRequest)
		mu.Lock()
		synced[r.MemberID] = max(synced[r.MemberID], r.Generation)
		mu.Unlock()
		if r.Generation > latestSync.Load() {
			latestSync.Store(r.Generation)
		}
		return kafkatest.Action{}
	})
	c.Intercept(t, kmsg.OffsetCommit, func(_ int32, req kmsg.Request) kafkatest.Action {
		r := req.(*kmsg.OffsetCommitRequest)
		commits.Add(1)
		mu.Lock()
		if r.Generation < synced[r.MemberID] {
			staleCommits.Add(1)
		}
		mu.Unlock()
		return kafkatest.Action{}
	})

	log := &processingLog{}
	cfg := fastConfig(c, group, topic)
	// Members join and leave gracefully here; a session far longer than
	// the test keeps a member starved of CPU (the race detector on a
	// loaded 2-core machine) from losing its session, which releases its
	// partitions without a commit and rightly repeats their records.
	cfg.Consumer.SessionTimeout, cfg.Consumer.RebalanceTimeout = 10*time.Second, 10*time.Second
	member := func(name string) *running {
		return start(t, cfg, pipeline.WithStage("log", log.stage(name)))
	}

	produced := make(chan error, 1)
	go func() {
		for i := 0; i < perPartition; i += 20 {
			for p := int32(0); p < partitions; p++ {
				if err := c.ProduceE(topic, p, 20, 5, values(fmt.Sprint(i))); err != nil {
					produced <- err
					return
				}
			}
			time.Sleep(15 * time.Millisecond)
		}
		produced <- nil
	}()

	a, b := member("a"), member("b")
	waitFor(t, 20*time.Second, "records to flow", func() bool { return log.distinct() > 300 })
	cm := member("c")
	waitFor(t, 20*time.Second, "more records", func() bool { return log.distinct() > 1200 })
	if err := a.shutdown(t); err != nil {
		t.Fatalf("member a: %v", err)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "every record", func() bool { return log.distinct() == partitions*perPartition })
	waitFor(t, 10*time.Second, "final commits", func() bool {
		got := c.Committed(t, group, topic)
		for p := int32(0); p < partitions; p++ {
			if got[p] != perPartition {
				return false
			}
		}
		return true
	})
	for _, m := range []*running{b, cm} {
		if err := m.shutdown(t); err != nil {
			t.Fatal(err)
		}
	}

	if n := staleCommits.Load(); n != 0 {
		t.Fatalf("%d of %d commits reached the broker with a generation older than one their member had synced into", n, commits.Load())
	}
	if latestSync.Load() < 3 {
		t.Fatalf("only %d generations: the rebalances did not happen", latestSync.Load())
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	byTP := map[offsetstore.TopicPartition][]processed{}
	for _, e := range log.entries {
		byTP[e.tp] = append(byTP[e.tp], e)
	}
	owners := map[string]bool{}
	for tp, es := range byTP {
		// Offsets continue from owner to owner: no duplicate, no gap, so
		// no old owner processed a record after the partition moved.
		for i, e := range es {
			if e.offset != int64(i) {
				t.Fatalf("%s: record %d processed is offset %d (by %s): duplicates or overlap between owners", tp, i, e.offset, e.member)
			}
			owners[e.member] = true
		}
		if len(es) != perPartition {
			t.Fatalf("%s: %d records processed, want %d", tp, len(es), perPartition)
		}
	}
	names := make([]string, 0, len(owners))
	for o := range owners {
		names = append(names, o)
	}
	sort.Strings(names)
	if len(names) != 3 {
		t.Fatalf("owners %v: every member should have owned partitions", names)
	}
}

// TestAddedPartitionsAreConsumed: partitions added to a consumed topic
// are picked up by a rebalance, without a restart.
func TestAddedPartitionsAreConsumed(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "grow", 1)
	c.Produce(t, "grow", 0, 3, values("g"))
	rec := newRecorder()
	r := start(t, fastConfig(c, "g-grow", "grow"), pipeline.WithStage("record", rec))
	waitFor(t, 10*time.Second, "the first partition", func() bool { return rec.total() == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Admin.CreatePartitions(ctx, 2, "grow"); err != nil {
		t.Fatal(err)
	}
	c.Produce(t, "grow", 1, 4, values("h"))
	waitFor(t, 15*time.Second, "the added partition", func() bool {
		return len(rec.offsets(offsetstore.TopicPartition{Topic: "grow", Partition: 1})) == 4
	})
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
}
