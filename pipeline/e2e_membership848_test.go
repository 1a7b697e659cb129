package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/fencepost-dev/fencepost/internal/group"
	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestMembershipConsumerProtocolStopCommitsAfterEpochMove: under the
// consumer protocol the coordinator moves a member to a new epoch without
// changing its partitions (here: another member joins for another topic),
// and the member's stop then revokes under that epoch. The stop still
// drains and commits every record processed: the pipeline moves to the
// epoch before revoking even though the run's context has ended. (Before,
// that move was sent under the ended context and was dropped about every
// other time: the revoke, of an epoch the pipeline did not know, was
// answered at once, with no final commit.) Three rounds, so a dropped
// move shows with 7 in 8.
func TestMembershipConsumerProtocolStopCommitsAfterEpochMove(t *testing.T) {
	c := kafkatest.New(t, 1, kfake.BrokerConfigs(map[string]string{
		"group.consumer.heartbeat.interval.ms": "100",
		"group.consumer.session.timeout.ms":    "1500",
	}))
	topic, other, grp := c.Name("t848"), c.Name("u848"), c.Name("g848")
	c.CreateTopic(t, topic, 2)
	c.CreateTopic(t, other, 1)
	cfg := fastConfig(c, grp, topic)
	cfg.Consumer.GroupProtocol = pipeline.GroupProtocolConsumer
	cfg.Consumer.CommitInterval = time.Hour // only the generation's first commit and the stop's
	for round := 1; round <= 3; round++ {
		for p := int32(0); p < 2; p++ {
			c.Produce(t, topic, p, 20, values("r"))
		}
		rec := newRecorder()
		r := start(t, cfg, pipeline.WithStage("rec", rec))
		waitFor(t, 15*time.Second, "the round's records processed", func() bool { return rec.total() >= 40 })
		// another member, for another topic: the group's epoch moves,
		// and the pipeline's member with it at its next heartbeat
		gm, err := group.New(group.Config{Brokers: c.Bootstrap(), Group: grp, Topics: []string{other},
			Protocol: group.ProtocolConsumer, SessionTimeout: 1500 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, RebalanceTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- gm.Run(ctx) }()
		go func() {
			for ev := range gm.Events() {
				if rv, ok := ev.(group.Revoke); ok {
					rv.Done()
				}
			}
		}()
		time.Sleep(600 * time.Millisecond)
		if err := r.shutdown(t); err != nil {
			t.Fatal(err)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := c.Committed(t, grp, topic)
		for p := int32(0); p < 2; p++ {
			if want := int64(20 * round); got[p] != want {
				t.Fatalf("round %d: %s committed %d after the stop, want %d (every record processed)",
					round, offsetstore.TopicPartition{Topic: topic, Partition: p}, got[p], want)
			}
		}
	}
}
