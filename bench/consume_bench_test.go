package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

const (
	benchRecords   = 1_000_000
	benchValueSize = 100
)

var (
	startOnce sync.Once
	started   *kafkatest.Cluster
	startErr  error
	loadedMu  sync.Mutex
	loaded    = map[int]string{} // partitions -> topic holding the data
	groupSeq  atomic.Int64
)

// cluster starts one broker (once per run) and returns it with a topic of
// the given number of partitions holding benchRecords records of
// benchValueSize bytes, uncompressed, spread evenly over the partitions.
// Every benchmark of the run with that partition count reads the same
// data.
func cluster(b *testing.B, partitions int) (*kafkatest.Cluster, string) {
	startOnce.Do(func() { started, startErr = kafkatest.Start(1) })
	if startErr != nil {
		b.Fatal(startErr)
	}
	loadedMu.Lock()
	defer loadedMu.Unlock()
	if topic, ok := loaded[partitions]; ok {
		return started, topic
	}
	topic := fmt.Sprintf("bench-%d", partitions)
	if err := load(started, topic, partitions); err != nil {
		b.Fatal(err)
	}
	loaded[partitions] = topic
	return started, topic
}

func load(c *kafkatest.Cluster, benchTopic string, benchPartitions int) error {
	{
		if err := c.CreateTopicE(benchTopic, int32(benchPartitions)); err != nil {
			return err
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
		if err != nil {
			return err
		}
		defer cl.Close()
		value := make([]byte, benchValueSize)
		for i := range value {
			value[i] = byte('a' + i%26)
		}
		ctx := context.Background()
		var firstErr atomic.Value
		for i := 0; i < benchRecords; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: benchTopic, Partition: int32(i % benchPartitions), Value: value},
				func(_ *kgo.Record, err error) {
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
					}
				})
		}
		if err := cl.Flush(ctx); err != nil {
			return err
		}
		if err, _ := firstErr.Load().(error); err != nil {
			return err
		}
	}
	return nil
}

// consumeResult is one full read of the data.
type consumeResult struct {
	total      time.Duration // from start to the last record
	steady     time.Duration // from the first record to the last
	cpu        time.Duration // CPU time of the whole process (client and broker) during the read
	records    int64
	firstAfter time.Duration // group join and first fetch
}

func (r consumeResult) report(b *testing.B) {
	b.ReportMetric(float64(r.records)/r.steady.Seconds(), "records/s")
	b.ReportMetric(float64(r.records)/r.total.Seconds(), "records/s-incl-join")
	// Wall time on a shared machine is noisy; records per CPU-second of
	// the process (client plus the in-process broker, which does the
	// same work for every client) is steadier.
	b.ReportMetric(float64(r.records)/r.cpu.Seconds(), "records/cpu-s")
	b.ReportMetric(r.firstAfter.Seconds()*1000, "ms-to-first")
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs read until it has seen benchRecords records; read calls
// seen(n) as records arrive and returns when ctx ends.
func measure(b *testing.B, read func(ctx context.Context, seen func(n int))) consumeResult {
	var count atomic.Int64
	var first atomic.Int64
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, cpu0 := time.Now(), cpuTime()
	var end time.Time
	var cpu1 time.Duration
	var once sync.Once
	seen := func(n int) {
		first.CompareAndSwap(0, time.Now().UnixNano())
		if count.Add(int64(n)) >= benchRecords {
			once.Do(func() { end, cpu1 = time.Now(), cpuTime(); close(done) })
		}
	}
	finished := make(chan struct{})
	go func() { read(ctx, seen); close(finished) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("read only %d of %d records in 5 minutes", count.Load(), benchRecords)
	}
	cancel()
	<-finished
	f := time.Unix(0, first.Load())
	return consumeResult{total: end.Sub(start), steady: end.Sub(f), cpu: cpu1 - cpu0, records: count.Load(), firstAfter: f.Sub(start)}
}

func group(name string) string { return fmt.Sprintf("%s-%d", name, groupSeq.Add(1)) }

// BenchmarkConsume reads the same million records with this pipeline
// (a no-op stage, commits on), kafka-go's Reader with a GroupID (commits
// every second), and franz-go's kgo PollFetches with autocommit, from a
// topic of 4 partitions.
func BenchmarkConsume(b *testing.B) { consume(b, 4, true) }

// BenchmarkConsumePartitions reads the million records spread over 4, 64
// and 512 partitions with this pipeline and kgo.
func BenchmarkConsumePartitions(b *testing.B) {
	for _, n := range []int{4, 64, 512} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) { consume(b, n, false) })
	}
}

func consume(b *testing.B, partitions int, withReader bool) {
	c, benchTopic := cluster(b, partitions)
	for _, fetchers := range []int{1, 2} {
		b.Run(fmt.Sprintf("fencepost/fetch_concurrency=%d", fetchers), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				measure(b, func(ctx context.Context, seen func(int)) {
					p, err := pipeline.New(pipeline.Config{
						Kafka: pipeline.KafkaConfig{Brokers: c.Addrs},
						Consumer: pipeline.ConsumerConfig{Group: group("fencepost"), Topics: []string{benchTopic},
							CommitInterval: time.Second, FetchConcurrency: fetchers},
					}, pipeline.WithStage("count", stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
						seen(len(in))
						return in, nil
					})))
					if err != nil {
						b.Error(err)
						return
					}
					if err := p.Run(ctx); err != nil {
						b.Error(err)
					}
				}).report(b)
			}
		})
	}
	if withReader {
		b.Run("kafka-go-reader", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				measure(b, func(ctx context.Context, seen func(int)) {
					r := kafka.NewReader(kafka.ReaderConfig{
						Brokers: c.Addrs, GroupID: group("kafkago"), Topic: benchTopic,
						CommitInterval: time.Second, MaxBytes: 50 << 20, MaxWait: 500 * time.Millisecond,
						StartOffset: kafka.FirstOffset,
					})
					defer r.Close()
					for {
						if _, err := r.ReadMessage(ctx); err != nil {
							return
						}
						seen(1)
					}
				}).report(b)
			}
		})
	}
	b.Run("franz-go-kgo", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			measure(b, func(ctx context.Context, seen func(int)) {
				cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.ConsumerGroup(group("kgo")),
					kgo.ConsumeTopics(benchTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
					kgo.AutoCommitInterval(time.Second))
				if err != nil {
					b.Error(err)
					return
				}
				defer cl.Close()
				for ctx.Err() == nil {
					fs := cl.PollFetches(ctx)
					seen(fs.NumRecords())
				}
			}).report(b)
		}
	})
}
