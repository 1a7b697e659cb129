package bench

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// Flags choose the data and the cluster; go test passes them after -args:
//
//	go test ./bench -run '^$' -bench ConsumePartitions -args -partitions 64 -value-size 1000
var (
	flagBrokers     = flag.String("brokers", "", "bootstrap `addresses` of a running cluster (for example one started with `processor broker --brokers 3`); empty starts one in-process broker")
	flagInProcess   = flag.Int("inprocess-brokers", 1, "brokers of the in-process cluster, when -brokers is empty")
	flagPartitions  = flag.String("partitions", "4,64,512", "comma-separated partition counts for BenchmarkConsumePartitions")
	flagRecords     = flag.Int("records", 1_000_000, "records in each benchmark topic")
	flagValueSize   = flag.Int("value-size", 100, "bytes of each record's value")
	flagBufferBytes pipeline.ByteSize // consumer.buffer_bytes of fencepost's pipelines (0: the default)
)

func init() {
	flag.TextVar(&flagBufferBytes, "buffer-bytes", pipeline.ByteSize(0), "consumer.buffer_bytes of fencepost's pipelines (`size`, 16MiB...; 0: the default); processor run sets GOMEMLIMIT from it, set it to match")
}

var (
	clusterOnce sync.Once
	clusterAddr []string
	clusterErr  error
	loadedMu    sync.Mutex
	loaded      = map[int]string{} // partitions -> topic holding the data
	groupSeq    atomic.Int64
)

// cluster returns the bootstrap addresses of the benchmark cluster (the
// one -brokers names, or an in-process one started once per run) and a
// topic of the given number of partitions holding -records records of
// -value-size bytes, uncompressed, spread evenly over the partitions.
// Every benchmark of the run with that partition count reads the same
// data.
func cluster(b *testing.B, partitions int) ([]string, string) {
	clusterAddrs(b)
	loadedMu.Lock()
	defer loadedMu.Unlock()
	if topic, ok := loaded[partitions]; ok {
		return clusterAddr, topic
	}
	// A name unique to this run: an external cluster may hold topics of
	// earlier runs.
	topic := fmt.Sprintf("bench-p%d-v%d-n%d-%d", partitions, *flagValueSize, *flagRecords, time.Now().UnixNano())
	value := make([]byte, *flagValueSize)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	if err := load(clusterAddr, topic, partitions, nil, func(int64) []byte { return value }); err != nil {
		b.Fatal(err)
	}
	loaded[partitions] = topic
	return clusterAddr, topic
}

// clusterAddrs returns the bootstrap addresses of the benchmark cluster:
// the one -brokers names, or an in-process one started once per run.
func clusterAddrs(b *testing.B) []string {
	clusterOnce.Do(func() {
		if *flagBrokers != "" {
			clusterAddr = strings.Split(*flagBrokers, ",")
			return
		}
		var c *kafkatest.Cluster
		c, clusterErr = kafkatest.Start(*flagInProcess)
		if c != nil {
			clusterAddr = c.Addrs
		}
	})
	if clusterErr != nil {
		b.Fatal(clusterErr)
	}
	return clusterAddr
}

// load creates topic with the given partitions and writes -records
// records to it, uncompressed, record i (value(i), and key(i) unless key
// is nil) to partition i % partitions.
func load(addrs []string, topic string, partitions int, key, value func(i int64) []byte) error {
	if err := createTopic(addrs, topic, partitions); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var firstErr atomic.Value
	for i := int64(0); i < int64(*flagRecords); i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i % int64(partitions)), Value: value(i)}
		if key != nil {
			r.Key = key(i)
		}
		cl.Produce(ctx, r,
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
	return nil
}

