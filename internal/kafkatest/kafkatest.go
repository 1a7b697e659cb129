// Package kafkatest runs an in-process Kafka-protocol cluster (kfake) for
// tests and the embedded quickstart, with helpers to produce, inspect
// committed offsets and delete records through independent clients
// (franz-go's kgo and kadm). The helpers live on Kafka, which also fronts
// an Apache Kafka cluster (FromReal), so one scenario runs on either.
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster is an in-process cluster with a producer and an admin client.
type Cluster struct {
	*kfake.Cluster
	*Kafka
	// closed ends the delays interceptors are sleeping (Close), so
	// none outlives the cluster.
	closed    chan struct{}
	closeOnce sync.Once
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

// NewWithClient is New with options for the test's clients (TLS and
// SASL, for a cluster that requires them).
func NewWithClient(t testing.TB, brokers int, client []kgo.Opt, opts ...kfake.Opt) *Cluster {
	t.Helper()
	c, err := start(brokers, client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Start starts a cluster; the caller closes it.
func Start(brokers int, opts ...kfake.Opt) (*Cluster, error) {
	return start(brokers, nil, opts...)
}

func start(brokers int, client []kgo.Opt, opts ...kfake.Opt) (*Cluster, error) {
	opts = append([]kfake.Opt{kfake.NumBrokers(brokers), kfake.GroupMinSessionTimeout(100 * time.Millisecond)}, opts...)
	fc, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, err
	}
	addrs := fc.ListenAddrs()
	cl, err := newClient(addrs, client...)
	if err != nil {
		fc.Close()
		return nil, err
	}
	c := &Cluster{Cluster: fc, closed: make(chan struct{})}
	nodes := make([]int32, brokers)
	for i := range nodes {
		nodes[i] = int32(i)
	}
	c.Kafka = &Kafka{Addrs: addrs, Client: cl, Admin: kadm.NewClient(cl), Nodes: nodes,
		createTopic: c.createTopic, intercept: c.intercept,
		moveLeader: func(_ context.Context, topic string, partition, to int32) error {
			return c.MoveTopicPartition(topic, partition, to)
		}}
	return c, nil
}

// Close stops the clients and the cluster.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() { close(c.closed) })
	c.Client.Close()
	c.Cluster.Close()
}

// CreateTopic creates a topic and spreads its partition leaders over the
// brokers round-robin (partition i on broker i mod brokers).
func (c *Cluster) CreateTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	c.Kafka.CreateTopic(t, topic, partitions)
}

// DeleteRecords deletes a partition's records before offset (kfake cuts
// at batch boundaries, like Kafka).
func (c *Cluster) DeleteRecords(t testing.TB, topic string, partition int32, before int64) {
	t.Helper()
	c.Kafka.DeleteRecords(t, topic, partition, before)
}

// createTopic creates a topic with one replica and moves partition i's
// leadership to broker i mod brokers.
func (c *Cluster) createTopic(ctx context.Context, topic string, partitions int32) error {
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

// intercept runs fn on every request of key, on the cluster's goroutine;
// a delay sleeps without blocking the other brokers' requests.
func (c *Cluster) intercept(_ testing.TB, key int16, fn Interceptor) {
	c.ControlKey(key, func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		act := fn(c.CurrentNode(), req)
		if act.Cut {
			return nil, errors.New("kafkatest: connection cut"), true
		}
		if act.Delay > 0 {
			c.SleepControl(func() {
				t := time.NewTimer(act.Delay)
				defer t.Stop()
				select {
				case <-t.C:
				case <-c.closed: // the cluster is closing: hold nothing back
				}
			})
		}
		return nil, nil, false
	})
}
