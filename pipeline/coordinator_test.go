package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"

	"github.com/fencepost-dev/fencepost/internal/engine/commit"
	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

var tp0 = offsetstore.TopicPartition{Topic: "events", Partition: 0}

// TestResetDecisions: where a partition starts for each start request,
// policy and log bounds (log start 40, high watermark 60 unless said).
func TestResetDecisions(t *testing.T) {
	type want struct {
		reason   offsetstore.ResetReason // 0: no reset event
		from, to int64
		skipped  int64
		dataLoss bool
		stopped  bool
	}
	tests := []struct {
		name     string
		policy   offsetstore.ResetPolicy
		start    offsetstore.StartRequest
		ls, hw   int64
		timeOff  int64
		want     want
		position int64
	}{
		{name: "new group earliest", policy: offsetstore.ResetEarliest, start: offsetstore.ByPolicy(),
			want: want{reason: offsetstore.ReasonNoCommittedOffset, from: -1, to: 40}, position: 40},
		{name: "new group latest skips the log", policy: offsetstore.ResetLatest, start: offsetstore.ByPolicy(),
			want: want{reason: offsetstore.ReasonNoCommittedOffset, from: -1, to: 60, skipped: 20}, position: 60},
		{name: "new group none stops", policy: offsetstore.ResetNone, start: offsetstore.ByPolicy(),
			want: want{stopped: true}},
		{name: "committed in range", policy: offsetstore.ResetLatest, start: offsetstore.Committed(50),
			want: want{}, position: 50},
		{name: "committed at high watermark", policy: offsetstore.ResetNone, start: offsetstore.Committed(60),
			want: want{}, position: 60},
		{name: "committed below log start resumes at log start whatever the policy", policy: offsetstore.ResetLatest,
			start: offsetstore.Committed(10),
			want:  want{reason: offsetstore.ReasonBelowLogStart, from: 10, to: 40, skipped: 30}, position: 40},
		{name: "committed below log start with none still resumes", policy: offsetstore.ResetNone,
			start: offsetstore.Committed(10),
			want:  want{reason: offsetstore.ReasonBelowLogStart, from: 10, to: 40, skipped: 30}, position: 40},
		{name: "committed above high watermark earliest is data loss", policy: offsetstore.ResetEarliest,
			start: offsetstore.Committed(500), ls: 0, hw: 7,
			want: want{reason: offsetstore.ReasonAboveHighWatermark, from: 500, to: 0, dataLoss: true}, position: 0},
		{name: "committed above high watermark latest", policy: offsetstore.ResetLatest,
			start: offsetstore.Committed(500), ls: 0, hw: 7,
			want: want{reason: offsetstore.ReasonAboveHighWatermark, from: 500, to: 7, skipped: 7, dataLoss: true}, position: 7},
		{name: "committed above high watermark none stops", policy: offsetstore.ResetNone,
			start: offsetstore.Committed(500), ls: 0, hw: 7, want: want{stopped: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls, hw := tt.ls, tt.hw
			if ls == 0 && hw == 0 {
				ls, hw = 40, 60
			}
			h := newCoordHarness(t, coordinatorConfig{policy: tt.policy, validate: true})
			h.leaders(map[offsetstore.TopicPartition]int32{tp0: 1})
			store := newMemoryStore(1)
			h.assign(1, store, assignedPartition{tp: tp0, start: tt.start})
			h.answerResolve(h.takeResolve(), bounds(ls, hw))
			h.checkStructure()
			rs := h.resets(tp0)
			st := h.c.snapshot()[0]
			if tt.want.stopped {
				var re *offsetstore.ResetError
				if st.State != Stopped || !errors.As(st.Err, &re) {
					t.Fatalf("state %v err %v, want Stopped with a *ResetError", st.State, st.Err)
				}
				if len(h.fetches) != 0 {
					t.Fatalf("stopped partition is fetched: %v", h.fetches)
				}
				return
			}
			if tt.want.reason == 0 {
				if len(rs) != 0 {
					t.Fatalf("unexpected reset %+v", rs)
				}
			} else {
				if len(rs) != 1 {
					t.Fatalf("%d resets, want 1", len(rs))
				}
				r := rs[0]
				if r.Reason != tt.want.reason || r.From != tt.want.from || r.To != tt.want.to || r.Skipped != tt.want.skipped || r.DataLoss != tt.want.dataLoss {
					t.Fatalf("reset %+v, want %+v", r, tt.want)
				}
			}
			// a first start is reported, but it is not a reset
			if counted, want := h.c.stats.resets.Load(), tt.want.reason != 0 && tt.want.reason != offsetstore.ReasonNoCommittedOffset; (counted == 1) != want || counted > 1 {
				t.Fatalf("Stats.Resets %d after %v", counted, tt.want.reason)
			}
			if st.State != Fetching || st.Position != tt.position {
				t.Fatalf("state %v at %d, want FETCHING at %d", st.State, st.Position, tt.position)
			}
			if f := h.takeFetch(1); f.At(0).Position.Offset() != tt.position {
				t.Fatalf("fetching at %d", f.At(0).Position.Offset())
			}
			// the start is committed at the next commit, even backwards
			// after data loss
			h.send(&flushEvent{done: make(chan error, 1)})
			if len(h.commits) == 1 {
				req := h.commits[0]
				if err := req.Store.Commit(context.Background(), req.Request); err != nil {
					t.Fatal(err)
				}
				h.send(&commit.Result{Request: req.Request})
			}
			if got, ok := store.Offsets()[tp0]; ok && got != tt.position {
				t.Fatalf("committed %d, want %d", got, tt.position)
			}
		})
	}
}

