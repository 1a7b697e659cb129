package process

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// batch builds a batch of tp with records at offsets [from, to), keys
// from key(i).
func batch(tp offsetstore.TopicPartition, epoch offsetstore.Epoch, from, to int64, key func(int64) string) *fetch.Batch {
	var recs []stages.Record
	for o := from; o < to; o++ {
		recs = append(recs, stages.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: o, Key: []byte(key(o))})
	}
	return fetch.NewBatch(tp, 1, epoch, offsets.Span{Start: from, End: to}, recs, to-from)
}

func sameKey(int64) string { return "k" }

// harness runs a Step and collects its completions.
type harness struct {
	in     chan Message
	out    chan *Report
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	got    []Completion
}

func run(t *testing.T, cfg Config) *harness {
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{in: make(chan Message), out: make(chan *Report), cancel: cancel, done: make(chan struct{})}
	p := NewStep(cfg)
	go func() { p.Run(ctx, h.in, h.out); close(h.done) }()
	go func() {
		for ev := range h.out {
			h.mu.Lock()
			h.got = append(h.got, ev.Completions...)
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-h.done; close(h.out) })
	return h
}

func (h *harness) completions(t *testing.T, n int) []Completion {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.mu.Lock()
		got := append([]Completion(nil), h.got...)
		h.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d completions, want %d", len(got), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	p0 = offsetstore.TopicPartition{Topic: "t", Partition: 0}
	p1 = offsetstore.TopicPartition{Topic: "t", Partition: 1}
)

// TestPartitionOrder: batches of a partition run one at a time in order;
// different partitions run concurrently.
func TestPartitionOrder(t *testing.T) {
	var mu sync.Mutex
	seen := map[offsetstore.TopicPartition][]int64{}
	busy := map[offsetstore.TopicPartition]bool{}
	var overlap atomic.Bool // two partitions ran at once
	var running atomic.Int32
	stage := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		tp := offsetstore.TopicPartition{Topic: in[0].Topic, Partition: in[0].Partition}
		mu.Lock()
		if busy[tp] {
			mu.Unlock()
			return nil, fmt.Errorf("%s processed concurrently", tp)
		}
		busy[tp] = true
		mu.Unlock()
		if running.Add(1) > 1 {
			overlap.Store(true)
		}
		time.Sleep(2 * time.Millisecond)
		running.Add(-1)
		mu.Lock()
		for _, r := range in {
			seen[tp] = append(seen[tp], r.Offset)
		}
		busy[tp] = false
		mu.Unlock()
		return in, nil
	})
	h := run(t, Config{Chain: Chain{Stages: []NamedStage{{Name: "s", Stage: stage}}, Policy: FailurePolicy{Stop: true}}, Concurrency: 4})
	var msg Message
	for i := int64(0); i < 20; i++ {
		msg.Batches = append(msg.Batches, batch(p0, 1, i*3, i*3+3, sameKey), batch(p1, 1, i*3, i*3+3, sameKey))
	}
	h.in <- msg
	got := h.completions(t, 40)
	for _, c := range got {
		if c.Err != nil || !c.Finished() {
			t.Fatalf("completion %+v", c)
		}
	}
	for _, tp := range []offsetstore.TopicPartition{p0, p1} {
		for i, o := range seen[tp] {
			if o != int64(i) {
				t.Fatalf("%s processed out of order: %v", tp, seen[tp])
			}
		}
	}
	if !overlap.Load() {
		t.Fatal("two partitions never ran at the same time")
	}
}

