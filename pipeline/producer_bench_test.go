package pipeline

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/stages"
)

// BenchmarkProduce writes batches of 250 keyed records of ~100 bytes from
// `writers` goroutines at once, as produce stages of several partitions
// do, each waiting for its acknowledgement: ms/call is a stage's wait.
func BenchmarkProduce(b *testing.B) {
	c := kafkatest.New(b, 1)
	c.CreateTopic(b, "out", 4)
	p, err := NewProducer(KafkaConfig{Brokers: c.Addrs}, "out")
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	batch := make([]stages.Record, 250)
	for i := range batch {
		batch[i] = stages.Record{Key: []byte(fmt.Sprintf("u%d", i%100)), Value: make([]byte, 100), Timestamp: time.Now()}
	}
	ctx := context.Background()
	if err := p.Produce(ctx, batch); err != nil { // connect
		b.Fatal(err)
	}
	for _, writers := range []int{1, 4} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			b.ReportAllocs()
			var wg sync.WaitGroup
			var mu sync.Mutex
			var waited time.Duration
			calls := 0
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < b.N; i++ {
						start := time.Now()
						if err := p.Produce(ctx, batch); err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						waited += time.Since(start)
						calls++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N*writers*len(batch))/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(waited.Seconds()*1000/float64(calls), "ms/call")
		})
	}
}
