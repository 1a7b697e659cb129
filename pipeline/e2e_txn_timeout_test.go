package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/internal/produce"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// A transaction_timeout above the brokers' transaction.max.timeout.ms is
// refused at start with INVALID_TRANSACTION_TIMEOUT: the error says the
// brokers' maximum is lower than the setting, and names both keys (not
// the permissions or replication hint of other start failures).
func TestExactlyOnceTransactionTimeoutAboveBrokerMax(t *testing.T) {
	c := kafkatest.New(t, 1, kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "5000"})).Kafka
	in := c.Name("eos-max-in")
	c.CreateTopic(t, in, 1)
	cfg := fastConfig(c, c.Name("g-eos-max"), in)
	cfg.Guarantee = pipeline.ExactlyOnce
	cfg.TransactionTimeout = 8 * time.Second
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = p.Run(ctx)
	if err == nil {
		t.Fatal("Run started with a transaction_timeout the broker refuses")
	}
	msg := err.Error()
	for _, want := range []string{"transaction_timeout (8s)", "transaction.max.timeout.ms", "lower"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the start error does not say %q: %v", want, err)
		}
	}
	if strings.Contains(msg, "replication.factor") {
		t.Errorf("the start error gives the unrelated replication hint: %v", err)
	}
}

// A static member (group_instance_id) that crashed with a transaction open
// and restarts fences that transaction at once: its transactional id is
// the same, so its InitProducerID aborts it, and read_committed readers
// of the output see the restarted instance's records within seconds, not
// after transaction_timeout (60s here).
func TestExactlyOnceRestartFencesPredecessor(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	e := newEOSCopy(t, c, "eos-restart", 1, 20)
	e.cfg.Consumer.GroupInstanceID = "pod-0"
	e.cfg.TransactionTimeout = time.Minute
	// the crashed predecessor: an open transaction on the output,
	// under the transactional id the instance uses
	tr := &kafka.Transport{MetadataTTL: 200 * time.Millisecond}
	defer tr.CloseIdleConnections()
	zombie := produce.New(kafkawire.New(tr, kafka.TCP(c.Bootstrap()...)),
		produce.Config{TransactionalID: e.group + "-pod-0", TransactionTimeout: time.Minute})
	ctx := context.Background()
	if err := zombie.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ForTopic(e.out).Produce(ctx, []stages.Record{{Value: []byte("left open")}}); err != nil {
		t.Fatal(err)
	}
	produceInput(t, c, e.in, e.partitions, e.per)
	started := time.Now()
	r := e.start(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.ConsumeTopics(e.out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	n := 0
	for n < e.per && rctx.Err() == nil {
		cl.PollFetches(rctx).EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "left open" {
				t.Errorf("read_committed reader saw the crashed instance's uncommitted record")
			}
			n++
		})
	}
	if n < e.per {
		t.Fatalf("read_committed reader saw %d of %d records within 15s of the restart: the crashed predecessor's open "+
			"transaction still holds the output back (is the transactional id stable with group_instance_id?)", n, e.per)
	}
	t.Logf("read_committed reader saw the restarted instance's records %v after its start", time.Since(started).Round(time.Millisecond))
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
}
