//go:build realkafka

package app

import (
	"testing"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/realkafka"
)

// TestRealKafkaBinary runs the binary's scenarios against Apache Kafka
// (FENCEPOST_KAFKA=1node or 3node).
func TestRealKafkaBinary(t *testing.T) {
	ca := kafkatest.NewCA(t)
	const user, password = "order-enricher", "Orchid-Secret-1618"
	rc := kafkatest.StartReal(t, realkafka.Options{Secure: &realkafka.Secure{
		CertPEM: ca.CertPEM, KeyPEM: ca.KeyPEM, Scram512: map[string]string{user: password},
	}})
	k := kafkatest.FromReal(t, rc)
	t.Run("RestartLosesNothing", func(t *testing.T) {
		k.CreateTopic(t, "in", 4)
		binaryRestartLosesNothing(t, rc.Addrs[0]) // the config takes one bootstrap address; Metadata names the others
	})
	t.Run("SASLTLS", func(t *testing.T) { binarySASLTLS(t, k, rc.SecureAddrs[0], ca.CAFile, user, password) })
	t.Run("Tools", func(t *testing.T) {
		k.CreateTopic(t, "tools", 4)
		binaryTools(t, rc.Addrs[0])
	})
}
