package pipeline_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestReadCommittedLatest: a transaction writes offsets 0-2 and stays
// open; the pipeline starts at latest with read_committed; the
// transaction commits and a record is written after it: all four records
// are delivered, as the Java consumer does. "latest" is the last
// stable offset under read_committed, not the high watermark.
func TestReadCommittedLatest(t *testing.T) { readCommittedLatest(t, kafkatest.New(t, 1).Kafka) }

func readCommittedLatest(t *testing.T, c *kafkatest.Kafka) {
	topic, group := c.Name("rc-latest"), c.Name("g-rc-latest")
	tp := offsetstore.TopicPartition{Topic: topic, Partition: 0}
	c.CreateTopic(t, topic, 1)
	txn, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.TransactionalID(c.Name("txn")),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := txn.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: values("txn")(i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	cfg := fastConfig(c, group, topic)
	cfg.Consumer.AutoOffsetReset = offsetstore.ResetLatest
	cfg.Consumer.ReadCommitted = true
	ev := &events{}
	rec := newRecorder()
	r := start(t, cfg, append(ev.options(), pipeline.WithStage("record", rec))...)
	waitFor(t, 30*time.Second, "the partition to start", func() bool { return len(ev.resetsOf(tp)) > 0 })
	if st := ev.resetsOf(tp)[0]; st.To != 0 {
		t.Errorf("started at %d with a transaction open at 0..2: want 0, the last stable offset (%+v)", st.To, st)
	}

	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// EndTransaction returns once the commit is decided; the brokers
	// write the marker after that, so the next record is at 4 (after
	// the marker at 3) or, on a busy Apache Kafka, at 3 (marker at 4).
	c.Produce(t, topic, 0, 1, values("after"))
	waitFor(t, 30*time.Second, "the four records to be processed", func() bool { return len(rec.offsets(tp)) >= 4 })
	if got := rec.offsets(tp); len(got) != 4 || !slices.Equal(got[:3], []int64{0, 1, 2}) || (got[3] != 3 && got[3] != 4) {
		t.Fatalf("processed %v, want [0 1 2] and the record after them (3 or 4): the committed transaction's records and the one after it", got)
	}
	if err := r.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// leaderEpochRequests records, per broker, the leader epochs the requests for
// one partition carried.
type leaderEpochRequests struct {
	mu sync.Mutex
	// fetches: CurrentLeaderEpoch of each Fetch, in order, with the node
	fetches []nodeLeaderEpoch
	// validations: OffsetForLeaderEpoch requests
	validations []validation
}

type nodeLeaderEpoch struct {
	node        int32
	leaderEpoch int32
}

type validation struct {
	node               int32
	current, requested int32
}

// watch intercepts c's Fetch and OffsetForLeaderEpoch requests for tp.
func (e *leaderEpochRequests) watch(t *testing.T, c *kafkatest.Kafka, tp offsetstore.TopicPartition) {
	c.Intercept(t, kmsg.Fetch, func(node int32, req kmsg.Request) kafkatest.Action {
		r, ok := req.(*kmsg.FetchRequest)
		if !ok {
			return kafkatest.Action{}
		}
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == tp.Topic && rp.Partition == tp.Partition {
					e.mu.Lock()
					e.fetches = append(e.fetches, nodeLeaderEpoch{node, rp.CurrentLeaderEpoch})
					e.mu.Unlock()
				}
			}
		}
		return kafkatest.Action{}
	})
	c.Intercept(t, kmsg.OffsetForLeaderEpoch, func(node int32, req kmsg.Request) kafkatest.Action {
		r, ok := req.(*kmsg.OffsetForLeaderEpochRequest)
		if !ok {
			return kafkatest.Action{}
		}
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == tp.Topic && rp.Partition == tp.Partition {
					e.mu.Lock()
					e.validations = append(e.validations, validation{node, rp.CurrentLeaderEpoch, rp.LeaderEpoch})
					e.mu.Unlock()
				}
			}
		}
		return kafkatest.Action{}
	})
}

func (e *leaderEpochRequests) snapshot() ([]nodeLeaderEpoch, []validation) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.fetches), slices.Clone(e.validations)
}

