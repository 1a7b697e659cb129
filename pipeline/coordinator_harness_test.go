package pipeline

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/fencepost-dev/fencepost/internal/engine/commit"
	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/internal/engine/resolve"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// coordHarness drives a coordinator synchronously: it plays every worker
// (resolver, fetchers, committer, processing) so a test decides exactly
// which result arrives when.
type coordHarness struct {
	t        harnessT
	c        *coordinator
	now      time.Time
	resolves []offsets.ResolveRequest // sent, not yet answered
	fetches  []offsets.FetchRequest   // sent, not yet answered
	commits  []commit.Job             // sent, not yet answered
	metadata int                      // metadata refreshes asked for
	messages []process.Message        // taken from the coordinator, in order
	notices  []notice
}

// harnessT is what the harness needs of *testing.T, *testing.B and
// *rapid.T.
type harnessT interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func newCoordHarness(t harnessT, cfg coordinatorConfig) *coordHarness {
	h := &coordHarness{t: t, now: time.Unix(1_700_000_000, 0)}
	var log *zap.Logger // quiet for benchmarks and the state machine
	if tt, ok := t.(*testing.T); ok {
		log = zaptest.NewLogger(tt)
	} else if os.Getenv("COORDINATOR_DEBUG") != "" {
		log, _ = zap.NewDevelopment()
	}
	h.c = newCoordinator(cfg, coordinatorOutputs{
		resolve: func(b offsets.ResolveRequest) { h.resolves = append(h.resolves, b) },
		fetch: func(b offsets.FetchRequest) {
			// in broker and fetcher order, whatever order the coordinator
			// planned them in, so a rapid run replays
			i, _ := slices.BinarySearchFunc(h.fetches, b, func(x, y offsets.FetchRequest) int {
				return cmp.Or(cmp.Compare(x.Broker(), y.Broker()), cmp.Compare(x.Fetcher(), y.Fetcher()), 1)
			})
			h.fetches = slices.Insert(h.fetches, i, b)
		},
		commit:   func(r commit.Job) { h.commits = append(h.commits, r) },
		metadata: func() { h.metadata++ },
	}, log, nil, h.now)
	return h
}

// send delivers one event (or a step's result, wrapped in its event)
// and collects what the coordinator emitted.
func (h *coordHarness) send(ev any) {
	h.c.now = h.now
	h.c.handle(asEvent(ev))
	h.collect()
}

// asEvent wraps a step's result in its event; events pass as they are.
func asEvent(v any) event {
	switch x := v.(type) {
	case event:
		return x
	case *fetch.Result:
		return fetchedEvent{x}
	case *fetch.Leaders:
		return leadersEvent{x}
	case *resolve.Result:
		return resolvedEvent{x}
	case *process.Report:
		return processedEvent{x}
	case *commit.Result:
		return committedEvent{x}
	}
	panic(fmt.Sprintf("no coordinator event for %T", v))
}

func (h *coordHarness) collect() {
	if m, ok := h.c.takeProcessMessage(); ok {
		h.messages = append(h.messages, m)
	}
	h.notices = append(h.notices, h.c.notices...)
	h.c.notices = h.c.notices[:0]
}

func (h *coordHarness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	h.send(tickEvent{now: h.now})
}

func (h *coordHarness) leaders(l map[offsetstore.TopicPartition]int32) {
	h.send(&fetch.Leaders{Leaders: l})
}

func (h *coordHarness) assign(gen offsets.Generation, store offsets.CommitStore, parts ...assignedPartition) {
	h.send(&assignEvent{gen: gen, store: store, partitions: parts})
}

// takeFetch removes and returns the fetch in flight to broker.
func (h *coordHarness) takeFetch(broker int32) offsets.FetchRequest {
	h.t.Helper()
	for i, f := range h.fetches {
		if f.Broker() == broker {
			h.fetches = append(h.fetches[:i], h.fetches[i+1:]...)
			return f
		}
	}
	h.t.Fatalf("no fetch in flight to broker %d (in flight: %v)", broker, h.fetches)
	return offsets.FetchRequest{}
}

func (h *coordHarness) takeResolve() offsets.ResolveRequest {
	h.t.Helper()
	if len(h.resolves) == 0 {
		h.t.Fatal("no lookup in flight")
	}
	r := h.resolves[0]
	h.resolves = h.resolves[1:]
	return r
}

// answerFetch answers every entry of f with fn's result.
func (h *coordHarness) answerFetch(f offsets.FetchRequest, fn func(e offsets.FetchEntry) fetch.PartitionResult) {
	res := &fetch.Result{Request: f, Partitions: make([]fetch.PartitionResult, f.Len())}
	for i := range res.Partitions {
		res.Partitions[i] = fn(f.At(i))
	}
	h.send(res)
}

// answerResolve answers every entry of r with fn's result.
func (h *coordHarness) answerResolve(r offsets.ResolveRequest, fn func(e offsets.ResolveEntry) resolve.PartitionResult) {
	res := &resolve.Result{Request: r, Partitions: make([]resolve.PartitionResult, r.Len())}
	for i := range res.Partitions {
		res.Partitions[i] = fn(r.At(i))
	}
	h.send(res)
}

