// Package kafkatest runs an in-process Kafka-protocol cluster (kfake) for
// tests and the embedded quickstart, with helpers to produce, inspect
// committed offsets and delete records through independent clients
// (franz-go's kgo and kadm).
package kafkatest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster is an in-process cluster with a producer and an admin client.
type Cluster struct {
	*kfake.Cluster
	Addrs  []string
	Client *kgo.Client
	Admin  *kadm.Client
}

// New starts a cluster of brokers brokers; it is closed when the test
// ends. Groups accept session timeouts down to 100ms so rebalances are
// fast.
func New(t testing.TB, brokers int, opts ...kfake.Opt) *Cluster {
	t.Helper()
	c, err := Start(brokers, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Start starts a cluster; the caller closes it.
func Start(brokers int, opts ...kfake.Opt) (*Cluster, error) {
	opts = append([]kfake.Opt{kfake.NumBrokers(brokers), kfake.GroupMinSessionTimeout(100 * time.Millisecond)}, opts...)
	fc, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, err
	}
	addrs := fc.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		fc.Close()
		return nil, err
	}
	return &Cluster{Cluster: fc, Addrs: addrs, Client: cl, Admin: kadm.NewClient(cl)}, nil
}

// Close stops the clients and the cluster.
func (c *Cluster) Close() {
	c.Client.Close()
	c.Cluster.Close()
}

// CreateTopic creates a topic and spreads its partition leaders over the
// brokers round-robin (partition i on broker i mod brokers).
func (c *Cluster) CreateTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	if err := c.CreateTopicE(topic, partitions); err != nil {
		t.Fatal(err)
	}
}

// CreateTopicE is CreateTopic returning its error.
func (c *Cluster) CreateTopicE(topic string, partitions int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Admin.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	n := int32(len(c.Addrs))
	for p := int32(0); p < partitions; p++ {
		if err := c.MoveTopicPartition(topic, p, p%n); err != nil {
			return fmt.Errorf("move %s/%d: %w", topic, p, err)
		}
	}
	return nil
}

// Produce writes n records to one partition, each in its own record
// batch (so DeleteRecords can cut between any two); value(i) gives the
// i-th value, which is also its key.
func (c *Cluster) Produce(t testing.TB, topic string, partition int32, n int, value func(i int) []byte) {
	t.Helper()
	if err := c.ProduceE(topic, partition, n, 1, value); err != nil {
		t.Fatal(err)
	}
}

// ProduceE writes n records to one partition in batches of perBatch
// records and returns the first error.
func (c *Cluster) ProduceE(topic string, partition int32, n, perBatch int, value func(i int) []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.Client
	for i := 0; i < n; i += perBatch {
		recs := make([]*kgo.Record, 0, perBatch)
		for j := i; j < min(n, i+perBatch); j++ {
			v := value(j)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Key: v, Value: v})
		}
		var err error
		for attempt := 0; ; attempt++ {
			if err = cl.ProduceSync(ctx, recs...).FirstErr(); err == nil {
				break
			}
			if attempt == 3 {
				return fmt.Errorf("produce to %s/%d: %w", topic, partition, err)
			}
			// A recreated topic has a new id: a fresh client learns it.
			fresh, ferr := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
			if ferr != nil {
				return ferr
			}
			defer fresh.Close()
			cl = fresh
		}
	}
	return nil
}

// Committed returns the group's committed offsets of topic, by partition.
func (c *Cluster) Committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Admin.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	for _, o := range resp[topic] {
		if o.Err == nil {
			out[o.Partition] = o.At
		}
	}
	return out
}

// DeleteRecords deletes a partition's records before offset (kfake cuts
// at batch boundaries, like Kafka).
func (c *Cluster) DeleteRecords(t testing.TB, topic string, partition int32, before int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: partition, At: before})
	resp, err := c.Admin.DeleteRecords(ctx, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete records of %s/%d before %d: %v", topic, partition, before, err)
	}
}

// CommitOffsets sets the group's committed offsets (the group must have no
// members).
func (c *Cluster) CommitOffsets(t testing.TB, group, topic string, offsets map[int32]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var os kadm.Offsets
	for p, at := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	resp, err := c.Admin.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit offsets of %s: %v", group, err)
	}
}

// Bounds returns a partition's log start offset and high watermark.
func (c *Cluster) Bounds(t testing.TB, topic string, partition int32) (logStart, hw int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	starts, err := c.Admin.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := c.Admin.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := starts.Lookup(topic, partition)
	e, _ := ends.Lookup(topic, partition)
	return s.Offset, e.Offset
}
