package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestFetchConcurrencyDefault: left at 0, fetch_concurrency is one fetch
// in flight per broker for a few partitions and two for many (16 or more
// led by one broker); a value set is kept whatever the partitions. The
// most fetches in flight at once, with every partition caught up and
// long-polling for a while, shows which. Before, the default was 2
// whatever the partitions.
func TestFetchConcurrencyDefault(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	for _, tc := range []struct {
		partitions int32
		set        int
		want       int64
	}{
		{partitions: 4, set: 0, want: 1},
		{partitions: 32, set: 0, want: 2},
		{partitions: 4, set: 2, want: 2},
		{partitions: 32, set: 1, want: 1},
	} {
		name := fmt.Sprintf("p%d-f%d", tc.partitions, tc.set)
		t.Run(fmt.Sprintf("partitions=%d/fetch_concurrency=%d", tc.partitions, tc.set), func(t *testing.T) {
			topic, group := c.Name("fetchers-"+name), c.Name("g-fetchers-"+name)
			c.CreateTopic(t, topic, tc.partitions)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for p := range tc.partitions {
				if err := c.Client.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			cfg := fastConfig(c, group, topic)
			cfg.Consumer.FetchConcurrency = tc.set
			rec := newRecorder()
			r := start(t, cfg, pipeline.WithStage("record", rec))
			waitFor(t, 20*time.Second, "every partition's record", func() bool { return rec.total() == int(tc.partitions) })
			time.Sleep(500 * time.Millisecond) // caught up: long polls of 100ms, one after the other per fetcher
			st, err := r.p.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.shutdown(t); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if st.MaxFetchesInFlight != tc.want {
				t.Fatalf("MaxFetchesInFlight %d, want %d", st.MaxFetchesInFlight, tc.want)
			}
		})
	}
}
