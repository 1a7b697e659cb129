package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestRequestVersionsMeetKafka4: Apache Kafka 4.0 removed old request
// versions (KIP-896). A broker that refuses every request below Kafka
// 4.0's minimum versions serves the pipeline's whole life cycle: joining
// a group, resolving a start, fetching from two brokers, writing a dead
// letter, committing, a rebalance, leaving. A dependency upgrade that
// falls back to a removed version fails here, without Java.
func TestRequestVersionsMeetKafka4(t *testing.T) {
	c := kafkatest.New(t, 2)
	var mu sync.Mutex
	seen := map[kmsg.Key][]int16{}
	var refused []string
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		key, v := kmsg.Key(req.Key()), req.GetVersion()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(seen[key], v) {
			seen[key] = append(seen[key], v)
		}
		if floor := kafkatest.Kafka4MinVersions[key]; v < floor {
			refused = append(refused, fmt.Sprintf("%s v%d (Kafka 4.0 accepts v%d and later)", key.Name(), v, floor))
			return nil, errors.New("request version removed in Kafka 4.0"), true
		}
		return nil, nil, false
	})

	// fail at once, naming the request, rather than time out later
	checkRefused := func() {
		mu.Lock()
		defer mu.Unlock()
		if len(refused) > 0 {
			t.Fatalf("requests Kafka 4.0 refuses:\n%s", strings.Join(refused, "\n"))
		}
	}

	c.CreateTopic(t, "v", 2)
	c.CreateTopic(t, "v.dlq", 1)
	for p := int32(0); p < 2; p++ {
		c.Produce(t, "v", p, 10, values("v"))
	}
	// a stage that rejects one record, which goes to the dead-letter topic
	var processed sync.Map
	reject := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		return stages.ForEach(in, func(r *stages.Record, emit func(stages.Record)) error {
			processed.Store(fmt.Sprint(r.Partition, r.Offset), true)
			if r.Partition == 0 && r.Offset == 7 {
				return stages.Permanent(errors.New("rejected on purpose"))
			}
			emit(*r)
			return nil
		})
	})
	cfg := fastConfig(c, "g-versions", "v")
	cfg.DeadLetter = pipeline.DeadLetterConfig{Topic: "v.dlq"}
	a := start(t, cfg, pipeline.WithStage("reject", reject))
	waitFor(t, 20*time.Second, "20 records", func() bool {
		n := 0
		checkRefused()
		processed.Range(func(any, any) bool { n++; return true })
		return n == 20
	})
	waitFor(t, 20*time.Second, "commits of 10 and 10", func() bool {
		got := c.Committed(t, "g-versions", "v")
		return got[0] == 10 && got[1] == 10
	})
	if _, hw := c.Bounds(t, "v.dlq", 0); hw != 1 {
		t.Fatalf("dead-letter topic has %d records, want 1", hw)
	}
	b := start(t, cfg, pipeline.WithStage("reject", reject))
	c.Produce(t, "v", 1, 5, values("w"))
	waitFor(t, 20*time.Second, "the records produced during the rebalance", func() bool {
		checkRefused()
		return c.Committed(t, "g-versions", "v")[1] == 15
	})
	for _, r := range []*running{b, a} {
		if err := r.shutdown(t); err != nil {
			t.Fatal(err)
		}
	}

	checkRefused()
	mu.Lock()
	defer mu.Unlock()
	var atFloor []string
	for _, key := range []kmsg.Key{kmsg.Metadata, kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup,
		kmsg.OffsetFetch, kmsg.ListOffsets, kmsg.Fetch, kmsg.Produce, kmsg.OffsetCommit} {
		vs := seen[key]
		if len(vs) == 0 {
			t.Errorf("no %s request was seen: the scenario no longer covers it", key.Name())
			continue
		}
		if floor, ok := kafkatest.Kafka4MinVersions[key]; ok && slices.Contains(vs, floor) {
			atFloor = append(atFloor, fmt.Sprintf("%s v%d", key.Name(), floor))
		}
	}
	// docs/architecture.md lists these: the next removal breaks them first
	t.Logf("requests sent at exactly Kafka 4.0's minimum version: %s", strings.Join(atFloor, ", "))
}
