package process

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/stages"
)

// How a unit of the cancel tests waits until the test releases it.
type waitMode int

const (
	// blockOnCtx: the stage call blocks until its context ends or the
	// release.
	blockOnCtx waitMode = iota
	// unavailable: the stage fails as unavailable until the release (the
	// chain waits and retries, unavailableWait).
	unavailable
	// deadLetterDown: the stage rejects every record for good and the
	// dead-letter sink fails (not permanently) until the release.
	deadLetterDown
)

func (m waitMode) String() string {
	return [...]string{"stage blocks on its context", "destination unavailable", "dead-letter sink down"}[m]
}

// TestFenceCancel: a Fence with Cancel ends the units running for its
// partition whose epochs are at most the fence's, whatever they wait for
// (a stage call, an unavailable destination, the dead-letter sink): their
// batches are reported at once, unfinished and without an error. A fence
// without Cancel, of another partition, or of an older epoch leaves a
// running unit alone: it finishes once released.
func TestFenceCancel(t *testing.T) {
	key := func(o int64) string { return fmt.Sprintf("k%d", o%4) }
	tests := []struct {
		name        string
		mode        waitMode
		keyOrdering bool
		batches     []*fetch.Batch // all running at once
		fence       Fence
		canceled    []bool // per batch: want it canceled
		// backoff is the chain's retry backoff: by default far longer
		// than the test waits, so that only a canceled context ends a
		// wait; shorter where a unit left running must retry once
		// released.
		backoff time.Duration
	}{
		{name: "cancel ends a stage call blocked on its context", batches: []*fetch.Batch{batch(p0, 3, 0, 5, sameKey)},
			fence: Fence{Partition: p0, Epoch: 3, Cancel: true}, canceled: []bool{true}},
		{name: "cancel ends a wait for an unavailable destination", mode: unavailable, batches: []*fetch.Batch{batch(p0, 3, 0, 5, sameKey)},
			fence: Fence{Partition: p0, Epoch: 3, Cancel: true}, canceled: []bool{true}},
		{name: "cancel ends a dead-letter write", mode: deadLetterDown, batches: []*fetch.Batch{batch(p0, 3, 0, 5, sameKey)},
			fence: Fence{Partition: p0, Epoch: 3, Cancel: true}, canceled: []bool{true}},
		{name: "cancel with a later epoch", batches: []*fetch.Batch{batch(p0, 3, 0, 5, sameKey)},
			fence: Fence{Partition: p0, Epoch: 4, Cancel: true}, canceled: []bool{true}},
		{name: "cancel ends every key group of the partition", keyOrdering: true, batches: []*fetch.Batch{batch(p0, 3, 0, 8, key), batch(p1, 3, 0, 8, key)},
			fence: Fence{Partition: p0, Epoch: 3, Cancel: true}, canceled: []bool{true, false}},
		{name: "a fence without cancel lets the running unit finish", batches: []*fetch.Batch{batch(p0, 3, 0, 5, sameKey)},
			fence: Fence{Partition: p0, Epoch: 3}, canceled: []bool{false}},
		{name: "a fence without cancel lets an unavailable wait finish", mode: unavailable, batches: []*fetch.Batch{batch(p0, 3, 0, 5, sameKey)},
			fence: Fence{Partition: p0, Epoch: 3}, canceled: []bool{false}, backoff: 100 * time.Millisecond},
		{name: "a cancel of partition A leaves B's unit", batches: []*fetch.Batch{batch(p0, 3, 0, 5, sameKey), batch(p1, 3, 0, 5, sameKey)},
			fence: Fence{Partition: p1, Epoch: 3, Cancel: true}, canceled: []bool{false, true}},
		{name: "a cancel of partition A leaves B's dead-letter write", mode: deadLetterDown, batches: []*fetch.Batch{batch(p0, 3, 0, 5, sameKey), batch(p1, 3, 0, 5, sameKey)},
			fence: Fence{Partition: p1, Epoch: 3, Cancel: true}, canceled: []bool{false, true}, backoff: 100 * time.Millisecond},
		{name: "a cancel of an older epoch leaves the unit", batches: []*fetch.Batch{batch(p0, 3, 0, 5, sameKey)},
			fence: Fence{Partition: p0, Epoch: 2, Cancel: true}, canceled: []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name+" ("+tt.mode.String()+")", func(t *testing.T) {
			release := make(chan struct{})
			released := func() bool {
				select {
				case <-release:
					return true
				default:
					return false
				}
			}
			// started gets the first source offset of every unit once it
			// waits; causes gets why a blocked stage call's context ended.
			started := make(chan struct{}, 64)
			causes := make(chan error, 64)
			var mu sync.Mutex
			type at struct {
				partition int32
				offset    int64
			}
			seen := map[at]bool{}
			signal := func(r stages.Record) {
				mu.Lock()
				defer mu.Unlock()
				if k := (at{r.Partition, r.Offset}); !seen[k] {
					seen[k] = true
					started <- struct{}{}
				}
			}
			var stage stages.Stage
			var sink stages.Producer
			switch tt.mode {
			case blockOnCtx:
				stage = stages.StageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
					signal(in[0])
					select {
					case <-ctx.Done():
						causes <- context.Cause(ctx)
						return nil, ctx.Err()
					case <-release:
						return in, nil
					}
				})
			case unavailable:
				stage = stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
					if released() {
						return in, nil
					}
					signal(in[0])
					return nil, stages.Unavailable(errors.New("destination down"))
				})
			case deadLetterDown:
				stage = stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
					return nil, stages.Permanent(errors.New("bad record"))
				})
				sink = producerFunc(func(_ context.Context, rs []stages.Record) error {
					if released() {
						return nil
					}
					signal(rs[0])
					return errors.New("dead-letter topic down")
				})
			}
			backoff := cmp.Or(tt.backoff, 10*time.Second)
			h := run(t, Config{Chain: Chain{Stages: []NamedStage{{Name: "s", Stage: stage}},
				Policy: FailurePolicy{Backoff: backoff, MaxBackoff: backoff, Sink: sink}},
				Concurrency: 8, KeyOrdering: tt.keyOrdering})
			// The units: one per partition, or per key group.
			units := map[queueKey]bool{}
			ks := NewScheduler(8, tt.keyOrdering)
			for _, b := range tt.batches {
				for _, r := range b.Records() {
					k := queueKey{tp: b.Partition()}
					if ks.keyOrdering {
						k.keyGroup = ks.keyGroup(r.Key)
					}
					units[k] = true
				}
			}
			if tt.keyOrdering && len(units) < 3 {
				t.Fatalf("%d units: the test means several key groups of a partition to run", len(units))
			}
			h.in <- Message{Batches: tt.batches}
			for range units {
				select {
				case <-started:
				case <-time.After(5 * time.Second):
					mu.Lock()
					n := len(seen)
					mu.Unlock()
					t.Fatalf("%d unit(s) waiting, want %d", n, len(units))
				}
			}
			h.in <- Message{Fences: []Fence{tt.fence}}
			h.in <- Message{} // Run took the fence: a cancel has happened

			want := map[*fetch.Batch]bool{}
			for i, b := range tt.batches {
				want[b] = tt.canceled[i]
			}
			nCanceled := 0
			for _, c := range tt.canceled {
				if c {
					nCanceled++
				}
			}
			// The canceled batches are reported promptly, before the
			// release; the others are not (they are still waiting).
			began := time.Now()
			h.completions(t, nCanceled)
			if took := time.Since(began); took > 2*time.Second {
				t.Fatalf("canceled batches reported %v after the fence, want promptly", took)
			}
			time.Sleep(20 * time.Millisecond) // a wrong completion would show now
			h.mu.Lock()
			got := append([]Completion(nil), h.got...)
			h.mu.Unlock()
			if len(got) != nCanceled {
				t.Fatalf("before the release: %d completions %+v, want %d (the canceled batches)", len(got), got, nCanceled)
			}
			for _, c := range got {
				if !want[c.Batch] {
					t.Fatalf("batch %v of %s was canceled (%+v), want it left running", c.Batch.Span(), c.Batch.Partition(), c)
				}
				if !dropped(c) {
					t.Fatalf("canceled batch: %+v, want unfinished (FinishedBelow at its start) and no error", c)
				}
			}
			if tt.mode == blockOnCtx {
				for range nCanceled {
					if cause := <-causes; !errors.Is(cause, errFenceCancel) {
						t.Fatalf("a canceled stage call's context ended for %v, want errFenceCancel", cause)
					}
				}
			}
			close(release)
			got = h.completions(t, len(tt.batches))
			if len(got) != len(tt.batches) {
				t.Fatalf("%d completions, want one per batch: %+v", len(got), got)
			}
			for _, c := range got[nCanceled:] {
				if want[c.Batch] {
					t.Fatalf("batch %v reported twice", c.Batch.Span())
				}
				if !c.Finished() || c.Err != nil {
					t.Fatalf("batch left running: %+v, want finished once released", c)
				}
			}
		})
	}
}

