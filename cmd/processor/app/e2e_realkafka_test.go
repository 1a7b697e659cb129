//go:build realkafka

package app

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/realkafka"
)

// TestRealKafkaBinary runs the binary's scenarios against Apache Kafka
// (FENCEPOST_KAFKA=1node or 3node).
func TestRealKafkaBinary(t *testing.T) {
	rc := kafkatest.StartReal(t, realkafka.Options{})
	addr := rc.Addrs[0] // the config takes one bootstrap address; Metadata names the others
	cl, err := kgo.NewClient(kgo.SeedBrokers(rc.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 4, -1, nil, "in")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Run("RestartLosesNothing", func(t *testing.T) { binaryRestartLosesNothing(t, addr) })
}