// TestKeyOrder: with key ordering, records with the same key keep their
// order while different keys run concurrently, and a batch completes only
// once all its keys are done.
func TestKeyOrder(t *testing.T) {
	var mu sync.Mutex
	byKey := map[string][]int64{}
	var running, peak atomic.Int32
	stage := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		if n := running.Add(1); n > peak.Load() {
			peak.Store(n)
		}
		time.Sleep(3 * time.Millisecond)
		running.Add(-1)
		mu.Lock()
		for _, r := range in {
			byKey[string(r.Key)] = append(byKey[string(r.Key)], r.Offset)
		}
		mu.Unlock()
		return in, nil
	})
	h := run(t, Config{Chain: Chain{Stages: []NamedStage{{Name: "s", Stage: stage}}}, Concurrency: 4, KeyOrdering: true})
	key := func(o int64) string { return fmt.Sprintf("k%d", o%8) }
	var msg Message
	for i := int64(0); i < 10; i++ {
		msg.Batches = append(msg.Batches, batch(p0, 1, i*16, i*16+16, key))
	}
	h.in <- msg
	got := h.completions(t, 10)
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for k, offs := range byKey {
		total += len(offs)
		for i := 1; i < len(offs); i++ {
			if offs[i] <= offs[i-1] {
				t.Fatalf("key %s out of order: %v", k, offs)
			}
		}
	}
	if total != 160 {
		t.Fatalf("%d records processed before all 10 batches completed (got %d completions), want 160", total, len(got))
	}
	if peak.Load() < 2 {
		t.Fatal("keys of one partition never ran concurrently")
	}
}

// TestFenceDropsQueued: a fence drops the batches still queued, the one
// running finishes, and every batch is reported exactly once.
func TestFenceDropsQueued(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{}, 10)
	stage := stages.StageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
		started <- struct{}{}
		<-release
		return in, nil
	})
	h := run(t, Config{Chain: Chain{Stages: []NamedStage{{Name: "s", Stage: stage}}}, Concurrency: 1})
	running := batch(p0, 3, 0, 5, sameKey)
	queued := []*fetch.Batch{batch(p0, 3, 5, 10, sameKey), batch(p0, 3, 10, 15, sameKey)}
	h.in <- Message{Batches: []*fetch.Batch{running}}
	<-started // the first batch runs; the next ones queue behind it
	h.in <- Message{Batches: queued}
	h.in <- Message{Fences: []Fence{{Partition: p0, Epoch: 3}}}
	late := batch(p0, 3, 15, 20, sameKey) // of the fenced epoch
	next := batch(p0, 4, 20, 25, sameKey) // of a new epoch
	h.in <- Message{Batches: []*fetch.Batch{late, next}}
	close(release)
	got := h.completions(t, 5)
	status := map[*fetch.Batch]Completion{}
	for _, c := range got {
		if _, dup := status[c.Batch]; dup {
			t.Fatalf("batch %v reported twice", c.Batch.Span())
		}
		status[c.Batch] = c
	}
	if c := status[running]; !c.Finished() || c.Err != nil {
		t.Fatalf("the running batch: %+v, want finished", c)
	}
	for _, b := range append(queued, late) {
		if !dropped(status[b]) {
			t.Fatalf("batch %v of the fenced epoch: %+v, want dropped", b.Span(), status[b])
		}
	}
	if c := status[next]; !c.Finished() || c.Err != nil {
		t.Fatalf("batch of the new epoch: %+v, want finished", c)
	}
}

