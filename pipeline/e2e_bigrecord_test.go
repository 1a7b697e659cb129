package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestProduceRecordOverOneMiB: with the broker's message.max.bytes and
// the topic's max.message.bytes at 20 MiB, a 5 MB record is written
// whole (the producer's limit defaults to the topic's max.message.bytes)
// and read back byte for byte. With kafka.max_batch_bytes set below it,
// the record is refused before anything is sent, permanently, by an
// error that names the setting; on a topic left at Kafka's default
// (1 MiB), the error names the topic's max.message.bytes.
func TestProduceRecordOverOneMiB(t *testing.T) {
	const limit = 20 << 20
	c := kafkatest.New(t, 1, kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(limit)})).Kafka
	big, small := c.Name("big"), c.Name("small")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mmb := strconv.Itoa(limit)
	if _, err := c.Admin.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &mmb}, big); err != nil {
		t.Fatal(err)
	}
	c.CreateTopic(t, small, 1)
	value := bytes.Repeat([]byte("0123456789"), 500_000) // 5 MB
	rec := []stages.Record{{Key: []byte("k"), Value: value}}
	kcfg := fastConfig(c, "unused", big).Kafka

	p, err := pipeline.NewProducer(kcfg, big)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Produce(ctx, rec); err != nil {
		t.Fatalf("producing a 5 MB record to a topic with max.message.bytes %d: %v", limit, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.ConsumeTopics(big), kgo.FetchMaxBytes(limit*2),
		kgo.FetchMaxPartitionBytes(limit*2), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if got := fs.Records(); len(got) != 1 || !bytes.Equal(got[0].Value, value) {
		t.Fatalf("read back %d records, want the 5 MB record whole", len(got))
	}

	capped := kcfg
	capped.MaxBatchBytes = 2 * pipeline.MiB
	p2, err := pipeline.NewProducer(capped, big)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	err = p2.Produce(ctx, rec)
	if err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), "kafka.max_batch_bytes") {
		t.Fatalf("5 MB under kafka.max_batch_bytes 2MiB: %v, want a permanent error naming kafka.max_batch_bytes", err)
	}

	p3, err := pipeline.NewProducer(kcfg, small)
	if err != nil {
		t.Fatal(err)
	}
	defer p3.Close()
	err = p3.Produce(ctx, rec)
	if err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), "max.message.bytes") {
		t.Fatalf("5 MB to a topic at the default max.message.bytes: %v, want a permanent error naming max.message.bytes", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}
