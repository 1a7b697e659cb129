//go:build realkafka

package pipeline_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/logging"
	"github.com/fencepost-dev/fencepost/internal/realkafka"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestRealKafkaEpochs runs Kafka's safety protocol (KIP-320 leader
// epochs, the last stable offset) against Apache Kafka on three nodes,
// whatever FENCEPOST_KAFKA says: a leader move and an unclean election
// need replicas. The cluster starts once; the unclean election runs last
// (it kills nodes).
func TestRealKafkaEpochs(t *testing.T) {
	rc := kafkatest.StartReal(t, realkafka.Options{Nodes: 3})
	k := kafkatest.FromReal(t, rc)
	named := func(t *testing.T) *kafkatest.Kafka { return k.Named(uniqueName(t)) }
	t.Run("ReadCommittedLatest", func(t *testing.T) { readCommittedLatest(t, named(t)) })
	t.Run("LeaderMoveCarriesEpochs", func(t *testing.T) { leaderMoveCarriesEpochs(t, named(t)) })
	t.Run("UncleanElectionTruncates", func(t *testing.T) { uncleanElectionTruncates(t, named(t), rc) })
}

// valueRecorder remembers the values processed at each offset.
type valueRecorder struct {
	mu   sync.Mutex
	seen map[int64][]string
}

func (v *valueRecorder) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range in {
		v.seen[r.Offset] = append(v.seen[r.Offset], string(r.Value))
	}
	return in, nil
}

// has reports whether value was processed at offset.
func (v *valueRecorder) has(offset int64, value string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Contains(v.seen[offset], value)
}

func (v *valueRecorder) at(offset int64) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.seen[offset])
}

// partitionState reads a partition's leader, leader epoch and ISR from
// Metadata.
func partitionState(ctx context.Context, c *kafkatest.Kafka, topic string) (leader, leaderEpoch int32, isr []int32, err error) {
	md, err := c.Admin.Metadata(ctx, topic)
	if err != nil {
		return -1, -1, nil, err
	}
	p, ok := md.Topics[topic].Partitions[0]
	if !ok {
		return -1, -1, nil, fmt.Errorf("%s/0 not in the metadata", topic)
	}
	return p.Leader, p.LeaderEpoch, p.ISR, p.Err
}

// partitionStateOn is partition 0's leader and ISR as node's Metadata
// gives them.
func partitionStateOn(ctx context.Context, c *kafkatest.Kafka, node int32, topic string) (leader int32, isr []int32, err error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.Client.Broker(int(node)))
	if err != nil {
		return -1, nil, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0 {
		return -1, nil, fmt.Errorf("node %d: %s/0 not in the metadata", node, topic)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return -1, nil, err
	}
	p := resp.Topics[0].Partitions[0]
	return p.Leader, p.ISR, kerr.ErrorForCode(p.ErrorCode)
}

// acksOneProducer is a plain producer (no idempotence, so an election that
// loses records does not trip sequence numbers) that waits for the
// leader's acknowledgement only.
func acksOneProducer(t *testing.T, c *kafkatest.Kafka) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0),
		kgo.MetadataMinAge(10*time.Millisecond), kgo.RecordRetries(50))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produceValues(t *testing.T, cl *kgo.Client, topic, prefix string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}).FirstErr(); err != nil {
			t.Fatalf("produce %s-%d: %v", prefix, i, err)
		}
	}
}