// TestStopPolicy: a record that keeps failing stops its partition at
// that record; queued batches of the partition are dropped; other
// partitions and a later epoch go on.
func TestStopPolicy(t *testing.T) {
	var attempts atomic.Int32
	stage := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		for _, r := range in {
			if r.Partition == 0 && r.Offset == 7 {
				attempts.Add(1)
				return nil, errors.New("bad record")
			}
		}
		return in, nil
	})
	h := run(t, Config{Chain: Chain{Stages: []NamedStage{{Name: "validate", Stage: stage}},
		Policy: FailurePolicy{Stop: true, Retries: 2, Backoff: time.Millisecond}}, Concurrency: 2})
	b1, b2, other := batch(p0, 1, 5, 10, sameKey), batch(p0, 1, 10, 15, sameKey), batch(p1, 1, 0, 5, sameKey)
	h.in <- Message{Batches: []*fetch.Batch{b1, b2, other}}
	got := h.completions(t, 3)
	status := map[*fetch.Batch]Completion{}
	for _, c := range got {
		status[c.Batch] = c
	}
	var stop *stages.StoppedError
	if c := status[b1]; !errors.As(c.Err, &stop) || c.FinishedBelow != 7 || stop.Stage != "validate" {
		t.Fatalf("failing batch: %+v, want stopped at 7 by stage validate", c)
	}
	// the batch failed, then record 7 alone failed 1+2 times
	if n := attempts.Load(); n != 4 {
		t.Fatalf("record 7 was tried %d times, want 4 (batch, alone, 2 retries)", n)
	}
	if !dropped(status[b2]) {
		t.Fatalf("batch after the stop: %+v, want dropped", status[b2])
	}
	if c := status[other]; c.Err != nil || !c.Finished() {
		t.Fatalf("other partition: %+v, want finished", c)
	}
	// after a seek (new epoch) the partition runs again
	again := batch(p0, 2, 8, 10, sameKey)
	h.in <- Message{Batches: []*fetch.Batch{again}}
	got = h.completions(t, 4)
	if c := got[3]; c.Batch != again || c.Err != nil || !c.Finished() {
		t.Fatalf("batch of a new epoch after the stop: %+v", c)
	}
}

func nopLog() stages.Logger { return stages.NopLogger }

// dropped reports whether nothing of c's batch finished, without an error.
func dropped(c Completion) bool { return c.Err == nil && c.FinishedBelow == c.Batch.Span().Start }

// TestRunAbandonsCallsIgnoringCancellation: when its context ends, Run
// waits AbandonAfter for the units running and then returns, naming the
// stage and the records it abandoned, instead of waiting for a stage
// call that ignores its context; the abandoned batch is never reported
// finished. (The abandoned goroutine is the stage's call; the test
// releases it at the end so that goleak finds nothing left.)
func TestRunAbandonsCallsIgnoringCancellation(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	entered := make(chan struct{}, 1)
	deaf := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		for _, r := range in {
			if r.Partition == 0 && r.Offset == 3 {
				entered <- struct{}{}
				<-release // ignores its context
			}
		}
		return in, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	in, out := make(chan Message), make(chan *Report, 16)
	step := NewStep(Config{Chain: Chain{Stages: []NamedStage{{Name: "deaf", Stage: deaf}}}, Concurrency: 2, AbandonAfter: 200 * time.Millisecond})
	res := make(chan error, 1)
	go func() { res <- step.Run(ctx, in, out) }()
	stuck, other := batch(p0, 1, 3, 6, sameKey), batch(p1, 1, 0, 5, sameKey)
	in <- Message{Batches: []*fetch.Batch{stuck, other}}
	<-entered
	cancel()
	began := time.Now()
	var err error
	select {
	case err = <-res:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of its context's end: it waits for a stage that ignores cancellation")
	}
	if took := time.Since(began); took > time.Second {
		t.Fatalf("Run returned %v after its context ended, want about AbandonAfter (200ms)", took)
	}
	var ab *AbandonedError
	if !errors.As(err, &ab) || ab.Units != 1 || ab.Records != 3 || ab.Stages["deaf"] != 1 || ab.From[p0] != 3 {
		t.Fatalf("err %v (%+v), want an AbandonedError of one unit of stage deaf, 3 records of t/0 from 3", err, ab)
	}
	for _, want := range []string{`"deaf"`, "t/0 from offset 3", "not committed"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	close(out)
	for r := range out {
		for _, c := range r.Completions {
			if c.Batch == stuck && c.FinishedBelow > 3 {
				t.Fatalf("the abandoned batch was reported finished below %d", c.FinishedBelow)
			}
		}
	}
}
