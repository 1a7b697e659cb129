package group

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// startKgo runs a franz-go consumer (cooperative-sticky) in the group and
// records its callbacks in the ledger as the member name.
func startKgo(t *testing.T, l *ledger, name string, c *kafkatest.Cluster, group string, topics ...string) func() {
	t.Helper()
	tps := func(m map[string][]int32) []offsetstore.TopicPartition {
		var out []offsetstore.TopicPartition
		for topic, ps := range m {
			for _, p := range ps {
				out = append(out, offsetstore.TopicPartition{Topic: topic, Partition: p})
			}
		}
		return out
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(1500*time.Millisecond), kgo.HeartbeatInterval(100*time.Millisecond), kgo.RebalanceTimeout(3*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			var ps []Partition
			for _, p := range tps(m) {
				ps = append(ps, Partition{TopicPartition: p})
			}
			l.record(name, Assigned{Partitions: ps})
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			l.record(name, Revoke{Partitions: tps(m)})
			l.done(name, tps(m)) // kgo waits for this callback before it rejoins
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			l.record(name, Lost{Partitions: tps(m)})
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-polled
		cl.Close()
	}
	t.Cleanup(stop)
	return stop
}

// franz-go's cooperative-sticky consumers and ours share one group: they
// converge on a balanced assignment with every partition owned, and no
// partition is ever owned by two members at once, whoever leads.
func TestMixedGroupWithFranzGoConverges(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "t", 8)
	l := newLedger()
	cfg := testConfig(c, "g", "t")
	names := []string{"ours-a", "kgo-a", "ours-b", "kgo-b"}
	stops := map[string]func(){}
	for _, n := range names {
		if n[:3] == "kgo" {
			stops[n] = startKgo(t, l, n, c, "g", "t")
		} else {
			r := startMember(t, l, n, cfg, memberOpts{commitOnRev: true})
			stops[n] = func() { _ = r.stop(t) }
		}
		time.Sleep(200 * time.Millisecond)
	}
	l.waitFor(t, 20*time.Second, "2 each over 4 members", func(o map[string][]offsetstore.TopicPartition) bool {
		return slices.Equal(counts(o, names...), []int{2, 2, 2, 2})
	})
	// The first members leave (one of them led the group); the rest take
	// over everything.
	stops["ours-a"]()
	stops["kgo-a"]()
	l.waitFor(t, 20*time.Second, "4 each over 2 members", func(o map[string][]offsetstore.TopicPartition) bool {
		return slices.Equal(counts(o, "ours-b", "kgo-b"), []int{4, 4})
	})
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}
