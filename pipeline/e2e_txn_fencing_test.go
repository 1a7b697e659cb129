package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/stages"
)

// Two exactly_once processes started with the same group_instance_id share
// one transactional id: each InitProducerID fences the other. The older
// one must stop promptly with an error naming the duplicate
// group_instance_id, not take the id back and fence the newer one in
// turn (which fenced both for seconds, until a heartbeat saw
// FENCED_INSTANCE_ID). The heartbeat interval is the default's 3s here,
// so the group's heartbeat alone is not what stops it in time.
func TestExactlyOnceDuplicateInstanceStops(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	e := newEOSCopy(t, c, "eos-dup", 2, 0) // (input fed below)
	e.cfg.Consumer.GroupInstanceID = "dup-1"
	e.cfg.Consumer.HeartbeatInterval = 3 * time.Second
	e.cfg.Consumer.SessionTimeout = 10 * time.Second
	e.cfg.Consumer.RebalanceTimeout = 30 * time.Second
	// input keeps coming, so both processes keep writing
	slow := func(write stages.Stage) stages.Stage {
		return stageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
			time.Sleep(10 * time.Millisecond)
			return write.Process(ctx, in)
		})
	}
	feed, stopFeed := context.WithCancel(context.Background())
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for i := 0; feed.Err() == nil; i++ {
			for p := range e.partitions {
				if err := c.ProduceE(e.in, p, 10, 10, values(fmt.Sprintf("p%d-%d", p, i))); err != nil && feed.Err() == nil {
					t.Errorf("feeding the input: %v", err)
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { stopFeed(); <-fed }()
	a := e.start(t, slow)
	waitFor(t, 20*time.Second, "the first process to commit", func() bool {
		got := e.c.Committed(t, e.group, e.in)
		return got[0] > 0 || got[1] > 0
	})
	started := time.Now()
	b := e.start(t, slow)
	var stopped *running
	var err error
	deadline := time.After(2500 * time.Millisecond) // below the 3s heartbeat interval
	select {
	case err = <-a.done:
		stopped = a
		a.done <- err
	case err = <-b.done:
		stopped = b
		b.done <- err
	case <-deadline:
		sa, _ := a.p.Stats(context.Background())
		sb, _ := b.p.Stats(context.Background())
		t.Fatalf("two processes with group_instance_id dup-1 both still run %v after the second started "+
			"(transactions aborted: first %d, second %d): a producer fenced by another instance with the same "+
			"transactional id must stop its run", time.Since(started).Round(time.Millisecond),
			sa.TransactionsAborted, sb.TransactionsAborted)
	}
	t.Logf("stopped after %v: %v", time.Since(started).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), `"dup-1"`) || !strings.Contains(err.Error(), "group_instance_id") {
		t.Errorf("the stopped process's error does not name group_instance_id %q: %v", "dup-1", err)
	}
	if stopped != a {
		t.Errorf("the newer process stopped; the older one (fenced by the newer one's InitProducerID) should")
	}
	// the survivor goes on committing, without being fenced again
	survivor := b
	if stopped == b {
		survivor = a
	}
	s0, _ := survivor.p.Stats(context.Background())
	before := e.c.Committed(t, e.group, e.in)
	time.Sleep(time.Second)
	after := e.c.Committed(t, e.group, e.in)
	if after[0] <= before[0] && after[1] <= before[1] {
		t.Errorf("the surviving process committed nothing in the second after the other stopped: %v -> %v", before, after)
	}
	s1, _ := survivor.p.Stats(context.Background())
	if n := s1.TransactionsAborted - s0.TransactionsAborted; n > 0 {
		t.Errorf("the surviving process aborted %d transactions after the other stopped", n)
	}
	t.Logf("transactions aborted by the survivor: %d", s1.TransactionsAborted)
}

// The group coordinator answering FENCED_INSTANCE_ID to a transaction's
// offsets, while the member's id is still the one it sent, means another
// member registered this group_instance_id: the run stops with an error
// naming it, instead of aborting and trying again.
func TestExactlyOnceFencedInstanceOffsetsStop(t *testing.T) {
	kc := kafkatest.New(t, 1)
	c := kc.Kafka
	e := newEOSCopy(t, c, "eos-fenced-offsets", 1, 50)
	e.cfg.Consumer.GroupInstanceID = "pod-7"
	produceInput(t, c, e.in, e.partitions, e.per)
	h := kc.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.FencedInstanceID, Count: -1})
	defer h.Remove()
	r := e.start(t, nil)
	select {
	case err := <-r.done:
		r.done <- err
		if err == nil || !strings.Contains(err.Error(), `consumer.group_instance_id "pod-7"`) ||
			!strings.Contains(err.Error(), "FENCED_INSTANCE_ID") {
			t.Fatalf("the run's error does not name group_instance_id pod-7 and FENCED_INSTANCE_ID: %v", err)
		}
	case <-time.After(5 * time.Second):
		s, _ := r.p.Stats(context.Background())
		t.Fatalf("the run goes on 5s after the group answered FENCED_INSTANCE_ID to its offsets "+
			"(transactions aborted: %d): another member uses its group_instance_id, so it must stop", s.TransactionsAborted)
	}
}

// A heartbeat answered FENCED_INSTANCE_ID (another process joined with
// this group_instance_id) stops the run with an error that names the
// configuration key and its value, at either guarantee.
func TestFencedInstanceHeartbeatNamesKey(t *testing.T) {
	kc := kafkatest.New(t, 1)
	c := kc.Kafka
	in := c.Name("fenced-hb-in")
	c.CreateTopic(t, in, 1)
	cfg := fastConfig(c, c.Name("g-fenced-hb"), in)
	cfg.Consumer.GroupInstanceID = "pod-9"
	r := start(t, cfg)
	waitFor(t, 10*time.Second, "the member to join", func() bool {
		s, err := r.p.Stats(context.Background())
		return err == nil && len(s.Partitions) > 0
	})
	h := kc.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Err: kerr.FencedInstanceID, Count: -1})
	defer h.Remove()
	select {
	case err := <-r.done:
		r.done <- err
		if err == nil || !strings.Contains(err.Error(), `consumer.group_instance_id "pod-9"`) {
			t.Fatalf("the run's error does not name consumer.group_instance_id %q: %v", "pod-9", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run goes on 10s after its heartbeats were answered FENCED_INSTANCE_ID")
	}
}
