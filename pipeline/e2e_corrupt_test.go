package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestCorruptBatchStopsPartition: a broker answers a partition's fetches
// with three good records and then a corrupt batch (CRC wrong). The good
// records are processed and committed; the corrupt batch is fetched a few
// times, then the partition stops, saying which batch and what is wrong,
// visibly (Stats, and Run's error), while the other partition goes on.
// Before: the good records were withheld and the same bytes were fetched
// forever, with the partition shown ready.
func TestCorruptBatchStopsPartition(t *testing.T) {
	c := kafkatest.New(t, 1)
	topic, group := "corrupt", "g-corrupt"
	c.CreateTopic(t, topic, 2)
	for p := int32(0); p < 2; p++ {
		c.Produce(t, topic, p, 5, values("v")) // the real log: what lookups see
	}
	corrupt := kafkatest.RecordBatch(3, []byte("d"), []byte("e"))
	corrupt[len(corrupt)-1] ^= 0xff
	good := append(kafkatest.RecordBatch(0, []byte("a"), []byte("b")), kafkatest.RecordBatch(2, []byte("c"))...)
	var fetches atomic.Int32 // of partition 0 at the corrupt batch (on kfake's goroutine)
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		if len(req.Topics) != 1 || req.Topics[0].Topic != topic {
			return nil, nil, false
		}
		for _, rp := range req.Topics[0].Partitions {
			if rp.Partition != 0 {
				return nil, nil, false // partition 1 is served by the broker (alone, or together: see below)
			}
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		st := kmsg.NewFetchResponseTopic()
		st.Topic = topic
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.HighWatermark, sp.LastStableOffset = 5, 5
		switch off := req.Topics[0].Partitions[0].FetchOffset; {
		case off < 3:
			sp.RecordBatches = append(append([]byte(nil), good...), corrupt...)
		case off < 5:
			fetches.Add(1)
			sp.RecordBatches = corrupt
		}
		st.Partitions = append(st.Partitions, sp)
		resp.Topics = append(resp.Topics, st)
		return resp, nil, true
	})
	cfg := fastConfig(c, group, topic)
	cfg.Consumer.FetchConcurrency = 2 // each partition in a fetch of its own
	rec := newRecorder()
	r := start(t, cfg, pipeline.WithStage("record", rec))
	tp0 := offsetstore.TopicPartition{Topic: topic, Partition: 0}
	var st pipeline.Stats
	waitFor(t, 20*time.Second, "partition 0 to stop", func() bool {
		var err error
		st, err = r.p.Stats(context.Background())
		return err == nil && st.StoppedPartitions == 1
	})
	if got := rec.offsets(tp0); len(got) != 3 || got[0] != 0 || got[2] != 2 {
		t.Fatalf("partition 0 processed %v, want the good records 0, 1, 2", got)
	}
	waitFor(t, 10*time.Second, "partition 1's records", func() bool {
		return len(rec.offsets(offsetstore.TopicPartition{Topic: topic, Partition: 1})) == 5
	})
	waitFor(t, 10*time.Second, "the commit of the good records", func() bool { return c.Committed(t, group, topic)[0] == 3 })
	for _, ps := range st.Partitions {
		if ps.Partition != tp0 {
			continue
		}
		if ps.State != pipeline.Stopped || ps.Err == nil || !strings.Contains(ps.Err.Error(), "corrupt/0") ||
			!strings.Contains(ps.Err.Error(), "CRC mismatch in the batch at offset 3") {
			t.Fatalf("partition 0: %v, %v: want stopped naming the partition, the batch and what is wrong", ps.State, ps.Err)
		}
	}
	time.Sleep(300 * time.Millisecond) // a stopped partition is not fetched again
	if n := fetches.Load(); n != 2 {
		t.Fatalf("the corrupt batch was fetched again %d times, want 2 (3 in all, with the fetch that brought the good records)", n)
	}
	var stopped *pipeline.StoppedPartitionsError
	if err := r.shutdown(t); !errors.As(err, &stopped) || len(stopped.Partitions) != 1 || stopped.Partitions[0].Partition != tp0 {
		t.Fatalf("Run: %v, want a StoppedPartitionsError for %s", err, tp0)
	}
}
