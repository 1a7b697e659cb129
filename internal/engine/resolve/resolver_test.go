package resolve_test

import (
	"context"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
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
		{Partition: p0, Request: offsetstore.Earliest(), Epoch: 1, LeaderEpoch: -1, ValidateEpoch: -1},
		{Partition: p0, Request: offsetstore.AtTime(base.Add(5*time.Minute + time.Second)), Epoch: 1, LeaderEpoch: -1, ValidateEpoch: -1},
		{Partition: p1, Request: offsetstore.Latest(), Epoch: 2, LeaderEpoch: -1, ValidateEpoch: -1},
		{Partition: p0, Request: offsetstore.AtTime(base.Add(time.Hour)), Epoch: 1, LeaderEpoch: -1, ValidateEpoch: -1},
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
		{Partition: offsetstore.TopicPartition{Topic: "nope", Partition: 0}, Request: offsetstore.Earliest(), Epoch: 1, LeaderEpoch: -1, ValidateEpoch: -1},
	}))
	if pr := res.Partitions[0]; pr.Err == nil || !pr.NotLeader {
		t.Fatalf("unknown topic: %+v, want an error flagged NotLeader", pr)
	}
}