// TestLeaderMoveCarriesEpochs: while the pipeline fetches, the partition's
// leader moves. Every fetch carries the leader epoch of the broker it
// goes to (never -1), the new leader is asked where the last record's
// leader epoch ends (OffsetForLeaderEpoch) before fetching goes on there,
// and no record is lost or reset.
func TestLeaderMoveCarriesEpochs(t *testing.T) { leaderMoveCarriesEpochs(t, kafkatest.New(t, 2).Kafka) }

func leaderMoveCarriesEpochs(t *testing.T, c *kafkatest.Kafka) {
	topic, group := c.Name("epoch-move"), c.Name("g-epoch-move")
	tp := offsetstore.TopicPartition{Topic: topic, Partition: 0}
	c.CreateTopic(t, topic, 1)
	from := c.Leader(t, topic, 0)
	to := c.Nodes[0]
	if to == from {
		to = c.Nodes[1]
	}
	c.Produce(t, topic, 0, 20, values("before"))
	var seen leaderEpochRequests
	seen.watch(t, c, tp)
	oldLeaderEpoch := c.LeaderEpoch(t, topic, 0)

	ev := &events{}
	rec := newRecorder()
	r := start(t, fastConfig(c, group, topic), append(ev.options(), pipeline.WithStage("record", rec))...)
	waitFor(t, 30*time.Second, "the first records", func() bool { return len(rec.offsets(tp)) >= 20 })

	c.MoveLeader(t, topic, 0, to)
	newLeaderEpoch := c.LeaderEpoch(t, topic, 0)
	if newLeaderEpoch <= oldLeaderEpoch {
		t.Fatalf("leader epoch %d after the move, was %d", newLeaderEpoch, oldLeaderEpoch)
	}
	c.Produce(t, topic, 0, 20, values("after"))
	waitFor(t, 60*time.Second, "every record", func() bool { return len(rec.offsets(tp)) >= 40 })
	if err := r.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	got := rec.offsets(tp)
	for o := int64(0); o < 40; o++ {
		if !slices.Contains(got, o) {
			t.Fatalf("offset %d never processed (processed %v)", o, got)
		}
	}
	fetches, validations := seen.snapshot()
	var toNew int
	for _, f := range fetches {
		switch {
		case f.leaderEpoch < 0:
			t.Fatalf("a fetch to node %d carried no leader epoch: %+v", f.node, fetches)
		case f.node == to && f.leaderEpoch == newLeaderEpoch:
			toNew++
		}
	}
	if toNew == 0 {
		t.Fatalf("no fetch to the new leader %d with leader epoch %d: %+v", to, newLeaderEpoch, fetches)
	}
	// (on Kafka a move may pass through a leader epoch of its own: the
	// validation may carry any leader epoch past the old one)
	if !slices.ContainsFunc(validations, func(v validation) bool {
		return v.node == to && v.requested == oldLeaderEpoch && v.current > oldLeaderEpoch && v.current <= newLeaderEpoch
	}) {
		t.Fatalf("the new leader %d was not asked where leader epoch %d ends (under leader epoch %d): %+v", to, oldLeaderEpoch, newLeaderEpoch, validations)
	}
	for _, rs := range ev.resetsOf(tp) {
		if rs.Reason != offsetstore.ReasonNoCommittedOffset {
			t.Fatalf("a leader move reset the partition: %+v", rs)
		}
	}
	if n := ev.stoppedCount(); n != 0 {
		t.Fatalf("%d partitions stopped", n)
	}
	t.Logf("leader %d -> %d, leader epoch %d -> %d; %d fetches, validations %+v", from, to, oldLeaderEpoch, newLeaderEpoch, len(fetches), validations)
}

