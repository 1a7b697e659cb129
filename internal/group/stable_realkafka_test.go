//go:build realkafka

package group

import (
	"fmt"
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
	k := kafkatest.FromReal(t, kafkatest.StartReal(t, realkafka.Options{}))
	for i, tc := range requireStableCases {
		t.Run(tc.name, func(t *testing.T) {
			k := k.Named(fmt.Sprintf("stable%d.", i))
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
