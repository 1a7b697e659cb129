package bench

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/bench/internal/countstage"
	"github.com/fencepost-dev/fencepost/internal/shopevents"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
	_ "github.com/fencepost-dev/fencepost/stages/builtin"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// BenchmarkShopPipeline runs the real pipeline of bench/compare
// (configs/fencepost-defaults.yaml: json, filter one event type in four,
// map to a reshaped value keyed by user, produce) in this process, over
// -records shop events in 4 partitions, at each guarantee: the whole
// record path, fetch to commit, for profiling it with go test's
// -cpuprofile and -memprofile. records/cpu-s and allocs/record count the
// in-process broker's work too unless -brokers names a cluster; the
// comparison with peers is bench/compare's.
//
//	go test ./bench -run '^$' -bench ShopPipeline -benchtime 1x -cpuprofile cpu.out -memprofile mem.out
func BenchmarkShopPipeline(b *testing.B) {
	addrs, topic := shopTopic(b, 4)
	for _, g := range []pipeline.Guarantee{pipeline.AtLeastOnce, pipeline.ExactlyOnce} {
		b.Run(string(g), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				measure(b, func(ctx context.Context, seen func(int)) {
					runShopPipeline(ctx, b, addrs, topic, g, seen)
				}).report(b)
			}
		})
	}
}

func runShopPipeline(ctx context.Context, b *testing.B, addrs []string, topic string, g pipeline.Guarantee, seen func(int)) {
	output := group("purchases")
	cfg := pipeline.Config{
		Kafka:     pipeline.KafkaConfig{Brokers: addrs},
		Consumer:  pipeline.ConsumerConfig{Group: group("shop"), Topics: []string{topic}, BufferBytes: flagBufferBytes},
		Guarantee: g,
	}
	if err := createTopic(addrs, output, 4); err != nil {
		b.Error(err)
		return
	}
	out, err := pipeline.NewOutputs(cfg)
	if err != nil {
		b.Error(err)
		return
	}
	defer out.Close()
	env := stagetest.Env(nil, nil)
	env.Producer = out.Producer
	opts := []pipeline.Option{pipeline.WithOutputs(out)}
	for _, s := range []struct {
		name string
		opts stages.Options
	}{
		{"json", nil},
		{"filter", stages.Options{"if": `json.type == "purchase"`}},
		{"map", stages.Options{"key": `json.user`,
			"value": `toJSON({"order": json.id, "user": json.user, "product": json.product, "amount": json.price * json.qty, "currency": json.currency, "ts": json.ts})`}},
		{"produce", stages.Options{"topic": output}},
	} {
		st, err := stagetest.Build(s.name, s.opts, env)
		if err != nil {
			b.Error(err)
			return
		}
		opts = append(opts, pipeline.WithStage(s.name, st))
	}
	// Committed offsets count the records finished: processed, their
	// outputs acknowledged (and, exactly once, the transaction
	// committed).
	opts = append(opts, pipeline.WithObserver(&commitCounter{seen: seen, at: map[int32]int64{}}))
	p, err := pipeline.New(cfg, opts...)
	if err != nil {
		b.Error(err)
		return
	}
	if err := p.Run(ctx); err != nil {
		b.Error(err)
	}
}

// commitCounter calls seen with the records each commit newly covers
// (every partition starts at offset 0).
type commitCounter struct {
	nopObserver
	seen func(int)
	mu   sync.Mutex
	at   map[int32]int64
}

func (c *commitCounter) OffsetsCommitted(offs []pipeline.CommittedOffset) {
	c.mu.Lock()
	n := int64(0)
	for _, o := range offs {
		if o.Offset > c.at[o.Partition.Partition] {
			n += o.Offset - c.at[o.Partition.Partition]
			c.at[o.Partition.Partition] = o.Offset
		}
	}
	c.mu.Unlock()
	if n > 0 {
		c.seen(int(n))
	}
}

type nopObserver struct{}

func (nopObserver) StageDone(pipeline.StageDone)                {}
func (nopObserver) FetchDone(pipeline.FetchDone)                {}
func (nopObserver) CommitDone(pipeline.CommitDone)              {}
func (nopObserver) OffsetsCommitted([]pipeline.CommittedOffset) {}
func (nopObserver) Rebalanced(pipeline.Rebalance)               {}

