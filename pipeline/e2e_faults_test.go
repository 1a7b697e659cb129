package pipeline_test

import (
	"fmt"
	"sync"
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
	c := kafkatest.New(t, 2)
	fetchFaultsRecoverQuickly(t, c.Kafka, func(stall func(string, func())) {
		stall("injected NotLeader", func() {
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: c.Name("moving"), Partitions: []int32{0}, Err: kerr.NotLeaderForPartition, Count: 3})
		})
	})
}

// fetchFaultsRecoverQuickly runs on c a leader move (with more than one
// broker), the faults more injects, and a dropped connection.
func fetchFaultsRecoverQuickly(t *testing.T, c *kafkatest.Kafka, more func(stall func(string, func()))) {
	topic, group := c.Name("moving"), c.Name("g-move")
	tp := offsetstore.TopicPartition{Topic: topic, Partition: 0}
	c.CreateTopic(t, topic, 2)

	// a producer writes a record to each partition every 5ms, and notes
	// when each was acknowledged
	var produced atomic.Int64
	var ackedMu sync.Mutex
	var acked []time.Time
	var produceErr atomic.Value
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
				if err := c.ProduceE(topic, p, 1, 1, values(fmt.Sprint(i))); err != nil {
					produceErr.Store(err)
					done <- err
					return
				}
			}
			ackedMu.Lock()
			acked = append(acked, time.Now())
			ackedMu.Unlock()
			produced.Store(int64(i + 1))
			time.Sleep(5 * time.Millisecond)
		}
	}()
	producing := func() {
		if err := produceErr.Load(); err != nil {
			t.Fatalf("the producer stopped: %v", err)
		}
	}

	rec := newRecorder()
	r := start(t, fastConfig(c, group, topic), pipeline.WithStage("record", rec))
	waitFor(t, 30*time.Second, "records to flow", func() bool { producing(); return len(rec.offsets(tp)) > 50 })

	// stall measures how long after a fault (once in effect) a record
	// produced after it is processed: from the end of the fault, or from
	// the record's acknowledgement if the producer itself took longer to
	// get past the fault (on Apache Kafka it must find a moved leader too).
	stall := func(what string, fault func()) {
		t.Helper()
		mark := produced.Load()
		fault()
		at := time.Now() // a real broker's leader move takes a while itself: count from its end
		waitFor(t, 10*time.Second, what+": a later record", func() bool {
			producing()
			got := rec.offsets(tp)
			return len(got) > 0 && got[len(got)-1] > mark+5
		})
		ackedMu.Lock()
		if i := int(mark + 6); i >= len(acked) {
			at = time.Now() // processed before the producer saw both partitions acknowledge it
		} else if acked[i].After(at) {
			at = acked[i]
		}
		ackedMu.Unlock()
		if d := time.Since(at); d > time.Second {
			t.Errorf("%s: fetching resumed after %v, want under a second", what, d)
		} else {
			t.Logf("%s: resumed after %v", what, d)
		}
	}
	if len(c.Nodes) > 1 {
		stall("leader move", func() {
			from := c.Leader(t, topic, 0)
			to := c.Nodes[0]
			if to == from {
				to = c.Nodes[1]
			}
			c.MoveLeader(t, topic, 0, to)
		})
	}
	more(stall)
	var dropped atomic.Bool
	stall("dropped connection", func() {
		leader := c.Leader(t, topic, 0)
		c.Intercept(t, kmsg.Fetch, func(node int32, _ kmsg.Request) kafkatest.Action {
			if node == leader && dropped.CompareAndSwap(false, true) {
				return kafkatest.Action{Cut: true}
			}
			return kafkatest.Action{}
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
		return int64(len(rec.offsets(tp))) >= want && int64(len(rec.offsets(offsetstore.TopicPartition{Topic: topic, Partition: 1}))) >= want
	})
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		got := rec.offsets(offsetstore.TopicPartition{Topic: topic, Partition: p})
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