// records builds a fetch answer with records [from, to) of entry e.
func records(e offsets.FetchEntry, to, logStart, hw int64) fetch.PartitionResult {
	from := e.Position.Offset()
	if to <= from {
		return fetch.PartitionResult{Next: from, LogStart: logStart, HighWatermark: hw}
	}
	recs := make([]stages.Record, 0, to-from)
	for o := from; o < to; o++ {
		recs = append(recs, stages.Record{Topic: e.Partition.Topic, Partition: e.Partition.Partition, Offset: o, Value: []byte("v")})
	}
	b := fetch.NewBatch(e.Partition, e.Position.Generation(), e.Position.Epoch(), offsets.Span{Start: from, End: to}, recs, to-from)
	return fetch.PartitionResult{Next: to, Batch: b, Bytes: to - from, LogStart: logStart, HighWatermark: hw}
}

func outOfRange(logStart, hw int64) func(offsets.FetchEntry) fetch.PartitionResult {
	return func(e offsets.FetchEntry) fetch.PartitionResult {
		return fetch.PartitionResult{Outcome: fetch.OffsetOutOfRange, LogStart: logStart, HighWatermark: hw, Next: e.Position.Offset()}
	}
}

func bounds(logStart, hw int64) func(offsets.ResolveEntry) resolve.PartitionResult {
	return func(offsets.ResolveEntry) resolve.PartitionResult {
		return resolve.PartitionResult{LogStart: logStart, HighWatermark: hw, TimeOffset: -1}
	}
}

// resets returns the reset events seen for tp.
func (h *coordHarness) resets(tp offsetstore.TopicPartition) []offsetstore.ResetEvent {
	var out []offsetstore.ResetEvent
	for _, n := range h.notices {
		if n.Reset != nil && n.Reset.Partition == tp {
			out = append(out, *n.Reset)
		}
	}
	return out
}

// completeAll reports every batch handed to processing as finished, and
// every fenced batch as dropped, as processing would.
func (h *coordHarness) completeAll() {
	var rep process.Report
	fenced := map[offsetstore.TopicPartition]offsetstore.Epoch{}
	for _, m := range h.messages {
		for _, f := range m.Fences {
			if f.Epoch > fenced[f.Partition] {
				fenced[f.Partition] = f.Epoch
			}
		}
		for _, b := range m.Batches {
			c := process.Completion{Batch: b, FinishedBelow: b.Span().End}
			if b.Epoch() <= fenced[b.Partition()] {
				c.FinishedBelow = b.Span().Start
			}
			rep.Completions = append(rep.Completions, c)
		}
	}
	h.messages = nil
	if len(rep.Completions) > 0 {
		h.send(&rep)
	}
}

// checkStructure asserts invariant (i): every assigned partition is in
// exactly one state and has a position or a pending request, never a
// hole; (iv) at most one operation in flight per partition.
func (h *coordHarness) checkStructure() {
	h.t.Helper()
	c := h.c
	seen := map[offsetstore.TopicPartition]bool{}
	for slot, p := range c.slots {
		if p == nil || p.zombie {
			continue
		}
		if seen[p.tp] {
			h.t.Fatalf("partition %s in two slots", p.tp)
		}
		seen[p.tp] = true
		if c.index[p.tp] != slot {
			h.t.Fatalf("partition %s: index says slot %d, is in %d", p.tp, c.index[p.tp], slot)
		}
		if p.state != Stopped && p.stopErr != nil {
			h.t.Fatalf("partition %s is %v but keeps a stop error: %v", p.tp, p.state, p.stopErr)
		}
		switch p.state {
		case Fetching:
			// a kept partition's position may come from an earlier
			// generation (cooperative rebalancing), never a later one
			if p.pos.Epoch() != p.epoch || p.pos.Generation() > c.gen || p.pos.Offset() < 0 {
				h.t.Fatalf("partition %s fetching at %v, epoch %d gen %d", p.tp, p.pos, p.epoch, c.gen)
			}
		case AwaitReset:
			if _, ok := p.req.Offset(); ok {
				h.t.Fatalf("partition %s awaits reset with an offset request %v", p.tp, p.req)
			}
		case AwaitValidation:
			if off, ok := p.req.Offset(); !ok || off < 0 {
				h.t.Fatalf("partition %s awaits validation without an offset: %v", p.tp, p.req)
			}
		case Stopped:
			if p.stopErr == nil {
				h.t.Fatalf("partition %s stopped without an error", p.tp)
			}
		default:
			h.t.Fatalf("partition %s has no state (%d)", p.tp, p.state)
		}
	}
	if len(seen) != len(c.index) {
		h.t.Fatalf("index has %d partitions, slots %d", len(c.index), len(seen))
	}
	inflight := map[offsetstore.TopicPartition]int{}
	for _, f := range h.fetches {
		for i := 0; i < f.Len(); i++ {
			inflight[f.At(i).Partition]++
		}
	}
	for _, r := range h.resolves {
		for i := 0; i < r.Len(); i++ {
			inflight[r.At(i).Partition]++
		}
	}
	for tp, n := range inflight {
		if n > 1 {
			h.t.Fatalf("partition %s has %d operations in flight", tp, n)
		}
	}
}