// TestRevokeDrainsThenCommits: on revoke the coordinator stops fetching,
// hands nothing more to processing, waits for the batches being
// processed, commits exactly the processed watermark under the ending
// generation, and only then lets go.
func TestRevokeDrainsThenCommits(t *testing.T) {
	h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest})
	h.leaders(map[offsetstore.TopicPartition]int32{tp0: 1})
	store := newMemoryStore(3)
	h.assign(3, store, assignedPartition{tp: tp0, start: offsetstore.Committed(0)})
	h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 10, 0, 100) })
	inflight := h.takeFetch(1) // the next fetch, at 10, is in flight
	handed := h.messages
	h.messages = nil

	done := make(chan error, 1)
	h.send(&revokeEvent{gen: 3, drainBy: h.now.Add(time.Minute), deadline: h.now.Add(2 * time.Minute), done: done})
	if len(h.messages) != 1 || len(h.messages[0].Fences) != 1 {
		t.Fatalf("revoke sent %+v to processing, want one fence", h.messages)
	}
	h.messages = nil
	// the fetch in flight comes back with records: they are not handed out
	h.answerFetch(inflight, func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 20, 0, 100) })
	if len(h.messages) != 0 || len(h.fetches) != 0 {
		t.Fatalf("while revoking: handed %v, fetching %v", h.messages, h.fetches)
	}
	select {
	case err := <-done:
		t.Fatalf("revoke finished (%v) while a batch is being processed", err)
	default:
	}
	// processing finishes the batch it had
	h.messages = handed
	h.completeAll()
	if len(h.commits) != 1 {
		t.Fatalf("%d commits after drain, want 1", len(h.commits))
	}
	req := h.commits[0]
	if req.Request.Generation() != 3 || req.Request.Len() != 1 || req.Request.At(0).Offset != 10 {
		t.Fatalf("final commit %+v, want offset 10 in generation 3", req.Request.Entries())
	}
	select {
	case err := <-done:
		t.Fatalf("revoke finished (%v) before the commit was acknowledged", err)
	default:
	}
	if err := req.Store.Commit(context.Background(), req.Request); err != nil {
		t.Fatal(err)
	}
	h.send(&commit.Result{Request: req.Request})
	if err := <-done; err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if got := store.Offsets()[tp0]; got != 10 {
		t.Fatalf("committed %d, want 10", got)
	}
	if len(h.c.snapshot()) != 0 {
		t.Fatal("partitions still assigned after revoke")
	}
}

