package pipeline_test

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestProducerPlacesKeys: a key goes to the partition the Java
// producer gives it (murmur2), by default, and with Partitioner fnv1a to
// the one kafka-go's Hash balancer gives it (where Producer put keys
// before murmur2), so data already written can keep its placement. The
// murmur2 values are derived from the hashes Kafka's UtilsTest pins for
// these keys ((hash & 0x7fffffff) % partitions) and checked against
// franz-go's default partitioner too; the fnv1a ones were computed with
// kafka-go's balancer, which the test checks them against.
func TestProducerPlacesKeys(t *testing.T) {
	type placed struct {
		key        string
		partitions int32
		want       int32
	}
	tests := []struct {
		partitioner pipeline.Partitioner
		check       func(key []byte, parts []int) int // the other client's placement
		placed      []placed
	}{
		{"", func(key []byte, parts []int) int {
			return kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: key}, len(parts))
		}, []placed{
			{"21", 6, 0}, {"foobar", 6, 0}, {"abc", 6, 3}, {"a-little-bit-long-string", 6, 2}, {"a-little-bit-longer-string", 6, 5},
			{"21", 16, 12}, {"foobar", 16, 14}, {"abc", 16, 11}, {"a-little-bit-long-string", 16, 0}, {"a-little-bit-longer-string", 16, 3},
		}},
		{pipeline.PartitionerFNV1a, func(key []byte, parts []int) int {
			return (&kafka.Hash{}).Balance(kafka.Message{Key: key}, parts...)
		}, []placed{
			{"", 6, 3}, {"a", 6, 0}, {"user-1", 6, 0}, {"user-42", 6, 3}, {"order-1001", 6, 0}, {"ßü-key", 6, 0},
			{"", 16, 11}, {"a", 16, 4}, {"user-1", 16, 12}, {"user-42", 16, 11}, {"order-1001", 16, 4}, {"ßü-key", 16, 14},
		}},
	}
	c := kafkatest.New(t, 1)
	ctx := context.Background()
	for _, tt := range tests {
		name := cmp.Or(string(tt.partitioner), "default")
		for _, n := range []int32{6, 16} {
			c.CreateTopic(t, fmt.Sprintf("%s%d", name, n), n)
		}
		producers := map[int32]*pipeline.Producer{}
		for _, pl := range tt.placed {
			parts := make([]int, pl.partitions)
			for i := range parts {
				parts[i] = i
			}
			if got := tt.check([]byte(pl.key), parts); int32(got) != pl.want {
				t.Fatalf("%s: the other client puts %q on %d of %d, the pinned value is %d", name, pl.key, got, pl.partitions, pl.want)
			}
			topic := fmt.Sprintf("%s%d", name, pl.partitions)
			p := producers[pl.partitions]
			if p == nil {
				var err error
				if p, err = pipeline.NewProducer(pipeline.KafkaConfig{Brokers: c.Addrs, Partitioner: tt.partitioner}, topic); err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				producers[pl.partitions] = p
			}
			if err := p.Produce(ctx, []stages.Record{{Key: []byte(pl.key), Value: []byte(topic + "/" + pl.key)}}); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]int32{}
		for _, n := range []int32{6, 16} {
			for _, r := range readAll(t, c, fmt.Sprintf("%s%d", name, n)) {
				got[string(r.Value)] = r.Partition
			}
		}
		for _, pl := range tt.placed {
			v := fmt.Sprintf("%s%d/%s", name, pl.partitions, pl.key)
			if p, ok := got[v]; !ok || p != pl.want {
				t.Errorf("%s: key %q of %d partitions written to %d (found: %v), want %d", name, pl.key, pl.partitions, p, ok, pl.want)
			}
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