// createTopic creates topic with the given partitions, replication 1.
func createTopic(addrs []string, topic string, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// consumeResult is one full read of the data.
type consumeResult struct {
	total      time.Duration // from start to the last record
	steady     time.Duration // from the first record to the last
	cpu        time.Duration // CPU time of the whole process during the read
	allocs     uint64        // heap allocations of the whole process during the read
	records    int64
	firstAfter time.Duration // group join and first fetch
}

func (r consumeResult) report(b *testing.B) {
	b.ReportMetric(float64(r.records)/r.steady.Seconds(), "records/s")
	b.ReportMetric(float64(r.records)/r.total.Seconds(), "records/s-incl-join")
	// Wall time on a shared machine is noisy; records per CPU-second of
	// the process is steadier. With the in-process broker it counts the
	// broker's work too (the same for every client); with -brokers it is
	// the client's alone. The same holds for allocations.
	b.ReportMetric(float64(r.records)/r.cpu.Seconds(), "records/cpu-s")
	b.ReportMetric(float64(r.allocs)/float64(r.records), "allocs/record")
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

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// measure runs read until it has seen every record of the topic; read
// calls seen(n) as records arrive and returns when ctx ends.
func measure(b *testing.B, read func(ctx context.Context, seen func(n int))) consumeResult {
	want := int64(*flagRecords)
	var count atomic.Int64
	var first atomic.Int64
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runtime.GC()
	start, cpu0, allocs0 := time.Now(), cpuTime(), mallocs()
	var end time.Time
	var cpu1 time.Duration
	var allocs1 uint64
	var once sync.Once
	seen := func(n int) {
		first.CompareAndSwap(0, time.Now().UnixNano())
		if count.Add(int64(n)) >= want {
			once.Do(func() { end, cpu1, allocs1 = time.Now(), cpuTime(), mallocs(); close(done) })
		}
	}
	finished := make(chan struct{})
	go func() { read(ctx, seen); close(finished) }()
	select {
	case <-done:
	case <-finished:
		b.Fatalf("the reader stopped after %d of %d records", count.Load(), want)
	case <-time.After(5 * time.Minute):
		b.Fatalf("read only %d of %d records in 5 minutes", count.Load(), want)
	}
	cancel()
	<-finished
	f := time.Unix(0, first.Load())
	return consumeResult{total: end.Sub(start), steady: end.Sub(f), cpu: cpu1 - cpu0, allocs: allocs1 - allocs0,
		records: count.Load(), firstAfter: f.Sub(start)}
}

// runID tells this run's groups and topics from those of earlier runs
// on the same cluster.
var runID = time.Now().UnixNano()

func group(name string) string { return fmt.Sprintf("%s-%d-%d", name, runID, groupSeq.Add(1)) }

// BenchmarkConsume reads the same records with this pipeline (a no-op
// stage, commits on), kafka-go's Reader with a GroupID (commits every
// second), and franz-go's kgo PollFetches with autocommit, from a topic of
// 4 partitions.
func BenchmarkConsume(b *testing.B) { consume(b, 4, true) }

// BenchmarkConsumePartitions reads the same records spread over each
// partition count of -partitions with this pipeline and kgo.
func BenchmarkConsumePartitions(b *testing.B) {
	for _, f := range strings.Split(*flagPartitions, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("-partitions %q: want comma-separated positive counts", *flagPartitions)
		}
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) { consume(b, n, false) })
	}
}

func consume(b *testing.B, partitions int, withReader bool) {
	addrs, topic := cluster(b, partitions)
	// 0 is the default: 1 or 2, chosen from the partitions per broker.
	for _, fetchers := range []int{1, 2, 0} {
		name := fmt.Sprintf("fencepost/fetch_concurrency=%d", fetchers)
		if fetchers == 0 {
			name = "fencepost/default"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var maxFetching int64
				measure(b, func(ctx context.Context, seen func(int)) {
					p, err := pipeline.New(pipeline.Config{
						Kafka: pipeline.KafkaConfig{Brokers: addrs},
						Consumer: pipeline.ConsumerConfig{Group: group("fencepost"), Topics: []string{topic},
							CommitInterval: time.Second, FetchConcurrency: fetchers, BufferBytes: flagBufferBytes},
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
					st, _ := p.Stats(context.Background()) // counters survive Run
					maxFetching = st.MaxFetchesInFlight
				}).report(b)
				// With several brokers, more fetches in flight at once
				// than fetch_concurrency shows brokers fetched in parallel.
				b.ReportMetric(float64(maxFetching), "max-fetches-in-flight")
			}
		})
	}
	if withReader {
		b.Run("kafka-go-reader", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				measure(b, func(ctx context.Context, seen func(int)) {
					r := kafka.NewReader(kafka.ReaderConfig{
						Brokers: addrs, GroupID: group("kafkago"), Topic: topic,
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
				cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group("kgo")),
					kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
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
