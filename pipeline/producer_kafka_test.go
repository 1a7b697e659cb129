package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestProducerKeepsKeyPartitions: a key goes to the partition kafka-go's
// Hash balancer gives it (what Producer used before it wrote through
// internal/produce, and what the exactly_once producer uses), so data
// already written keeps its placement. The pinned values were computed
// with kafka-go's balancer; the test checks them against it too.
func TestProducerKeepsKeyPartitions(t *testing.T) {
	tests := []struct {
		key        string
		partitions int32
		want       int32
	}{
		{"", 6, 3}, {"a", 6, 0}, {"user-1", 6, 0}, {"user-42", 6, 3}, {"order-1001", 6, 0}, {"ßü-key", 6, 0},
		{"", 16, 11}, {"a", 16, 4}, {"user-1", 16, 12}, {"user-42", 16, 11}, {"order-1001", 16, 4}, {"ßü-key", 16, 14},
	}
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "p6", 6)
	c.CreateTopic(t, "p16", 16)
	ctx := context.Background()
	for _, tt := range tests {
		parts := make([]int, tt.partitions)
		for i := range parts {
			parts[i] = i
		}
		if got := (&kafka.Hash{}).Balance(kafka.Message{Key: []byte(tt.key)}, parts...); int32(got) != tt.want {
			t.Fatalf("kafka-go's Hash puts %q on %d of %d, the pinned value is %d", tt.key, got, tt.partitions, tt.want)
		}
		topic := fmt.Sprintf("p%d", tt.partitions)
		if err := newProducer(t, c, topic).Produce(ctx, []stages.Record{{Key: []byte(tt.key), Value: []byte(topic + "/" + tt.key)}}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int32{}
	for _, topic := range []string{"p6", "p16"} {
		for _, r := range readAll(t, c, topic) {
			got[string(r.Value)] = r.Partition
		}
	}
	for _, tt := range tests {
		v := fmt.Sprintf("p%d/%s", tt.partitions, tt.key)
		if p, ok := got[v]; !ok || p != tt.want {
			t.Errorf("key %q of %d partitions written to %d (found: %v), want %d", tt.key, tt.partitions, p, ok, tt.want)
		}
	}
}

// TestProducerRetryDoesNotDuplicate: the broker writes a batch but its
// answer is REQUEST_TIMED_OUT (twice); Producer retries the request and
// the log holds every record once (the idempotent producer's sequence
// numbers make the broker drop the retries). kafka-go's Writer, which
// Producer wrapped before, wrote the records more than once here.
func TestProducerRetryDoesNotDuplicate(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 2)
	h := c.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Err: kerr.RequestTimedOut, Count: 2})
	defer h.Remove()
	p := newProducer(t, c, "out")
	recs := make([]stages.Record, 50)
	for i := range recs {
		recs[i] = stages.Record{Key: []byte{byte(i)}, Value: fmt.Appendf(nil, "v%d", i)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Produce(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if h.Hits() != 2 {
		t.Fatalf("the fault answered %d requests, want 2", h.Hits())
	}
	seen := map[string]int{}
	for _, r := range readAll(t, c, "out") {
		seen[string(r.Value)]++
	}
	for _, r := range recs {
		if seen[string(r.Value)] != 1 {
			t.Errorf("%s written %d times, want once", r.Value, seen[string(r.Value)])
		}
	}
	if len(seen) != len(recs) {
		t.Errorf("%d distinct records in the log, want %d", len(seen), len(recs))
	}
}

// TestProducerClassifiesBrokerErrors: Producer's errors, from a real
// produce, carry the marks its doc promises: the records' fault
// Permanent, the topic's Unavailable, the caller's ended context
// neither.
func TestProducerClassifiesBrokerErrors(t *testing.T) {
	tests := []struct {
		name  string
		key   kmsg.Key // the request faulted; default Produce
		fault kerr.Error
		ended bool
		want  string
		says  string // the error says it too
	}{
		{"message too large", kmsg.Produce, *kerr.MessageTooLarge, false, "permanent", ""},
		{"invalid record", kmsg.Produce, *kerr.InvalidRecord, false, "permanent", ""},
		{"not authorized for the topic", kmsg.Produce, *kerr.TopicAuthorizationFailed, false, "unavailable", ""},
		{"the caller's context ended", 0, *kerr.RequestTimedOut, true, "other", ""},
		{"no permission to write idempotently", kmsg.InitProducerID, *kerr.ClusterAuthorizationFailed, false, "unavailable", "IDEMPOTENT_WRITE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.New(t, 1)
			c.CreateTopic(t, "out", 1)
			fault := tt.fault
			f := kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Err: &fault, Count: -1}
			if tt.key != kmsg.Produce && !tt.ended {
				f.Keys, f.Topic = []kmsg.Key{tt.key}, ""
			}
			h := c.Cluster.Fault(f)
			defer h.Remove()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if tt.ended {
				ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
			}
			err := newProducer(t, c, "out").Produce(ctx, []stages.Record{{Key: []byte("k"), Value: []byte("v")}})
			got := "other"
			switch {
			case err == nil:
				t.Fatal("Produce succeeded under the fault")
			case stages.IsPermanent(err) && stages.IsUnavailable(err):
				t.Fatalf("%v is marked both permanent and unavailable", err)
			case stages.IsPermanent(err):
				got = "permanent"
			case stages.IsUnavailable(err):
				got = "unavailable"
			}
			if got != tt.want {
				t.Fatalf("%v classified %s, want %s", err, got, tt.want)
			}
			if !tt.ended && !strings.Contains(err.Error(), kafka.Error(fault.Code).Error()) {
				t.Fatalf("%v does not name the broker's error %s", err, fault.Message)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("%v does not say %q", err, tt.says)
			}
		})
	}
}
