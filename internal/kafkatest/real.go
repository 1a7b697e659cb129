package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/realkafka"
)

// StartReal starts an Apache Kafka cluster of the shape $FENCEPOST_KAFKA
// names (see realkafka.NodesFromEnv) unless o.Nodes is set, in a folder of
// the test's. It is stopped when the test ends, whatever happens; if the
// test failed, the tail of every node's log is printed.
func StartReal(t testing.TB, o realkafka.Options) *realkafka.Cluster {
	t.Helper()
	if o.Nodes == 0 {
		n, err := realkafka.NodesFromEnv()
		if err != nil {
			t.Fatal(err)
		}
		o.Nodes = n
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Progress == nil {
		o.Progress = func(s string) { t.Log(s) }
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	c, err := realkafka.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Apache Kafka %s: %d node(s) ready in %v", c.Version, o.Nodes, time.Since(began).Round(10*time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker logs:\n%s", c.LogTail(30))
		}
		stopped := time.Now()
		c.Stop()
		t.Logf("Apache Kafka stopped in %v", time.Since(stopped).Round(10*time.Millisecond))
	})
	return c
}
