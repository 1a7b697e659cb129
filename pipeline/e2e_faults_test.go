package pipeline_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestFetchFaultsRecoverQuickly: a leader move, injected NotLeader
// answers, and a dropped connection mid-stream each stall a partition for
// less than a second, and no record is lost.
func TestFetchFaultsRecoverQuickly(t *testing.T) {
	tp := offsetstore.TopicPartition{Topic: "moving", Partition: 0}
	c := kafkatest.New(t, 2)
	c.CreateTopic(t, "moving", 2)

	// a producer writes a record to each partition every 5ms
	var produced atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			for p := int32(0); p < 2; p++ {
				if err := c.ProduceE("moving", p, 1, 1, values(fmt.Sprint(i))); err != nil {
					done <- err
					return
				}
			}
			produced.Store(int64(i + 1))
			time.Sleep(5 * time.Millisecond)
		}
	}()

	rec := newRecorder()
	r := start(t, fastConfig(c, "g-move", "moving"), pipeline.WithStage("record", rec))
	waitFor(t, 10*time.Second, "records to flow", func() bool { return len(rec.offsets(tp)) > 50 })

	// stall measures how long after a fault a record produced after it
	// is processed.
	stall := func(what string, fault func()) {
		t.Helper()
		mark := produced.Load()
		at := time.Now()
		fault()
		waitFor(t, 5*time.Second, what+": a later record", func() bool {
			got := rec.offsets(tp)
			return len(got) > 0 && got[len(got)-1] > mark+5
		})
		if d := time.Since(at); d > time.Second {
			t.Errorf("%s: fetching resumed after %v, want under a second", what, d)
		} else {
			t.Logf("%s: resumed after %v", what, d)
		}
	}
	stall("leader move", func() {
		if err := c.MoveTopicPartition("moving", 0, 1-c.LeaderFor("moving", 0)); err != nil {
			t.Fatal(err)
		}
	})
	stall("injected NotLeader", func() {
		c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "moving", Partitions: []int32{0}, Err: kerr.NotLeaderForPartition, Count: 3})
	})
	var dropped atomic.Bool
	stall("dropped connection", func() {
		leader := c.LeaderFor("moving", 0)
		c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
			if c.CurrentNode() != leader {
				c.KeepControl()
				return nil, nil, false
			}
			dropped.Store(true)
			return nil, errors.New("drop the connection"), true
		})
	})
	if !dropped.Load() {
		t.Fatal("no connection was dropped")
	}

	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := produced.Load()
	waitFor(t, 10*time.Second, "every record", func() bool {
		return int64(len(rec.offsets(tp))) >= want && int64(len(rec.offsets(offsetstore.TopicPartition{Topic: "moving", Partition: 1}))) >= want
	})
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		got := rec.offsets(offsetstore.TopicPartition{Topic: "moving", Partition: p})
		for i, o := range got {
			if o != int64(i) {
				t.Fatalf("partition %d: record %d is offset %d: lost or duplicated", p, i, o)
			}
		}
		if int64(len(got)) != want {
			t.Fatalf("partition %d: %d records processed, %d produced", p, len(got), want)
		}
	}
}
