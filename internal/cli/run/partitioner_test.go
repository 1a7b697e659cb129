package run

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/partitioner"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestRunPlacesKeysAsConfigured: a file that keys records by a field of
// their value (map key: json.user) and writes them to a topic of 7
// partitions (produce) puts each record on the partition murmur2 gives
// its key, where a Java producer would put it; with kafka.partitioner:
// fnv1a, on the one kafka-go's Hash balancer gives it.
func TestRunPlacesKeysAsConfigured(t *testing.T) {
	k := kafkatest.New(t, 1).Kafka
	for _, tt := range []struct {
		name, setting string
		place         partitioner.Func
	}{
		{"default", "", partitioner.Murmur2},
		{"fnv1a", "  partitioner: fnv1a\n", partitioner.FNV1a},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in, out := "signups-"+tt.name, "by-user-"+tt.name
			k.CreateTopic(t, in, 2)
			k.CreateTopic(t, out, 7)
			const n = 500
			recs := make([]*kgo.Record, n)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: in, Partition: int32(i % 2), Value: fmt.Appendf(nil, `{"user":"u%d"}`, i)}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := k.Client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			cfg := writeFile(t, t.TempDir(), "c.yaml", "kafka:\n  brokers: ['"+k.Addrs[0]+"']\n  metadata_max_age: 500ms\n"+tt.setting+
				"consumer:\n  group: g-"+tt.name+"\n  topics: ["+in+"]\n  commit_interval: 100ms\n"+
				"  session_timeout: 1s\n  heartbeat_interval: 100ms\n  rebalance_timeout: 2s\n  fetch_max_wait: 100ms\n"+
				"pipeline:\n  - stage: map\n    key: json.user\n  - stage: produce\n    topic: "+out+"\nshutdown_timeout: 10s\n")
			_, errOut, done, stop := startRun(t, cfg, "1s", stages.Default)
			cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs...), kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			got := map[string]int32{}
			for len(got) < n && ctx.Err() == nil {
				cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Key)] = r.Partition })
			}
			stop()
			if code := <-done; code != ExitOK {
				t.Fatalf("exit %d\n%s", code, errOut)
			}
			if len(got) != n {
				t.Fatalf("read %d keys of %d from %s", len(got), n, out)
			}
			moved := 0
			for key, p := range got {
				if want := tt.place([]byte(key), 7); p != want {
					t.Errorf("key %s on partition %d, want %d", key, p, want)
				}
				if partitioner.Murmur2([]byte(key), 7) != partitioner.FNV1a([]byte(key), 7) {
					moved++
				}
			}
			t.Logf("%d of %d keys are placed differently by murmur2 and fnv1a", moved, n)
		})
	}
}