// TestFenceCancelThenNewEpoch: after a cancel the partition's next
// epoch runs as usual.
func TestFenceCancelThenNewEpoch(t *testing.T) {
	started := make(chan struct{}, 4)
	stage := stages.StageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
		if in[0].Offset == 0 {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return in, nil
	})
	h := run(t, Config{Chain: Chain{Stages: []NamedStage{{Name: "s", Stage: stage}}}, Concurrency: 1})
	old := batch(p0, 1, 0, 5, sameKey)
	queued := batch(p0, 1, 5, 10, sameKey)
	h.in <- Message{Batches: []*fetch.Batch{old, queued}}
	<-started
	next := batch(p0, 2, 1, 5, sameKey) // reset: from offset 1, a new epoch
	h.in <- Message{Fences: []Fence{{Partition: p0, Epoch: 1, Cancel: true}}, Batches: []*fetch.Batch{next}}
	got := h.completions(t, 3)
	status := map[*fetch.Batch]Completion{}
	for _, c := range got {
		status[c.Batch] = c
	}
	for _, b := range []*fetch.Batch{old, queued} {
		if !dropped(status[b]) {
			t.Fatalf("batch %v of the fenced epoch: %+v, want unfinished, no error", b.Span(), status[b])
		}
	}
	if c := status[next]; !c.Finished() || c.Err != nil {
		t.Fatalf("batch of the new epoch: %+v, want finished", c)
	}
}

