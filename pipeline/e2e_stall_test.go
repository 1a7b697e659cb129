package pipeline_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestLargeRecordNeverStalls: a record larger than buffer_bytes and
// max_partition_fetch_bytes is still delivered (Kafka returns a
// partition's first batch whatever its size, so a consumer always
// progresses), whether or not other partitions fetched with it (one
// fetch per broker) or beside it (two) have nothing to return: 64, 256
// and 512 KiB limits, a 600 KB record, written while the pipeline runs
// and every partition is caught up, so an idle partition's fetcher could
// take the whole budget for its long polls.
func TestLargeRecordNeverStalls(t *testing.T) {
	for _, limit := range []pipeline.ByteSize{64 * pipeline.KiB, 256 * pipeline.KiB, 512 * pipeline.KiB} {
		for _, sc := range []struct {
			idle        int32 // partitions besides the large record's
			idleRecords int   // records each of them had (then caught up)
			concurrency int   // fetch_concurrency
		}{
			{idle: 0, concurrency: 2},
			{idle: 1, idleRecords: 0, concurrency: 1},
			{idle: 1, idleRecords: 0, concurrency: 2},
			{idle: 1, idleRecords: 1, concurrency: 2},
			{idle: 3, idleRecords: 0, concurrency: 2},
			{idle: 3, idleRecords: 1, concurrency: 1},
		} {
			t.Run(fmt.Sprintf("limit=%v/idle=%d/records=%d/concurrency=%d", limit, sc.idle, sc.idleRecords, sc.concurrency), func(t *testing.T) {
				largeRecordNeverStalls(t, kafkatest.New(t, 1).Kafka, limit, sc.idle, sc.idleRecords, sc.concurrency)
			})
		}
	}
}

// largeRecordNeverStalls runs the scenario with idle partitions besides
// the one the large record goes to (the last).
func largeRecordNeverStalls(t *testing.T, c *kafkatest.Kafka, limit pipeline.ByteSize, idle int32, idleRecords, concurrency int) {
	topic, group := c.Name("large"), c.Name("g-large")
	c.CreateTopic(t, topic, idle+1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(p int32, v []byte) {
		t.Helper()
		if err := c.Client.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for p := range idle {
		for range idleRecords {
			produce(p, []byte("first"))
		}
	}
	produce(idle, []byte("first"))
	cfg := fastConfig(c, group, topic)
	cfg.Consumer.BufferBytes = limit
	cfg.Consumer.MaxPartitionFetchBytes = limit
	cfg.Consumer.FetchConcurrency = concurrency
	rec := newRecorder()
	r := start(t, cfg, pipeline.WithStage("record", rec))
	waitFor(t, 20*time.Second, "every partition's first record", func() bool { return rec.total() == int(idle)*idleRecords+1 })
	time.Sleep(300 * time.Millisecond) // every partition caught up, its fetch a long poll

	big := make([]byte, 600_000)
	_, _ = rand.Read(big) // incompressible
	large := offsetstore.TopicPartition{Topic: topic, Partition: idle}
	produce(large.Partition, big)
	produce(large.Partition, []byte("after"))
	waitFor(t, 15*time.Second, "the large record and the one after it", func() bool { return len(rec.offsets(large)) >= 3 })
	if err := r.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := rec.offsets(large); len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 2 {
		t.Fatalf("large partition processed %v, want [0 1 2]", got)
	}
	if got, want := rec.total(), int(idle)*idleRecords+3; got != want {
		t.Fatalf("processed %d records, want %d", got, want)
	}
}
