package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestOutputOutageHoldsWithinTheBudget: while the output topic answers
// UNKNOWN_TOPIC_OR_PARTITION to every write (as after it was deleted),
// nothing is dead-lettered: the partitions wait, readiness says why
// (Stats.WaitingForOutput, OutputError), fetching stops at the byte
// budget, so buffered bytes stay within consumer.buffer_bytes (plus one
// fetch response, as documented); once the
// topic is back every record arrives (at least once) and everything is
// committed, with nothing lost.
func TestOutputOutageHoldsWithinTheBudget(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "in", 2)
	c.CreateTopic(t, "out", 1)
	c.CreateTopic(t, "dlq", 1)
	const perPartition = 150
	value := func(p int32) func(int) []byte {
		return func(i int) []byte { return fmt.Appendf(nil, "%d-%04d-%s", p, i, strings.Repeat("x", 1000)) }
	}
	for p := int32(0); p < 2; p++ {
		if err := c.ProduceE("in", p, 30, 10, value(p)); err != nil {
			t.Fatal(err)
		}
	}
	var down, refused atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.ProduceRequest)
		if !down.Load() || len(r.Topics) == 0 || r.Topics[0].Topic != "out" {
			return nil, nil, false
		}
		refused.Store(true)
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	cfg := fastConfig(c, "g-outage", "in")
	cfg.DeadLetter = pipeline.DeadLetterConfig{Policy: pipeline.DeadLetterTopic, Topic: "dlq", Retries: 2, Backoff: 10 * time.Millisecond}
	cfg.Consumer.BufferBytes = 64 << 10
	cfg.Consumer.FetchMaxBytes = 16 << 10
	cfg.Consumer.MaxPartitionFetchBytes = 8 << 10
	r := start(t, cfg, pipeline.WithStage("produce", writeTo(newProducer(t, c, "out"))), pipeline.WithOutputTopics("out"))
	stats := func() pipeline.Stats {
		s, err := r.p.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	waitFor(t, 15*time.Second, "the first records written", func() bool { return committed(c, "g-outage", "in", 0) > 0 })

	down.Store(true)
	for p := int32(0); p < 2; p++ {
		if err := c.ProduceE("in", p, perPartition-30, 10, func(i int) []byte { return value(p)(i + 30) }); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "readiness to report the output unavailable", func() bool {
		s := stats()
		return s.WaitingForOutput > 0 && strings.Contains(s.OutputError, "Unknown Topic Or Partition")
	})
	// hold the outage; fetching must stop at the budget
	var maxSeen int64
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		s := stats()
		maxSeen = max(maxSeen, s.BufferedBytes)
		if s.DeadLetters > 0 {
			t.Fatalf("%d dead letters while the output was unavailable, want none", s.DeadLetters)
		}
		if s.WaitingForOutput == 0 {
			t.Fatalf("readiness stopped reporting the outage while it lasted")
		}
	}
	s := stats()
	// The documented bound (Stats.BufferedBytes): the budget plus one
	// fetch response (a broker returns at least one whole batch, and the
	// budget counts each record's bookkeeping on top of its payload).
	// Far below the ~300 KB waiting in the log: fetching paused.
	if limit := int64(cfg.Consumer.BufferBytes + cfg.Consumer.FetchMaxBytes); s.MaxBufferedBytes > limit || maxSeen > limit {
		t.Fatalf("buffered up to %d bytes (sampled %d) while the output was down, limit %d (budget + one fetch response)", s.MaxBufferedBytes, maxSeen, limit)
	}
	if maxSeen < int64(cfg.Consumer.BufferBytes)/2 {
		t.Fatalf("buffered only %d bytes: the outage never filled the budget, the test proves nothing", maxSeen)
	}
	behind := committed(c, "g-outage", "in", 0) + committed(c, "g-outage", "in", 1)
	if behind >= 2*perPartition {
		t.Fatalf("committed %d of %d during the outage", behind, 2*perPartition)
	}
	t.Logf("during the outage: buffered at most %d bytes (budget %d), committed %d of %d, output error %q",
		s.MaxBufferedBytes, cfg.Consumer.BufferBytes, behind, 2*perPartition, s.OutputError)

	down.Store(false)
	waitFor(t, 30*time.Second, "everything committed after the output came back", func() bool {
		return committed(c, "g-outage", "in", 0) == perPartition && committed(c, "g-outage", "in", 1) == perPartition
	})
	if s := stats(); s.WaitingForOutput != 0 || s.OutputError != "" || s.DeadLetters != 0 {
		t.Fatalf("after recovery: waiting %d, error %q, dead letters %d", s.WaitingForOutput, s.OutputError, s.DeadLetters)
	}
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, rec := range readAll(t, c, "out") {
		seen[string(rec.Value[:6])]++
	}
	for p := int32(0); p < 2; p++ {
		for i := range perPartition {
			if k := fmt.Sprintf("%d-%04d", p, i); seen[k] == 0 {
				t.Fatalf("record %s never reached the output (%d distinct written)", k, len(seen))
			}
		}
	}
	if dl := readAll(t, c, "dlq"); len(dl) != 0 {
		t.Fatalf("%d dead letters, want none", len(dl))
	}
	if !refused.Load() {
		t.Fatal("the fault was never injected")
	}
}
