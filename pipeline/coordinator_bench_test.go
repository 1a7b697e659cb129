package pipeline

import (
	"testing"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// benchCoordinator returns a coordinator with n partitions fetching from
// one broker, and the fetch it has in flight.
func benchCoordinator(b *testing.B, n int) (*coordHarness, offsets.FetchRequest) {
	h := newCoordHarness(b, coordinatorConfig{policy: offsetstore.ResetEarliest, budget: 1 << 40, fetchMaxBytes: 1 << 20})
	leaders := map[offsetstore.TopicPartition]int32{}
	var parts []assignedPartition
	for i := 0; i < n; i++ {
		tp := offsetstore.TopicPartition{Topic: "bench", Partition: int32(i)}
		leaders[tp] = 1
		parts = append(parts, assignedPartition{tp: tp, start: offsetstore.Committed(0)})
	}
	h.leaders(leaders)
	h.assign(1, newMemoryStore(1), parts...)
	return h, h.takeFetch(1)
}

var benchRecords = make([]stages.Record, 10)

// fetchResult answers every partition of f with 10 records.
func benchFetchResult(f offsets.FetchRequest) *fetch.Result {
	res := &fetch.Result{Request: f, Partitions: make([]fetch.PartitionResult, f.Len())}
	for i := range res.Partitions {
		e := f.At(i)
		at := e.Position.Offset()
		sp := offsets.Span{Start: at, End: at + 10}
		res.Partitions[i] = fetch.PartitionResult{Next: sp.End, LogStart: 0, HighWatermark: sp.End,
			Batch: fetch.NewBatch(e.Partition, f.Generation(), e.Position.Epoch(), sp, benchRecords, 1000), Bytes: 1000}
	}
	return res
}

// BenchmarkCoordinatorFetchResult measures one fetch-result event with
// 100 assigned partitions: every partition's records are checked against
// its epoch and position, handed to processing, and the broker's next
// fetch is planned and sent. Results are built ahead in blocks with the
// timer stopped (a per-iteration StopTimer would cost more than the event);
// the batches are completed between blocks.
func BenchmarkCoordinatorFetchResult(b *testing.B) {
	const parts, block = 100, 64
	h, f := benchCoordinator(b, parts)
	c := h.c
	epochs := make([]offsetstore.Epoch, parts)
	for i := range epochs {
		epochs[i] = f.At(i).Position.Epoch()
	}
	next := int64(0)
	results := make([]fetch.Result, block)
	msgs := make([]process.Message, block)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		b.StopTimer()
		n := min(block, b.N-done)
		for r := 0; r < n; r++ {
			prs := make([]fetch.PartitionResult, parts)
			for i := range prs {
				tp := offsetstore.TopicPartition{Topic: "bench", Partition: int32(i)}
				sp := offsets.Span{Start: next + int64(r)*10, End: next + int64(r+1)*10}
				prs[i] = fetch.PartitionResult{Next: sp.End, LogStart: 0, HighWatermark: sp.End,
					Batch: fetch.NewBatch(tp, 1, epochs[i], sp, benchRecords, 1000), Bytes: 1000}
			}
			results[r] = fetch.Result{Partitions: prs}
		}
		b.StartTimer()
		for r := 0; r < n; r++ {
			h.fetches = h.fetches[:0]
			results[r].Request = f
			c.handle(fetchedEvent{&results[r]})
			f = h.fetches[0]
			// the run loop takes the message for processing after
			// every event
			msgs[r], _ = c.takeProcessMessage()
		}
		b.StopTimer()
		done += n
		next += int64(n) * 10
		rep := &process.Report{}
		for _, m := range msgs[:n] {
			for _, bt := range m.Batches {
				rep.Completions = append(rep.Completions, process.Completion{Batch: bt})
			}
		}
		c.handle(processedEvent{rep})
		b.StartTimer()
	}
}

// BenchmarkCoordinatorProcessedReport measures one event reporting 100
// batches done (one per partition): each is matched to the batch handed
// out and marks its partition's watermark.
func BenchmarkCoordinatorProcessedReport(b *testing.B) {
	h, f := benchCoordinator(b, 100)
	c := h.c
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h.fetches = h.fetches[:0]
		c.handle(fetchedEvent{benchFetchResult(f)})
		f = h.fetches[0]
		m, _ := c.takeProcessMessage()
		rep := &process.Report{Completions: make([]process.Completion, len(m.Batches))}
		for j, bt := range m.Batches {
			rep.Completions[j] = process.Completion{Batch: bt}
		}
		b.StartTimer()

		c.handle(processedEvent{rep})
	}
}