// uncleanElectionTruncates makes a real log truncation below the
// pipeline's position: a topic with replicas on two nodes A (leader) and
// B, unclean.leader.election.enable=true and min.insync.replicas=1. B is
// killed and leaves the ISR; 10 records are produced with acks=1 to A
// alone and processed; A is killed; B comes back (out of sync) and is
// elected leader uncleanly; 15 new records take offsets 10-24 on B. The
// third node keeps the group coordinator (and, with B, the controller
// quorum) up, so the pipeline keeps its assignment and its position
// throughout. The pipeline must detect the divergence (its last record's
// leader epoch ends at 10 on B), report it as a log_truncation reset from
// 20 to 10 with data loss, and process every record written after it.
func uncleanElectionTruncates(t *testing.T, c *kafkatest.Kafka, rc *realkafka.Cluster) {
	topic, group := c.Name("unclean"), c.Name("g-unclean")
	tp := offsetstore.TopicPartition{Topic: topic, Partition: 0}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// __consumer_offsets has one partition: its leader coordinates every
	// group, and stays up
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKeys = []string{group}
	fresp, err := find.RequestWith(ctx, c.Client)
	if err != nil || len(fresp.Coordinators) != 1 || fresp.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("find the group coordinator: %v %+v", err, fresp)
	}
	coord := fresp.Coordinators[0].NodeID
	var others []int32
	for _, n := range c.Nodes {
		if n != coord {
			others = append(others, n)
		}
	}
	a, b := others[0], others[1]
	t.Logf("group coordinator on node %d; %s replicated on %d (leader) and %d", coord, topic, a, b)

	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{a, b}
	ct.ReplicaAssignment = append(ct.ReplicaAssignment, ra)
	for k, v := range map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"} {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		ct.Configs = append(ct.Configs, cfg)
	}
	create.Topics = append(create.Topics, ct)
	cresp, err := create.RequestWith(ctx, c.Client)
	if err == nil {
		err = kerr.ErrorForCode(cresp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	// every node, not only the one Admin asks: a producer that asks a
	// node that has not applied the creation yet is told the topic does
	// not exist, and gives up (seen on a 3-node Kafka 3.9.1)
	waitFor(t, time.Minute, "every node to see the topic led by "+fmt.Sprint(a), func() bool {
		for _, n := range c.Nodes {
			l, isr, err := partitionStateOn(ctx, c, n, topic)
			if err != nil || l != a || len(isr) != 2 {
				return false
			}
		}
		return true
	})

	old := acksOneProducer(t, c)
	produceValues(t, old, topic, "kept", 10) // 0..9, on A and B

	// the pipeline's log, kept to show the divergence report (and, with
	// -v, printed as it comes)
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	if testing.Verbose() {
		log = zaptest.NewLogger(t, zaptest.Level(zapcore.DebugLevel), zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return zapcore.NewTee(c, core)
		})))
	}
	t.Cleanup(func() {
		for _, e := range logs.All() {
			if m := e.Message; strings.Contains(m, "truncat") || strings.Contains(m, "reset") || strings.Contains(m, "generation") ||
				strings.Contains(m, "leader changed") || strings.Contains(m, "assigned") {
				t.Logf("pipeline log: %s %s %v", e.Time.Format("15:04:05.000"), m, e.ContextMap())
			}
		}
	})
	ev := &events{}
	vals := &valueRecorder{seen: map[int64][]string{}}
	cfg := fastConfig(c, group, topic)
	cfg.Consumer.AutoOffsetReset = offsetstore.ResetEarliest
	// The position, with the leader epoch of its last record, lives in
	// the pipeline: a rebalance between the election and the check would
	// restart the partition from its committed offset, and check that
	// instead (with the leader epoch committed with it), not the
	// position this test is about. A session timeout this machine's load
	// cannot exceed keeps the member in its generation.
	cfg.Consumer.SessionTimeout, cfg.Consumer.HeartbeatInterval, cfg.Consumer.RebalanceTimeout = 20*time.Second, 500*time.Millisecond, 20*time.Second
	r := start(t, cfg, append(ev.options(), pipeline.WithStage("record", vals), pipeline.WithLogger(logging.ForStage(log)))...)
	waitFor(t, time.Minute, "the first 10 records", func() bool { return vals.has(9, "kept-9") })

	// the follower dies and leaves the ISR; the leader goes on alone
	if err := rc.Kill(b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, fmt.Sprintf("node %d out of the ISR", b), func() bool {
		_, _, isr, err := partitionState(ctx, c, topic)
		return err == nil && slices.Equal(isr, []int32{a})
	})
	produceValues(t, old, topic, "lost", 10) // 10..19, on A only
	waitFor(t, time.Minute, "the records only the leader has, committed", func() bool {
		return vals.has(19, "lost-9") && c.Committed(t, group, topic)[0] == 20
	})
	_, leaderEpochA, _, _ := partitionState(ctx, c, topic)

	// the leader dies; the out-of-sync replica comes back and is elected
	if err := rc.Kill(a); err != nil {
		t.Fatal(err)
	}
	if err := rc.RestartAmongDead(ctx, b); err != nil {
		t.Fatalf("restart node %d: %v", b, err)
	}
	var elected kadm.ElectLeadersResults
	waitFor(t, 2*time.Minute, fmt.Sprintf("node %d elected (unclean)", b), func() bool {
		if l, _, _, err := partitionState(ctx, c, topic); err == nil && l == b {
			return true
		}
		elected, _ = c.Admin.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{topic: {0: {}}})
		return false
	})
	_, leaderEpochB, _, _ := partitionState(ctx, c, topic)
	t.Logf("node %d leads in leader epoch %d (was %d under node %d); election results %+v", b, leaderEpochB, leaderEpochA, a, elected)
	produceValues(t, acksOneProducer(t, c), topic, "new", 15) // 10..24 on B

	waitFor(t, 2*time.Minute, "every record written after the divergence", func() bool {
		for i := 0; i < 15; i++ {
			if !vals.has(int64(10+i), fmt.Sprintf("new-%d", i)) {
				return false
			}
		}
		return true
	})
	// A comes back as a follower and truncates its log to B's
	if err := rc.Restart(ctx, a); err != nil {
		t.Fatalf("restart node %d: %v", a, err)
	}
	waitFor(t, 2*time.Minute, "the new log committed", func() bool { return c.Committed(t, group, topic)[0] == 25 })
	if err := r.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	var trunc []offsetstore.ResetEvent
	for _, rs := range ev.resetsOf(tp) {
		if rs.Reason == offsetstore.ReasonLogTruncation {
			trunc = append(trunc, rs)
		}
	}
	if len(trunc) != 1 || trunc[0].From != 20 || trunc[0].To != 10 || !trunc[0].DataLoss {
		t.Fatalf("log_truncation resets %+v (all: %+v): want one, from 20 to 10, data loss", trunc, ev.resetsOf(tp))
	}
	for o := int64(0); o < 25; o++ {
		vs := vals.at(o)
		for _, v := range vs {
			if o >= 10 && !strings.HasPrefix(v, "lost-") && !strings.HasPrefix(v, "new-") || o < 10 && !strings.HasPrefix(v, "kept-") {
				t.Fatalf("offset %d processed %q", o, vs)
			}
		}
	}
	if n := ev.stoppedCount(); n != 0 {
		t.Fatalf("%d partitions stopped", n)
	}
	t.Logf("reset event: %+v", trunc[0])
}