// shopTopic returns the cluster and a topic of the given partitions
// holding -records shop events (internal/shopevents), spread evenly, the
// same for every benchmark of the run.
func shopTopic(b *testing.B, partitions int) ([]string, string) {
	addrs := clusterAddrs(b)
	shopOnce.Do(func() {
		shopName = fmt.Sprintf("shop-p%d-n%d-%d", partitions, *flagRecords, time.Now().UnixNano())
		shopErr = load(addrs, shopName, partitions, nil, shopevents.Value)
	})
	if shopErr != nil {
		b.Fatal(shopErr)
	}
	return addrs, shopName
}

var (
	shopOnce sync.Once
	shopName string
	shopErr  error
)

// BenchmarkStatePipeline measures what keyed state costs on the record
// path: a count by key (bench/internal/countstage) with its counts in a
// store (state on disk, changelog written, at_least_once: applied once
// acknowledged; exactly_once: in the transaction), against the same
// count in a map of the stage's own (no store, no changelog), at both
// guarantees, over -records records of -value-size bytes whose keys
// cycle through -state-keys keys, in 4 partitions. records/cpu-s is the
// figure to compare (with -brokers, the pipeline's own CPU).
//
//	go test ./bench -run '^$' -bench StatePipeline -benchtime 1x -args -records 1000000
func BenchmarkStatePipeline(b *testing.B) {
	addrs, topic := keyedTopic(b, 4)
	for _, g := range []pipeline.Guarantee{pipeline.AtLeastOnce, pipeline.ExactlyOnce} {
		for _, stateful := range []bool{false, true} {
			name := string(g) + "/stateless"
			if stateful {
				name = string(g) + "/store"
			}
			b.Run(name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					var restored int64
					measure(b, func(ctx context.Context, seen func(int)) {
						restored = runCountPipeline(ctx, b, addrs, topic, g, stateful, seen)
					}).report(b)
					if restored != 0 {
						b.Fatalf("a fresh group restored %d records", restored)
					}
				}
			})
		}
	}
}

var flagStateKeys = flag.Int("state-keys", 100_000, "distinct keys of BenchmarkStatePipeline's records")

func runCountPipeline(ctx context.Context, b *testing.B, addrs []string, topic string, g pipeline.Guarantee, stateful bool, seen func(int)) int64 {
	cfg := pipeline.Config{
		Kafka:     pipeline.KafkaConfig{Brokers: addrs},
		Consumer:  pipeline.ConsumerConfig{Group: group("count"), Topics: []string{topic}, BufferBytes: flagBufferBytes},
		Guarantee: g,
		State:     pipeline.StateConfig{Dir: b.TempDir()},
	}
	var st stages.Stage = &countstage.Stateless{}
	if stateful {
		st = countstage.Stateful{}
	}
	opts := []pipeline.Option{pipeline.WithStage("count", st), pipeline.WithObserver(&commitCounter{seen: seen, at: map[int32]int64{}})}
	if g == pipeline.ExactlyOnce {
		out, err := pipeline.NewOutputs(cfg)
		if err != nil {
			b.Error(err)
			return 0
		}
		defer out.Close()
		opts = append(opts, pipeline.WithOutputs(out))
	}
	p, err := pipeline.New(cfg, opts...)
	if err != nil {
		b.Error(err)
		return 0
	}
	if err := p.Run(ctx); err != nil {
		b.Error(err)
	}
	s, _ := p.Stats(context.Background())
	return s.State.RestoredRecords
}

// keyedTopic returns the cluster and a topic of the given partitions
// holding -records records of -value-size bytes, record i keyed
// "key-<i mod -state-keys>", the same for every benchmark of the run.
func keyedTopic(b *testing.B, partitions int) ([]string, string) {
	addrs := clusterAddrs(b)
	keyedOnce.Do(func() {
		keyedName = fmt.Sprintf("keyed-p%d-n%d-k%d-%d", partitions, *flagRecords, *flagStateKeys, time.Now().UnixNano())
		value := make([]byte, *flagValueSize)
		for i := range value {
			value[i] = byte('a' + i%26)
		}
		keyedErr = load(addrs, keyedName, partitions, func(i int64) []byte { return fmt.Appendf(nil, "key-%08d", i%int64(*flagStateKeys)) },
			func(int64) []byte { return value })
	})
	if keyedErr != nil {
		b.Fatal(keyedErr)
	}
	return addrs, keyedName
}

var (
	keyedOnce sync.Once
	keyedName string
	keyedErr  error
)