// TestPauseKeepsPosition: records fetched for a paused partition are not
// handed out and its position does not move; after resume they are
// fetched again.
func TestPauseKeepsPosition(t *testing.T) {
	h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest})
	h.leaders(map[offsetstore.TopicPartition]int32{tp0: 1})
	h.assign(1, newMemoryStore(1), assignedPartition{tp: tp0, start: offsetstore.Committed(5)})
	inflight := h.takeFetch(1)
	h.send(&pauseEvent{tps: []offsetstore.TopicPartition{tp0}, pause: true, done: make(chan error, 1)})
	h.answerFetch(inflight, func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 9, 0, 100) })
	if len(h.messages) != 0 || len(h.fetches) != 0 {
		t.Fatalf("paused partition: handed %v, fetching %v", h.messages, h.fetches)
	}
	if st := h.c.snapshot()[0]; !st.Paused || st.Position != 5 {
		t.Fatalf("paused status %+v, want paused at 5", st)
	}
	h.send(&pauseEvent{tps: []offsetstore.TopicPartition{tp0}, pause: false, done: make(chan error, 1)})
	if f := h.takeFetch(1); f.At(0).Position.Offset() != 5 {
		t.Fatalf("resumed at %d, want 5", f.At(0).Position.Offset())
	}
}

// TestFetchOrderRotates: partitions that brought records are asked for
// last in the next fetch, so a broker that fills its response from the
// first partitions of a request serves the others next; a partition the
// broker left out (OK, nothing) is asked again at once, without backoff.
func TestFetchOrderRotates(t *testing.T) {
	h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest})
	tps := make([]offsetstore.TopicPartition, 4)
	leaders := map[offsetstore.TopicPartition]int32{}
	var parts []assignedPartition
	for i := range tps {
		tps[i] = offsetstore.TopicPartition{Topic: "events", Partition: int32(i)}
		leaders[tps[i]] = 1
		parts = append(parts, assignedPartition{tp: tps[i], start: offsetstore.Committed(0)})
	}
	h.leaders(leaders)
	h.assign(1, newMemoryStore(1), parts...)
	order := func(f offsets.FetchRequest) []int32 {
		var out []int32
		for i := 0; i < f.Len(); i++ {
			out = append(out, f.At(i).Partition.Partition)
		}
		return out
	}
	first := h.takeFetch(1)
	if got := order(first); !slices.Equal(got, []int32{0, 1, 2, 3}) {
		t.Fatalf("first fetch asks for %v, want [0 1 2 3]", got)
	}
	// The response filled up with partitions 0 and 1; 2 and 3 were left
	// out.
	h.answerFetch(first, func(e offsets.FetchEntry) fetch.PartitionResult {
		if e.Partition.Partition < 2 {
			return records(e, 10, 0, 100)
		}
		return records(e, 0, -1, -1)
	})
	second := h.takeFetch(1)
	if got := order(second); !slices.Equal(got, []int32{2, 3, 0, 1}) {
		t.Fatalf("second fetch asks for %v, want [2 3 0 1]: the partitions left out first", got)
	}
	if second.At(2).Position.Offset() != 10 || second.At(0).Position.Offset() != 0 {
		t.Fatalf("positions %d and %d, want 10 and 0", second.At(2).Position.Offset(), second.At(0).Position.Offset())
	}
}

// TestBrokersFetchInParallel: with the default budget (64 MiB) and fetch
// sizes (50 MiB per fetch, 1 MiB per partition), a fetch reserves what it
// can return, its partitions times 1 MiB, so each of three brokers gets a
// fetch at once; reserving fetch_max_bytes would leave room for one.
func TestBrokersFetchInParallel(t *testing.T) {
	h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest,
		budget: 64 << 20, fetchMaxBytes: 50 << 20, partitionMaxBytes: 1 << 20, fetchersPerBroker: 1})
	leaders := map[offsetstore.TopicPartition]int32{}
	var parts []assignedPartition
	for i := int32(0); i < 12; i++ {
		tp := offsetstore.TopicPartition{Topic: "events", Partition: i}
		leaders[tp] = i % 3
		parts = append(parts, assignedPartition{tp: tp, start: offsetstore.Committed(0)})
	}
	h.leaders(leaders)
	h.assign(1, newMemoryStore(1), parts...)
	if len(h.fetches) != 3 {
		t.Fatalf("%d fetches in flight, want one to each of 3 brokers", len(h.fetches))
	}
	for i, f := range h.fetches {
		if f.Broker() != int32(i) || f.Len() != 4 || f.MaxBytes() != 4<<20 {
			t.Fatalf("fetch %d: broker %d, %d partitions, %d bytes; want broker %d, 4 partitions, 4 MiB", i, f.Broker(), f.Len(), f.MaxBytes(), i)
		}
	}
	if n := h.c.stats.maxFetching.Load(); n != 3 {
		t.Fatalf("MaxFetchesInFlight %d, want 3", n)
	}
}

