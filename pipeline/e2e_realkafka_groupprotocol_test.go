//go:build realkafka

package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// consumerProtocolOnThisBroker asks the brokers (ApiVersions) whether they
// offer the consumer group protocol (KIP-848) and checks a pipeline with
// consumer.group_protocol: consumer does what it must on them: on Kafka
// 4.x it consumes and commits every record; on 3.x Run fails at start,
// within seconds, with an error naming the broker's release (version's
// major.minor) and the setting to change, and processes nothing.
func consumerProtocolOnThisBroker(t *testing.T, c *kafkatest.Kafka, version string) {
	topic, grp := c.Name("t"), c.Name("g")
	c.CreateTopic(t, topic, 2)
	for p := int32(0); p < 2; p++ {
		c.Produce(t, topic, p, 50, values("r"))
	}
	cfg := fastConfig(c, grp, topic)
	cfg.Consumer.GroupProtocol = pipeline.GroupProtocolConsumer
	// the broker's group.consumer.session.timeout.ms (its default)
	cfg.Consumer.SessionTimeout = 45 * time.Second
	rec := newRecorder()
	began := time.Now()
	r := start(t, cfg, pipeline.WithStage("record", rec))
	if c.ConsumerGroupProtocol(t) {
		t.Logf("Apache Kafka %s offers the consumer group protocol", version)
		waitFor(t, 30*time.Second, "100 records", func() bool { return rec.total() >= 100 })
		if err := r.shutdown(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
		committed := c.Committed(t, grp, topic)
		for p := int32(0); p < 2; p++ {
			if committed[p] != 50 {
				t.Errorf("partition %d committed at %d, want 50", p, committed[p])
			}
		}
		return
	}
	err := consumerProtocolRefused(t, r)
	t.Logf("Run failed after %v", time.Since(began).Round(time.Millisecond))
	release := "Apache Kafka " + strings.Join(strings.SplitN(version, ".", 3)[:2], ".") + " (metadata.version "
	if !strings.Contains(err.Error(), release) {
		t.Errorf("the error does not name the broker's release: %q", release)
	}
	if n := rec.total(); n != 0 {
		t.Errorf("%d records processed, want none", n)
	}
}
