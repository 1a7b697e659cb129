package pipeline_test

import (
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestConsumeAndCommit: every record of four partitions led by two
// brokers is processed once, in order, and the group commits the end of
// every partition.
func TestConsumeAndCommit(t *testing.T) {
	consumeAndCommit(t, kafkatest.New(t, 2).Kafka)
}

func consumeAndCommit(t *testing.T, c *kafkatest.Kafka) {
	topic, group := c.Name("orders"), c.Name("g1")
	c.CreateTopic(t, topic, 4)
	for p := int32(0); p < 4; p++ {
		c.Produce(t, topic, p, 250, values("o"))
	}
	rec := newRecorder()
	r := start(t, fastConfig(c, group, topic), pipeline.WithStage("record", rec))
	waitFor(t, 20*time.Second, "1000 records", func() bool { return rec.total() >= 1000 })
	if err := r.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for p := int32(0); p < 4; p++ {
		got := rec.offsets(offsetstore.TopicPartition{Topic: topic, Partition: p})
		if len(got) != 250 {
			t.Fatalf("partition %d: %d records, want 250", p, len(got))
		}
		for i, o := range got {
			if o != int64(i) {
				t.Fatalf("partition %d: record %d has offset %d", p, i, o)
			}
		}
	}
	committed := c.Committed(t, group, topic)
	for p := int32(0); p < 4; p++ {
		if committed[p] != 250 {
			t.Fatalf("committed %v, want 250 on every partition", committed)
		}
	}
}
