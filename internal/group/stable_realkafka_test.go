//go:build realkafka

package group

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/realkafka"
)

// TestRealKafkaRequireStable runs the RequireStable scenario against
// Apache Kafka (FENCEPOST_KAFKA=1node or 3node): its coordinator answers
// UNSTABLE_OFFSET_COMMIT for exactly the partitions an open transaction
// has offsets pending for, and keeps doing so after EndTxn until the
// transaction's markers are written, a window kfake does not have.
func TestRealKafkaRequireStable(t *testing.T) {
	rc := kafkatest.StartReal(t, realkafka.Options{})
	k := kafkatest.FromReal(t, rc)
	consumerProtocol := k.ConsumerGroupProtocol(t)
	t.Logf("Apache Kafka %s offers the consumer group protocol: %v", rc.Version, consumerProtocol)
	for i, tc := range requireStableCases {
		t.Run(tc.name, func(t *testing.T) {
			k := k.Named(fmt.Sprintf("stable%d.", i))
			if tc.protocol == ProtocolConsumer && !consumerProtocol {
				// Kafka 3.x: the member must refuse to start, saying why.
				consumerProtocolRefused(t, k, rc.Version)
				return
			}
			cfg := func(group, topic string) Config {
				c := Config{Brokers: k.Addrs, Group: group, Topics: []string{topic}, Protocol: tc.protocol,
					SessionTimeout: 3 * time.Second, RebalanceTimeout: 6 * time.Second,
					HeartbeatInterval: 200 * time.Millisecond, RetryBackoff: 50 * time.Millisecond}
				if tc.protocol == ProtocolConsumer {
					// The broker's group.consumer.session.timeout.ms
					// (heartbeats every 5s, its default).
					c.SessionTimeout, c.RebalanceTimeout = 45*time.Second, 45*time.Second
				}
				return c
			}
			hold := cfg("", "").SessionTimeout * 3 / 2
			if tc.protocol == ProtocolConsumer {
				hold = 6 * time.Second // more than a heartbeat interval
			}
			stableScenario(t, k, cfg, tc.requireStable, hold)
		})
	}
}

// consumerProtocolRefused: on brokers without the consumer group protocol
// (asked by ApiVersions: Kafka 3.x) a consumer-protocol member's Run ends
// at its first join with ErrConsumerProtocolUnsupported, naming the
// broker's release (version's major.minor) and the setting to change,
// and hands out no partition.
func consumerProtocolRefused(t *testing.T, k *kafkatest.Kafka, version string) {
	topic, group := k.Name("t"), k.Name("g")
	k.CreateTopic(t, topic, 2)
	l := newLedger()
	a := startMember(t, l, "a", Config{Brokers: k.Addrs, Group: group, Topics: []string{topic}, Protocol: ProtocolConsumer,
		SessionTimeout: 45 * time.Second, RebalanceTimeout: 45 * time.Second, RetryBackoff: 50 * time.Millisecond}, memberOpts{})
	var err error
	select {
	case err = <-a.done:
		close(a.done) // for a.stop in the cleanup
	case <-time.After(20 * time.Second):
		t.Fatalf("Run did not fail on Apache Kafka %s, which does not offer the consumer group protocol", version)
	}
	t.Log(err)
	if !errors.Is(err, ErrConsumerProtocolUnsupported) {
		t.Fatalf("Run returned %v, want ErrConsumerProtocolUnsupported", err)
	}
	release := "Apache Kafka " + strings.Join(strings.SplitN(version, ".", 3)[:2], ".") + " (metadata.version "
	for _, s := range []string{release, "set consumer.group_protocol: classic", "UNSUPPORTED_VERSION"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not say %q", s)
		}
	}
	if o := l.owned(); total(o) != 0 {
		t.Fatalf("partitions handed out: %v", o)
	}
}