// TestCommitFencedIsNotResent: once the group fences a commit, the
// generation commits nothing more, and a new generation starts clean.
func TestCommitFencedIsNotResent(t *testing.T) {
	h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest, commitInterval: time.Second})
	h.leaders(map[offsetstore.TopicPartition]int32{tp0: 1})
	h.assign(1, newMemoryStore(1), assignedPartition{tp: tp0, start: offsetstore.Committed(0)})
	h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 4, 0, 100) })
	h.completeAll()
	h.advance(time.Second)
	if len(h.commits) != 1 {
		t.Fatalf("%d commits, want 1", len(h.commits))
	}
	h.send(&commit.Result{Request: h.commits[0].Request, Err: offsets.ErrGenerationEnded})
	h.commits = nil
	h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 8, 0, 100) })
	h.completeAll()
	h.advance(5 * time.Second)
	if len(h.commits) != 0 {
		t.Fatalf("commit resent after the generation was fenced: %+v", h.commits[0].Request.Entries())
	}
}

// TestKeptPartitionCommitsUnderNextGeneration: a cooperative rebalance
// moves the member to a new generation while its commit under the old
// one is in flight; the group refuses that commit. A partition the member
// keeps commits what it processed under the new generation at once,
// without waiting for another record to finish (a kill of the member
// before then would make the next owner redo it all). Both orders: the
// refusal answered before and after the new generation's assignment.
func TestKeptPartitionCommitsUnderNextGeneration(t *testing.T) {
	for _, answerFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("refusal before assignment %v", answerFirst), func(t *testing.T) {
			h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest, commitInterval: time.Second})
			h.leaders(map[offsetstore.TopicPartition]int32{tp0: 1})
			h.assign(1, newMemoryStore(1), assignedPartition{tp: tp0, start: offsetstore.Committed(0)})
			h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 4, 0, 4) })
			h.completeAll()
			h.advance(time.Second)
			if len(h.commits) != 1 {
				t.Fatalf("%d commits, want 1", len(h.commits))
			}
			fenced := h.commits[0]
			h.commits = nil
			if answerFirst {
				h.send(&commit.Result{Request: fenced.Request, Err: offsets.ErrGenerationEnded})
			}
			h.assign(2, newMemoryStore(2), assignedPartition{tp: tp0, start: offsetstore.Committed(0)})
			if !answerFirst {
				h.send(&commit.Result{Request: fenced.Request, Err: offsets.ErrGenerationEnded})
			}
			h.advance(time.Second)
			if len(h.commits) != 1 {
				t.Fatalf("%d commits after the cooperative rebalance, want the kept partition's progress committed once", len(h.commits))
			}
			req := h.commits[0].Request
			if req.Generation() != 2 || req.Len() != 1 || req.At(0).Offset != 4 {
				t.Fatalf("commit under generation %d of %+v, want offset 4 under generation 2", req.Generation(), req.Entries())
			}
		})
	}
}

