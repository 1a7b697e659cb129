package pipeline_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/group"
	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
)

func newObserved() *observed { return &observed{stagesDone: map[string]pipeline.StageDone{}} }

// revoked returns the sizes of the revokes the member reported.
func (o *observed) revoked() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int
	for _, r := range o.rebalances {
		if r.Ended {
			out = append(out, r.Partitions)
		}
	}
	return out
}

// assigned returns how many partitions the member had after its last
// assignment, and how many assignments it reported.
func (o *observed) assigned() (partitions, assignments int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.rebalances {
		if !r.Ended {
			partitions, assignments = r.Partitions, assignments+1
		}
	}
	return partitions, assignments
}

// TestRebalanceMovesOnlyWhatMoves: a second member joins a group whose
// first member owns every partition of a topic being produced to. With
// the cooperative-sticky assignor (the default) or the consumer protocol
// (KIP-848) the first member gives up only the partitions that move, and
// keeps the others running; with an eager assignor (range) it gives up
// every one. Either way nothing is lost or processed twice.
func TestRebalanceMovesOnlyWhatMoves(t *testing.T) {
	rebalanceMovesOnlyWhatMoves(t, func(*testing.T) *kafkatest.Kafka { return kafkatest.New(t, 2).Kafka })
}

func rebalanceMovesOnlyWhatMoves(t *testing.T, cluster func(*testing.T) *kafkatest.Kafka) {
	for _, tt := range []struct {
		name, assignor, protocol string
		wantRevokeAll            bool
	}{
		{"cooperative-sticky", pipeline.AssignorCooperativeSticky, pipeline.GroupProtocolClassic, false},
		{"range", pipeline.AssignorRange, pipeline.GroupProtocolClassic, true},
		{"consumer-protocol", "", pipeline.GroupProtocolConsumer, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const partitions, perPartition = 6, 200
			c := cluster(t)
			topic, group := c.Name("coop"), c.Name("g-coop")
			c.CreateTopic(t, topic, partitions)
			cfg := fastConfig(c, group, topic)
			cfg.Consumer.Assignor, cfg.Consumer.GroupProtocol = tt.assignor, tt.protocol
			// graceful joins and stops only: a session far longer than
			// the test, so CPU starvation cannot lose one
			cfg.Consumer.SessionTimeout, cfg.Consumer.RebalanceTimeout = 10*time.Second, 10*time.Second
			log := &processingLog{}
			obsA, obsB := newObserved(), newObserved()
			produced := make(chan error, 1)
			go func() {
				for i := 0; i < perPartition; i += 20 {
					for p := int32(0); p < partitions; p++ {
						if err := c.ProduceE(topic, p, 20, 5, values(fmt.Sprint(i))); err != nil {
							produced <- err
							return
						}
					}
					time.Sleep(20 * time.Millisecond)
				}
				produced <- nil
			}()
			a := start(t, cfg, pipeline.WithStage("log", log.stage("a")), pipeline.WithObserver(obsA))
			if tt.protocol == pipeline.GroupProtocolConsumer && !c.ConsumerGroupProtocol(t) {
				// Kafka 3.x: the pipeline must refuse to start instead
				consumerProtocolRefused(t, a)
				if n, _ := obsA.assigned(); n != 0 || log.distinct() != 0 {
					t.Fatalf("a owns %d partitions and processed %d records on brokers without the consumer protocol", n, log.distinct())
				}
				return
			}
			waitFor(t, 20*time.Second, "a to own every partition", func() bool { n, _ := obsA.assigned(); return n == partitions })
			waitFor(t, 20*time.Second, "records to flow", func() bool { return log.distinct() > 100 })
			b := start(t, cfg, pipeline.WithStage("log", log.stage("b")), pipeline.WithObserver(obsB))
			waitFor(t, 20*time.Second, "b to get partitions", func() bool { n, _ := obsB.assigned(); return n > 0 })
			if err := <-produced; err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "every record", func() bool { return log.distinct() == partitions*perPartition })
			revokes := obsA.revoked() // before a stops: only the rebalance's
			nb, _ := obsB.assigned()
			for _, m := range []*running{a, b} {
				if err := m.shutdown(t); err != nil {
					t.Fatal(err)
				}
			}
			if len(revokes) == 0 {
				t.Fatalf("a reported no revoke when b joined (b owns %d partitions)", nb)
			}
			for _, n := range revokes {
				if all := n == partitions; all != tt.wantRevokeAll {
					t.Errorf("a revoked %d of %d partitions when b joined (revokes %v); want all: %v", n, partitions, revokes, tt.wantRevokeAll)
				}
			}
			if !tt.wantRevokeAll && revokes[0] != nb {
				t.Errorf("a revoked %d partitions and b got %d: only what moves should stop", revokes[0], nb)
			}
			assertEachOnceInOrder(t, log, partitions, perPartition)
		})
	}
}

// consumerProtocolRefused waits for r, a pipeline with group_protocol:
// consumer on brokers that do not offer that protocol (ApiVersions: no
// finalized group.version, as on Kafka 3.x), to fail at start with
// group.ErrConsumerProtocolUnsupported saying which setting to change,
// and returns the error.
func consumerProtocolRefused(t *testing.T, r *running) error {
	t.Helper()
	var err error
	select {
	case err = <-r.done:
		r.done <- err // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not fail on brokers without the consumer group protocol")
	}
	t.Logf("Run: %v", err)
	if !errors.Is(err, group.ErrConsumerProtocolUnsupported) {
		t.Fatalf("Run returned %v, want group.ErrConsumerProtocolUnsupported", err)
	}
	if !strings.Contains(err.Error(), "set consumer.group_protocol: classic") {
		t.Errorf("the error does not say to set consumer.group_protocol: classic")
	}
	return err
}