// TestLogTruncationReported: after a leader move the new leader says the
// leader epoch of the last record read ends below the position (kfake
// cannot lose records, so its answer is replaced: an unclean election
// that truncated the log answers this way; the real-Kafka suite makes
// one).
// The divergence is reported as a log_truncation reset with data loss,
// counted, and the partition resumes at the divergence point: everything
// from there is processed (again) and committed.
func TestLogTruncationReported(t *testing.T) {
	c := kafkatest.New(t, 2)
	topic, group := c.Name("trunc"), c.Name("g-trunc")
	tp := offsetstore.TopicPartition{Topic: topic, Partition: 0}
	c.CreateTopic(t, topic, 1)
	from := c.Kafka.Leader(t, topic, 0)
	c.Produce(t, topic, 0, 30, values("before"))

	ev := &events{}
	rec := newRecorder()
	r := start(t, fastConfig(c, group, topic), append(ev.options(), pipeline.WithStage("record", rec))...)
	waitFor(t, 30*time.Second, "30 records committed", func() bool { return c.Committed(t, group, topic)[0] == 30 })

	// the next OffsetForLeaderEpoch says the epoch ends at 20
	c.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetForLeaderEpochRequest)
		resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, rp.LeaderEpoch, 20
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	c.MoveLeader(t, topic, 0, 1-from)
	c.Produce(t, topic, 0, 10, values("after")) // 30..39
	waitFor(t, 30*time.Second, "the truncation reported", func() bool {
		for _, rs := range ev.resetsOf(tp) {
			if rs.Reason == offsetstore.ReasonLogTruncation {
				return true
			}
		}
		return false
	})
	waitFor(t, 30*time.Second, "40 records committed", func() bool { return c.Committed(t, group, topic)[0] == 40 })
	st, err := r.p.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var trunc offsetstore.ResetEvent
	for _, rs := range ev.resetsOf(tp) {
		if rs.Reason == offsetstore.ReasonLogTruncation {
			trunc = rs
		}
	}
	if trunc.From != 30 || trunc.To != 20 || !trunc.DataLoss || trunc.Skipped != 0 {
		t.Fatalf("reset %+v: want log_truncation from 30 to 20, data loss, nothing skipped", trunc)
	}
	if st.Resets != 1 {
		t.Fatalf("Stats.Resets %d, want 1", st.Resets)
	}
	count := map[int64]int{}
	for _, o := range rec.offsets(tp) {
		count[o]++
	}
	for o := int64(0); o < 40; o++ {
		want := 1
		if o >= 20 && o < 30 {
			want = 2 // read again from the divergence point
		}
		if count[o] != want {
			t.Fatalf("offset %d processed %d times, want %d", o, count[o], want)
		}
	}
}

// TestTopicRecreatedUnderRunningPipeline: the topic is deleted and
// created again while the pipeline reads it; the new topic's leader
// epochs start over, below the one the pipeline knew. The pipeline takes
// the new leader epoch (it does not keep fetching with the old one, which
// the broker refuses forever) and reads the new topic's records.
func TestTopicRecreatedUnderRunningPipeline(t *testing.T) {
	c := kafkatest.New(t, 2)
	topic, group := c.Name("again"), c.Name("g-again")
	tp := offsetstore.TopicPartition{Topic: topic, Partition: 0}
	c.CreateTopic(t, topic, 1)
	c.Produce(t, topic, 0, 10, values("old"))
	for i := 0; i < 3; i++ { // the old topic's leader epoch climbs
		c.MoveLeader(t, topic, 0, int32(1-i%2))
	}
	old := c.LeaderEpoch(t, topic, 0)
	rec := newRecorder()
	ev := &events{}
	r := start(t, fastConfig(c, group, topic), append(ev.options(), pipeline.WithStage("record", rec))...)
	waitFor(t, 30*time.Second, "the old records", func() bool { return len(rec.offsets(tp)) >= 10 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Admin.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	c.CreateTopic(t, topic, 1)
	if now := c.LeaderEpoch(t, topic, 0); now >= old {
		t.Fatalf("the new topic's leader epoch %d is not below the old one's %d", now, old)
	}
	c.Produce(t, topic, 0, 15, values("new"))
	waitFor(t, 30*time.Second, "the new topic's records", func() bool { return slices.Contains(rec.offsets(tp), 14) })
	if err := r.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := ev.stoppedCount(); n != 0 {
		t.Fatalf("%d partitions stopped", n)
	}
}