// TestCoordinatorLoop runs the coordinator on its goroutine: events in,
// messages for processing out, and it stops with its context.
func TestCoordinatorLoop(t *testing.T) {
	fetches := make(chan offsets.FetchRequest, 1)
	c := newCoordinator(coordinatorConfig{policy: offsetstore.ResetEarliest}, coordinatorOutputs{
		fetch:   func(b offsets.FetchRequest) { fetches <- b },
		resolve: func(offsets.ResolveRequest) {},
	}, nil, nil, time.Now())
	toProcess := make(chan process.Message)
	loop := newCoordinatorLoop(c, toProcess, nil, 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { loop.run(ctx); close(stopped) }()

	loop.send(ctx, leadersEvent{&fetch.Leaders{Leaders: map[offsetstore.TopicPartition]int32{tp0: 1}}})
	loop.send(ctx, &assignEvent{gen: 1, store: newMemoryStore(1), partitions: []assignedPartition{{tp: tp0, start: offsetstore.Committed(0)}}})
	f := <-fetches
	res := &fetch.Result{Request: f, Partitions: []fetch.PartitionResult{records(f.At(0), 3, 0, 3)}}
	loop.send(ctx, fetchedEvent{res})
	m := <-toProcess
	if len(m.Batches) != 1 || m.Batches[0].Span() != (offsets.Span{Start: 0, End: 3}) {
		t.Fatalf("processing got %+v", m)
	}
	st := make(chan []PartitionStatus, 1)
	loop.send(ctx, &statsEvent{done: st})
	if s := <-st; len(s) != 1 || s[0].Position != 3 || s[0].BufferedBytes != 3 {
		t.Fatalf("status %+v", s)
	}
	cancel()
	<-stopped
	if loop.send(context.Background(), tickEvent{}) {
		t.Fatal("send succeeded after the loop stopped")
	}
}

// TestSecondRevokeOfAGenerationDrainsAndCommits: a revoke of some
// partitions, then a revoke of the rest in the same generation (a
// shutdown during a cooperative rebalance): the second one drains and
// commits too, for both guarantees.
func TestSecondRevokeOfAGenerationDrainsAndCommits(t *testing.T) {
	tp1 := offsetstore.TopicPartition{Topic: "events", Partition: 1}
	for _, transactional := range []bool{false, true} {
		t.Run(fmt.Sprintf("transactional=%v", transactional), func(t *testing.T) {
			h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest, transactional: transactional})
			store := h.assignTwoFetched(tp1, 10)
			answer := func(what string) {
				t.Helper()
				if len(h.commits) != 1 {
					t.Fatalf("%s: %d commits in flight, want 1", what, len(h.commits))
				}
				req := h.commits[0]
				h.commits = nil
				if err := req.Store.Commit(context.Background(), req.Request); err != nil {
					t.Fatal(err)
				}
				h.send(&commit.Result{Request: req.Request})
			}
			first := make(chan error, 1)
			h.send(&revokeEvent{gen: 3, partitions: []offsetstore.TopicPartition{tp1}, drainBy: h.now.Add(time.Minute),
				deadline: h.now.Add(2 * time.Minute), done: first})
			// tp1's next fetch comes back: nothing is fetched for it any more
			h.answerFetch(h.takeFetch(2), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 20, 0, 100) })
			h.completeAll()
			answer("first revoke")
			if err := <-first; err != nil {
				t.Fatalf("first revoke: %v", err)
			}
			// tp0 goes on: its next records are in processing
			h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 20, 0, 100) })
			second := make(chan error, 1)
			h.send(&revokeEvent{gen: 3, drainBy: h.now.Add(time.Minute), deadline: h.now.Add(2 * time.Minute), done: second})
			select {
			case err := <-second:
				t.Fatalf("second revoke finished (%v) while a batch is being processed", err)
			default:
			}
			h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 30, 0, 100) })
			h.completeAll()
			answer("second revoke")
			if err := <-second; err != nil {
				t.Fatalf("second revoke: %v", err)
			}
			if got := store.Offsets(); got[tp0] != 20 || got[tp1] != 10 {
				t.Fatalf("committed %v, want %s at 20 and %s at 10", got, tp0, tp1)
			}
		})
	}
}

