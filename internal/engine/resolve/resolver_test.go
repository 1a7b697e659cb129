package resolve_test

import (
	"context"
	"errors"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/engine/resolve"
	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// TestResolve: log bounds for every entry, the offset at a time for
// AtTime requests, and a failure of one partition that leaves the others.
func TestResolve(t *testing.T) {
	c := kafkatest.New(t, 2)
	c.CreateTopic(t, "r", 2)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := 0; i < 10; i++ { // partition 0: offsets 0..9, a minute apart
		rec := &kgo.Record{Topic: "r", Partition: 0, Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if err := c.Client.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c.DeleteRecords(t, "r", 0, 3)
	tr := &kafka.Transport{MetadataTTL: time.Second}
	defer tr.CloseIdleConnections()
	r := resolve.NewResolver(kafkawire.New(tr, kafka.TCP(c.Addrs...)), resolve.Config{Timeout: 5 * time.Second})
	p0 := offsetstore.TopicPartition{Topic: "r", Partition: 0}
	p1 := offsetstore.TopicPartition{Topic: "r", Partition: 1}
	batch := offsets.NewResolveRequest(1, []offsets.ResolveEntry{
		{Partition: p0, Request: offsetstore.Earliest(), Epoch: 1, LeaderEpoch: -1, ValidateLeaderEpoch: -1},
		{Partition: p0, Request: offsetstore.AtTime(base.Add(5*time.Minute + time.Second)), Epoch: 1, LeaderEpoch: -1, ValidateLeaderEpoch: -1},
		{Partition: p1, Request: offsetstore.Latest(), Epoch: 2, LeaderEpoch: -1, ValidateLeaderEpoch: -1},
		{Partition: p0, Request: offsetstore.AtTime(base.Add(time.Hour)), Epoch: 1, LeaderEpoch: -1, ValidateLeaderEpoch: -1},
	})
	res := r.Resolve(context.Background(), batch)
	want := []resolve.PartitionResult{
		{LogStart: 3, HighWatermark: 10, TimeOffset: -1},
		{LogStart: 3, HighWatermark: 10, TimeOffset: 6}, // first record at or after 5m01s
		{LogStart: 0, HighWatermark: 0, TimeOffset: -1},
		{LogStart: 3, HighWatermark: 10, TimeOffset: -1}, // nothing that recent
	}
	for i, w := range want {
		got := res.Partitions[i]
		if got.Err != nil || got.LogStart != w.LogStart || got.HighWatermark != w.HighWatermark || got.TimeOffset != w.TimeOffset {
			t.Errorf("entry %d: %+v, want %+v", i, got, w)
		}
	}
	// a lookup of a partition that does not exist fails, flagged for a
	// metadata refresh
	res = r.Resolve(context.Background(), offsets.NewResolveRequest(1, []offsets.ResolveEntry{
		{Partition: offsetstore.TopicPartition{Topic: "nope", Partition: 0}, Request: offsetstore.Earliest(), Epoch: 1, LeaderEpoch: -1, ValidateLeaderEpoch: -1},
	}))
	if pr := res.Partitions[0]; pr.Err == nil || !pr.NotLeader {
		t.Fatalf("unknown topic: %+v, want an error flagged NotLeader", pr)
	}
}

// newResolver returns a resolver for c's cluster that dials c's brokers
// for OffsetForLeaderEpoch.
func newResolver(t *testing.T, c *kafkatest.Cluster, readCommitted bool) *resolve.Resolver {
	t.Helper()
	tr := &kafka.Transport{MetadataTTL: time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	d := &kafkawire.Dialer{ClientID: "test"}
	return resolve.NewResolver(kafkawire.New(tr, kafka.TCP(c.Addrs...)), resolve.Config{
		Timeout: 5 * time.Second, ReadCommitted: readCommitted,
		Dial: func(ctx context.Context, broker int32) (*kafkawire.Conn, error) {
			return d.Dial(ctx, c.Addrs[broker])
		},
	})
}

// TestResolveReadCommitted: under read_committed the end of the log is
// the last stable offset, where an open transaction's records start, so a
// partition that starts at "latest" still gets them once they commit.
func TestResolveReadCommitted(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "rc", 1)
	c.Produce(t, "rc", 0, 2, func(i int) []byte { return []byte{byte(i)} }) // 0, 1
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.TransactionalID("open"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // 2, 3, 4: open
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "rc", Partition: 0, Value: []byte("t")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _ = cl.EndTransaction(ctx, kgo.TryAbort) }()
	entry := []offsets.ResolveEntry{{Partition: offsetstore.TopicPartition{Topic: "rc", Partition: 0}, Request: offsetstore.Latest(),
		Epoch: 1, Leader: -1, LeaderEpoch: -1, ValidateLeaderEpoch: -1}}
	for _, tt := range []struct {
		readCommitted bool
		end           int64
	}{{false, 5}, {true, 2}} {
		pr := newResolver(t, c, tt.readCommitted).Resolve(ctx, offsets.NewResolveRequest(1, entry)).Partitions[0]
		if pr.Err != nil || pr.LogStart != 0 || pr.HighWatermark != tt.end {
			t.Errorf("read_committed=%v: %+v, want log 0..%d", tt.readCommitted, pr, tt.end)
		}
	}
}

// TestResolveLeaderEpochs: every request carries the leader epoch; an
// entry with a leader epoch to validate gets where it ends on the
// leader (OffsetForLeaderEpoch); an older leader epoch is fenced and
// flagged for a metadata refresh, a newer one is retried.
func TestResolveLeaderEpochs(t *testing.T) {
	c := kafkatest.New(t, 2)
	c.CreateTopic(t, "le", 1) // led by broker 0
	value := func(i int) []byte { return []byte{byte(i)} }
	c.Produce(t, "le", 0, 3, value) // 0..2
	first := c.LeaderEpoch(t, "le", 0)
	c.MoveLeader(t, "le", 0, 1)
	c.Produce(t, "le", 0, 4, value) // 3..6 under broker 1
	cur := c.LeaderEpoch(t, "le", 0)
	r := newResolver(t, c, false)
	tp := offsetstore.TopicPartition{Topic: "le", Partition: 0}
	for _, tt := range []struct {
		name                 string
		leader               int32
		le, validate         int32
		endLeaderEpoch       int32
		leaderEpochEndOffset int64
		err                  error
		notLeader            bool
	}{
		{name: "an old leader epoch ends where the next starts", leader: 1, le: cur, validate: first, endLeaderEpoch: first, leaderEpochEndOffset: 3},
		{name: "the current leader epoch ends at the log end", leader: 1, le: cur, validate: cur, endLeaderEpoch: cur, leaderEpochEndOffset: 7},
		{name: "nothing to validate", leader: 1, le: cur, validate: -1, endLeaderEpoch: -1, leaderEpochEndOffset: -1},
		{name: "fenced", leader: 1, le: cur - 1, validate: first, endLeaderEpoch: -1, leaderEpochEndOffset: -1, err: kerr.FencedLeaderEpoch, notLeader: true},
		{name: "unknown leader epoch", leader: 1, le: cur + 1, validate: first, endLeaderEpoch: -1, leaderEpochEndOffset: -1, err: kerr.UnknownLeaderEpoch},
		{name: "not the leader", leader: 0, le: -1, validate: first, endLeaderEpoch: -1, leaderEpochEndOffset: -1, err: kerr.NotLeaderForPartition, notLeader: true},
		{name: "no known leader", leader: -1, le: cur, validate: first, endLeaderEpoch: -1, leaderEpochEndOffset: -1, notLeader: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pr := r.Resolve(context.Background(), offsets.NewResolveRequest(1, []offsets.ResolveEntry{{Partition: tp, Request: offsetstore.Exact(5),
				Epoch: 1, Leader: tt.leader, LeaderEpoch: tt.le, ValidateLeaderEpoch: tt.validate}})).Partitions[0]
			if pr.EndLeaderEpoch != tt.endLeaderEpoch || pr.LeaderEpochEndOffset != tt.leaderEpochEndOffset || pr.NotLeader != tt.notLeader ||
				(tt.err != nil && !errors.Is(pr.Err, tt.err)) || (tt.err == nil && !tt.notLeader && pr.Err != nil) {
				t.Fatalf("%+v; want leader epoch %d ending at %d, error %v, not leader %v", pr, tt.endLeaderEpoch, tt.leaderEpochEndOffset, tt.err, tt.notLeader)
			}
			if pr.Err == nil && (pr.LogStart != 0 || pr.HighWatermark != 7) {
				t.Fatalf("log bounds %d..%d, want 0..7", pr.LogStart, pr.HighWatermark)
			}
		})
	}
}
