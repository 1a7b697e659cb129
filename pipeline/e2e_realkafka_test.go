//go:build realkafka

package pipeline_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/realkafka"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestRealKafka runs the end-to-end scenarios against Apache Kafka (one
// node, or three with FENCEPOST_KAFKA=3node): the cluster starts once and
// every scenario uses topics and groups of its own.
func TestRealKafka(t *testing.T) {
	ca := kafkatest.NewCA(t)
	users := map[string][2]string{
		"SCRAM-SHA-512": {"scram-user", "scram-Secret-3141"},
		"PLAIN":         {"plain-user", "plain-Secret-2718"},
	}
	rc := kafkatest.StartReal(t, realkafka.Options{Secure: &realkafka.Secure{
		CertPEM: ca.CertPEM, KeyPEM: ca.KeyPEM,
		Scram512: map[string]string{users["SCRAM-SHA-512"][0]: users["SCRAM-SHA-512"][1]},
		Plain:    map[string]string{users["PLAIN"][0]: users["PLAIN"][1]},
	}})
	k := kafkatest.FromReal(t, rc)
	named := func(t *testing.T) *kafkatest.Kafka { return k.Named(uniqueName(t)) }

	t.Run("MinVersionsTable", func(t *testing.T) { minVersionsTable(t, k) })
	t.Run("StateSurvivesRestore", func(t *testing.T) {
		for _, tc := range stateRestoreCases {
			t.Run(string(tc.g)+"/"+tc.store, func(t *testing.T) { stateSurvivesRestore(t, named(t), tc.g, tc.store) })
		}
	})
	t.Run("ConsumeAndCommit", func(t *testing.T) { consumeAndCommit(t, named(t)) })
	t.Run("ConsumerProtocolOnThisBroker", func(t *testing.T) { consumerProtocolOnThisBroker(t, named(t), rc.Version) })
	t.Run("ProducerKeysAndAcks", func(t *testing.T) { producerKeysAndAcks(t, named(t)) })
	t.Run("SeedScenario", func(t *testing.T) {
		for i := 0; i < 20; i++ {
			validate := i%2 == 1
			t.Run(fmt.Sprintf("run%02d/validate=%v", i, validate), func(t *testing.T) { seedScenario(t, named(t), validate) })
		}
	})
	t.Run("NewGroupResetPolicies", func(t *testing.T) { newGroupResetPolicies(t, named) })
	t.Run("FallsBelowLogStartWhileRunning", func(t *testing.T) { fallsBelowLogStartWhileRunning(t, named(t)) })
	t.Run("CommittedAboveHighWatermark", func(t *testing.T) { committedAboveHighWatermark(t, named(t)) })
	t.Run("SASLOverTLS", func(t *testing.T) {
		saslOverTLS(t, secureCluster{k: named(t), secure: rc.SecureAddrs, plaintext: rc.DirectAddrs, ca: ca, users: users})
		// the broker logs, printed when a test fails, show no password
		logs := rc.LogTail(1 << 20)
		for _, u := range users {
			if strings.Contains(logs, u[1]) {
				t.Fatalf("a broker log shows %s's password", u[0])
			}
		}
	})
	t.Run("RebalanceUnderLoad", func(t *testing.T) { rebalanceUnderLoad(t, named(t)) })
	t.Run("RebalanceMovesOnlyWhatMoves", func(t *testing.T) { rebalanceMovesOnlyWhatMoves(t, named) })
	t.Run("StaticMemberRestart", func(t *testing.T) { staticMemberRestart(t, named(t), true) })
	t.Run("GracefulShutdownCommitsProcessed", func(t *testing.T) { gracefulShutdownCommitsProcessed(t, named(t)) })
	t.Run("ExactlyOnceCopiesEveryRecordOnce", func(t *testing.T) { exactlyOnceCopiesEveryRecordOnce(t, named(t)) })
	t.Run("ExactlyOnceAbortedTransactionIsRedone", func(t *testing.T) { exactlyOnceAbortedTransactionIsRedone(t, named(t)) })
	t.Run("ExactlyOnceThroughRebalances", func(t *testing.T) { exactlyOnceThroughRebalances(t, named(t)) })
	t.Run("FetchFaultsRecoverQuickly", func(t *testing.T) {
		fetchFaultsRecoverQuickly(t, named(t), func(func(string, func())) {}) // no injected errors on a real broker
	})
	// last: it restarts a node
	t.Run("BrokerKilledUnderLoad", func(t *testing.T) { brokerKilledUnderLoad(t, named(t), rc) })
}