// assertEachOnceInOrder checks that every record of every partition was
// processed exactly once, in offset order, whoever owned it.
func assertEachOnceInOrder(t *testing.T, log *processingLog, partitions, perPartition int) {
	t.Helper()
	log.mu.Lock()
	defer log.mu.Unlock()
	next := map[int32]int64{}
	for _, e := range log.entries {
		if e.offset != next[e.tp.Partition] {
			t.Fatalf("%s: offset %d processed (by %s) where %d was next: a duplicate or a gap", e.tp, e.offset, e.member, next[e.tp.Partition])
		}
		next[e.tp.Partition]++
	}
	for p := int32(0); p < int32(partitions); p++ {
		if next[p] != int64(perPartition) {
			t.Fatalf("partition %d: %d records processed, want %d", p, next[p], perPartition)
		}
	}
}

// TestStaticMemberRestart: a static member (group_instance_id) that stops
// and starts again within the session timeout gets its partitions back,
// and the other member stops none of its own. With leave_group_on_close
// it leaves instead, and the other member takes its partitions at once.
//
// Apache Kafka goes further (the real-Kafka suite checks it): the
// restart causes no rebalance at all, the other member is told nothing
// and the generation stays. kfake rebalances when a static member rejoins
// with a subscription that differs in any byte, and a restarted member's
// differs (it owns no partitions yet); Kafka rebalances only if the
// group's protocol would change.
func TestStaticMemberRestart(t *testing.T) {
	staticMemberRestart(t, kafkatest.New(t, 1).Kafka, false)
}

func staticMemberRestart(t *testing.T, c *kafkatest.Kafka, noRebalance bool) {
	topic, group := c.Name("static"), c.Name("g-static")
	c.CreateTopic(t, topic, 4)
	var syncs, joins int
	var lastGen int32
	var mu = make(chan struct{}, 1)
	count := func(f func()) { mu <- struct{}{}; f(); <-mu }
	c.Intercept(t, kmsg.SyncGroup, func(_ int32, req kmsg.Request) kafkatest.Action {
		count(func() { syncs++; lastGen = req.(*kmsg.SyncGroupRequest).Generation })
		return kafkatest.Action{}
	})
	c.Intercept(t, kmsg.JoinGroup, func(int32, kmsg.Request) kafkatest.Action { count(func() { joins++ }); return kafkatest.Action{} })
	cfg := fastConfig(c, group, topic)
	cfg.Consumer.SessionTimeout = 6 * time.Second // long enough to restart within
	static := func(id string) pipeline.Config { s := cfg; s.Consumer.GroupInstanceID = id; return s }

	obsA, obsB := newObserved(), newObserved()
	a := start(t, static("a"), pipeline.WithObserver(obsA))
	b := start(t, static("b"), pipeline.WithObserver(obsB))
	waitFor(t, 20*time.Second, "both members to own partitions", func() bool {
		na, _ := obsA.assigned()
		nb, _ := obsB.assigned()
		return na > 0 && nb > 0 && na+nb == 4
	})
	time.Sleep(500 * time.Millisecond) // let the group settle
	na, _ := obsA.assigned()
	_, bAssignments := obsB.assigned()
	var gen int32
	count(func() { gen = lastGen })
	// b may have revoked partitions while the group formed (if it
	// joined first); only what it revokes from now on counts.
	revokedBefore := len(obsB.revoked())
	if err := a.shutdown(t); err != nil {
		t.Fatal(err)
	}
	obsA2 := newObserved()
	a2 := start(t, static("a"), pipeline.WithObserver(obsA2))
	waitFor(t, 20*time.Second, "the restarted member to get its partitions back", func() bool { n, _ := obsA2.assigned(); return n > 0 })
	time.Sleep(time.Second) // a rebalance, if there were one, would reach b now
	if n, _ := obsA2.assigned(); n != na {
		t.Errorf("restarted static member got %d partitions, had %d", n, na)
	}
	if r := obsB.revoked()[revokedBefore:]; len(r) != 0 {
		t.Errorf("the other member stopped partitions when a static member restarted: revokes %v", r)
	}
	if noRebalance {
		if _, n := obsB.assigned(); n != bAssignments {
			t.Errorf("the other member saw a rebalance: assignments %d -> %d", bAssignments, n)
		}
		count(func() {
			if lastGen != gen {
				t.Errorf("the group's generation moved from %d to %d on a static restart", gen, lastGen)
			}
		})
	}

	// leave_group_on_close: the partitions move at once, well within the
	// session timeout.
	if err := a2.shutdown(t); err != nil {
		t.Fatal(err)
	}
	lcfg := static("a")
	lcfg.Consumer.LeaveGroupOnClose = true
	obsA3 := newObserved()
	a3 := start(t, lcfg, pipeline.WithObserver(obsA3))
	waitFor(t, 20*time.Second, "the member to rejoin", func() bool { n, _ := obsA3.assigned(); return n > 0 })
	stopped := time.Now()
	if err := a3.shutdown(t); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "b to take every partition after a left", func() bool { n, _ := obsB.assigned(); return n == 4 })
	if d := time.Since(stopped); d > cfg.Consumer.SessionTimeout {
		t.Errorf("b got the partitions %v after a left: as slow as a session expiry", d)
	}
	if err := b.shutdown(t); err != nil {
		t.Fatal(err)
	}
}