// TestTransactionalRevokeLetsProcessingFinish: under transactions a
// revoke does not fence the processing of its partitions: with key
// ordering a fence would drop a batch's queued key groups while a later
// key group already wrote its outputs into the transaction, and the
// final commit would commit those outputs with an offset below them. The
// batch finishes, and the final commit covers it.
func TestTransactionalRevokeLetsProcessingFinish(t *testing.T) {
	h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest, transactional: true})
	h.leaders(map[offsetstore.TopicPartition]int32{tp0: 1})
	store := newMemoryStore(3)
	h.assign(3, store, assignedPartition{tp: tp0, start: offsetstore.Committed(0)})
	h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 10, 0, 100) })
	done := make(chan error, 1)
	h.send(&revokeEvent{gen: 3, drainBy: h.now.Add(time.Minute), deadline: h.now.Add(2 * time.Minute), done: done})
	for _, m := range h.messages {
		if len(m.Fences) > 0 {
			t.Fatalf("a transactional revoke fenced processing: %+v", m.Fences)
		}
	}
	h.completeAll()
	if len(h.commits) != 1 {
		t.Fatalf("%d commits after the drain, want 1", len(h.commits))
	}
	req := h.commits[0]
	if req.Request.Len() != 1 || req.Request.At(0).Offset != 10 {
		t.Fatalf("final commit %+v, want %s at 10", req.Request.Entries(), tp0)
	}
	if err := req.Store.Commit(context.Background(), req.Request); err != nil {
		t.Fatal(err)
	}
	h.send(&commit.Result{Request: req.Request})
	if err := <-done; err != nil {
		t.Fatalf("revoke: %v", err)
	}
}

// TestTransactionalFailureBeforeSeekAborts: under transactions a record
// that fails in a batch handed out before a seek does not stop the
// partition, but aborts the transaction: later records of the batch may
// have written outputs, and a commit before the seek is applied would
// commit them with an offset below them.
func TestTransactionalFailureBeforeSeekAborts(t *testing.T) {
	h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest, transactional: true})
	h.leaders(map[offsetstore.TopicPartition]int32{tp0: 1})
	h.assign(3, newMemoryStore(3), assignedPartition{tp: tp0, start: offsetstore.Committed(0)})
	h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 10, 0, 100) })
	if len(h.messages) != 1 || len(h.messages[0].Batches) != 1 {
		t.Fatalf("handed out %+v, want one batch", h.messages)
	}
	batch := h.messages[0].Batches[0]
	h.messages = nil
	seeked := make(chan error, 1)
	h.send(&seekEvent{tp: tp0, req: offsetstore.Earliest(), done: seeked})
	if err := <-seeked; err != nil {
		t.Fatal(err)
	}
	// the seek's lookup is still in flight when the batch fails at 4
	h.send(&process.Report{Completions: []process.Completion{{Batch: batch, FinishedBelow: 4, Err: errors.New("record 4 failed")}}})
	h.send(&flushEvent{done: make(chan error, 1)})
	if len(h.commits) != 1 || !h.commits[0].Abort {
		var got []string
		for _, j := range h.commits {
			got = append(got, fmt.Sprintf("abort=%v %v", j.Abort, j.Request.Entries()))
		}
		t.Fatalf("commit step got %v, want the transaction's abort", got)
	}
	if h.c.byTP(tp0).state == Stopped {
		t.Fatal("a failure of a batch handed out before a seek stopped the partition")
	}
}