// TestFenceCancelDiscardsResult: a canceled unit counts for nothing
// whatever its chain returns: a stage that ignores its context and then
// succeeds, or fails (under the stop policy), is reported unfinished
// and without an error, never finished and never as a stop.
func TestFenceCancelDiscardsResult(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error // what the stage returns once released
	}{
		{name: "ignores its context and succeeds"},
		{name: "ignores its context and fails", err: errors.New("bad record")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			release, started := make(chan struct{}), make(chan struct{}, 1)
			stage := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
				select {
				case started <- struct{}{}:
				default:
				}
				<-release
				if tt.err != nil {
					return nil, tt.err
				}
				return in, nil
			})
			h := run(t, Config{Chain: Chain{Stages: []NamedStage{{Name: "s", Stage: stage}}, Policy: FailurePolicy{Stop: true}}, Concurrency: 1})
			b := batch(p0, 1, 0, 5, sameKey)
			h.in <- Message{Batches: []*fetch.Batch{b}}
			<-started
			h.in <- Message{Fences: []Fence{{Partition: p0, Epoch: 1, Cancel: true}}}
			h.in <- Message{} // Run took the fence
			close(release)
			if c := h.completions(t, 1)[0]; !dropped(c) {
				t.Fatalf("canceled batch: %+v, want unfinished and no error", c)
			}
		})
	}
}

type producerFunc func(ctx context.Context, rs []stages.Record) error

func (f producerFunc) Produce(ctx context.Context, rs []stages.Record) error { return f(ctx, rs) }