// minVersionsTable: the table TestRequestVersionsMeetKafka4 enforces on
// kfake is at least as strict as this broker's ApiVersions: every key the
// broker accepts only from some version on is in it, at that version or
// later.
func minVersionsTable(t *testing.T, c *kafkatest.Kafka) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range resp.ApiKeys {
		if floor := kafkatest.Kafka4MinVersions[kmsg.Key(k.ApiKey)]; floor < k.MinVersion {
			t.Errorf("%s: this broker accepts v%d and later, the table says v%d: update kafkatest.Kafka4MinVersions",
				kmsg.Key(k.ApiKey).Name(), k.MinVersion, floor)
		}
	}
}

var nameCount atomic.Int32

// uniqueName turns a test's name into a prefix for Kafka names.
func uniqueName(t *testing.T) string {
	name := regexp.MustCompile(`[^a-zA-Z0-9._-]+`).ReplaceAllString(strings.TrimPrefix(t.Name(), "TestRealKafka/"), ".")
	return fmt.Sprintf("%s.%d.", name, nameCount.Add(1))
}

// brokerKilledUnderLoad: a producer writes to three partitions (acks=all;
// on three nodes every partition has three replicas and
// min.insync.replicas=2) while the pipeline consumes; the leader of
// partition 0 is killed with SIGKILL and restarted. Every acknowledged
// record survives, every offset is processed (at least once), and the
// group commits the end of every partition.
func brokerKilledUnderLoad(t *testing.T, c *kafkatest.Kafka, rc *realkafka.Cluster) {
	const partitions = 3
	topic, group := c.Name("killed"), c.Name("g-killed")
	c.CreateTopic(t, topic, partitions)
	victim := c.Leader(t, topic, 0)

	var acked [partitions]atomic.Int64
	var failed atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			for p := int32(0); p < partitions; p++ {
				if err := c.ProduceE(topic, p, 5, 5, values(fmt.Sprint(i))); err != nil {
					failed.Add(1)
					t.Logf("produce to %s/%d: %v", topic, p, err)
					continue
				}
				acked[p].Add(5)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()

	rec := newRecorder()
	ev := &events{}
	r := start(t, fastConfig(c, group, topic), append(ev.options(), pipeline.WithStage("record", rec))...)
	waitFor(t, 30*time.Second, "records to flow", func() bool { return rec.total() > 300 })

	killed := time.Now()
	if err := rc.Kill(victim); err != nil {
		t.Fatal(err)
	}
	before := rec.total()
	waitFor(t, 60*time.Second, "records to flow with node down", func() bool { return rec.total() > before+300 || len(c.Nodes) == 1 })
	time.Sleep(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := rc.Restart(ctx, victim); err != nil {
		t.Fatalf("restart node %d: %v", victim, err)
	}
	t.Logf("node %d killed and back after %v", victim, time.Since(killed).Round(10*time.Millisecond))
	after := rec.total()
	waitFor(t, 60*time.Second, "records to flow after the restart", func() bool { return rec.total() > after+300 })
	close(stop)
	<-done

	ends := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		ls, hw := c.Bounds(t, topic, p)
		if ls != 0 || hw < acked[p].Load() {
			t.Fatalf("partition %d log is %d..%d but %d records were acknowledged: acknowledged records were lost", p, ls, hw, acked[p].Load())
		}
		ends[p] = hw
	}
	waitFor(t, 60*time.Second, "every record processed and committed", func() bool {
		got := c.Committed(t, group, topic)
		for p, end := range ends {
			if got[p] != end {
				return false
			}
		}
		return true
	})
	if err := r.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	dups := 0
	for p, end := range ends {
		seen := map[int64]int{}
		for _, o := range rec.offsets(offsetstore.TopicPartition{Topic: topic, Partition: p}) {
			seen[o]++
		}
		for o := int64(0); o < end; o++ {
			if seen[o] == 0 {
				t.Fatalf("%s/%d@%d was never processed", topic, p, o)
			}
			dups += seen[o] - 1
		}
	}
	if n := ev.stoppedCount(); n != 0 {
		t.Fatalf("%d partitions stopped", n)
	}
	t.Logf("ends %v, %d produce calls failed, %d records processed twice, resets %d", ends, failed.Load(), dups, ev.resetCount())
}