// TestTransactionalHeldBatchesGoOutInOrder: under transactions batches
// fetched while a revoke holds processing are handed out, when the
// revoke ends, before those fetched after: a later batch must not
// overtake a held one (its outputs would be committed with an offset
// below them).
func TestTransactionalHeldBatchesGoOutInOrder(t *testing.T) {
	tp1 := offsetstore.TopicPartition{Topic: "events", Partition: 1}
	h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest, transactional: true})
	h.assignTwoFetched(tp1, 5)
	h.completeAll()
	// revoke tp1: its final commit (the transaction's) goes out and
	// holds processing until it is answered
	done := make(chan error, 1)
	h.send(&revokeEvent{gen: 3, partitions: []offsetstore.TopicPartition{tp1}, drainBy: h.now.Add(time.Minute),
		deadline: h.now.Add(2 * time.Minute), done: done})
	h.answerFetch(h.takeFetch(2), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 5, 0, 100) })
	if len(h.commits) != 1 {
		t.Fatalf("%d commits in flight, want the revoke's", len(h.commits))
	}
	h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 8, 0, 100) }) // held
	req := h.commits[0]
	h.commits = nil
	if err := req.Store.Commit(context.Background(), req.Request); err != nil {
		t.Fatal(err)
	}
	h.send(&commit.Result{Request: req.Request})
	if err := <-done; err != nil {
		t.Fatalf("revoke: %v", err)
	}
	h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 10, 0, 100) })
	var spans []offsets.Span
	for _, m := range h.messages {
		for _, b := range m.Batches {
			spans = append(spans, b.Span())
		}
	}
	if want := []offsets.Span{{Start: 5, End: 8}, {Start: 8, End: 10}}; !slices.Equal(spans, want) {
		t.Fatalf("handed out %v, want %v", spans, want)
	}
}

// TestTransactionalLossOfEveryPartitionAborts: the member loses every
// partition (its session ended) while records it processed have their
// outputs in the open transaction. The generation ends with no store to
// abort with, but the transaction must still be aborted before anything
// else is committed: the next generation's first commit would otherwise
// commit those outputs too, while the records are processed again from
// the committed offsets (by this member or another), and their outputs
// would be committed twice.
func TestTransactionalLossOfEveryPartitionAborts(t *testing.T) {
	h := newCoordHarness(t, coordinatorConfig{policy: offsetstore.ResetEarliest, transactional: true, commitInterval: time.Minute})
	h.leaders(map[offsetstore.TopicPartition]int32{tp0: 1})
	h.assign(3, newMemoryStore(3), assignedPartition{tp: tp0, start: offsetstore.Committed(0)})
	h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 10, 0, 100) })
	h.completeAll()
	// the generation's first commit goes out at once: records 0-9 commit
	if len(h.commits) != 1 {
		t.Fatalf("%d commits, want the generation's first", len(h.commits))
	}
	h.send(&commit.Result{Request: h.commits[0].Request})
	h.commits = nil
	h.answerFetch(h.takeFetch(1), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 20, 0, 100) })
	h.completeAll() // the outputs of 10-19 are in the open transaction
	if len(h.commits) != 0 {
		t.Fatalf("%d commits before the loss, want none (the commit interval has not passed)", len(h.commits))
	}
	lost := make(chan error, 1)
	h.send(&revokeEvent{gen: 3, lost: true, drainBy: h.now, deadline: h.now, done: lost})
	<-lost
	h.assign(4, newMemoryStore(4), assignedPartition{tp: tp0, start: offsetstore.Committed(10)})
	for range 3 {
		for _, f := range h.fetches {
			h.answerFetch(f, func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, 20, 0, 100) })
		}
		h.fetches = nil
		h.completeAll()
		h.advance(time.Minute)
		if len(h.commits) > 0 {
			break
		}
	}
	if len(h.commits) == 0 {
		t.Fatal("nothing sent to the commit step after the new generation")
	}
	if first := h.commits[0]; !first.Abort {
		t.Fatalf("the first job after the loss commits %v; want the abort of the transaction holding the lost records' outputs first",
			first.Request.Entries())
	}
}

// assignTwoFetched assigns tp0 (led by broker 1) and tp1 (broker 2) in
// generation 3 from committed offset 0, and answers each broker's first
// fetch with n records; it returns the generation's store.
func (h *coordHarness) assignTwoFetched(tp1 offsetstore.TopicPartition, n int64) *memoryStore {
	h.t.Helper()
	h.leaders(map[offsetstore.TopicPartition]int32{tp0: 1, tp1: 2})
	store := newMemoryStore(3)
	h.assign(3, store, assignedPartition{tp: tp0, start: offsetstore.Committed(0)},
		assignedPartition{tp: tp1, start: offsetstore.Committed(0)})
	for _, broker := range []int32{1, 2} {
		h.answerFetch(h.takeFetch(broker), func(e offsets.FetchEntry) fetch.PartitionResult { return records(e, n, 0, 100) })
	}
	return store
}
