package produce

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/stages"
)

// hookRecorder is a Config.OnTxnFailed that keeps what it was told, and
// fails the test if it is called concurrently with itself or with the
// producer's lock held.
type hookRecorder struct {
	t    *testing.T
	p    *Producer
	mu   sync.Mutex
	errs []error
	busy bool
}

func (h *hookRecorder) hook(err error) {
	h.mu.Lock()
	if h.busy {
		h.t.Error("OnTxnFailed called concurrently with itself")
	}
	h.busy = true
	h.mu.Unlock()
	// the producer's lock is free: this would deadlock otherwise
	if h.p != nil {
		h.p.identity()
	}
	h.mu.Lock()
	h.errs = append(h.errs, err)
	h.busy = false
	h.mu.Unlock()
}

func (h *hookRecorder) got() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.errs)
}

// newHooked returns a transactional producer whose OnTxnFailed is
// recorded.
func newHooked(t *testing.T, c *kafkatest.Cluster, cfg Config) (*Producer, *hookRecorder) {
	h := &hookRecorder{t: t}
	cfg.OnTxnFailed = h.hook
	h.p = New(newWire(t, c.Addrs), cfg)
	return h.p, h
}

// TestOnTxnFailedAbortable: the hook is told once when a failed Produce
// makes the transaction abortable (not again for later calls that meet
// the failure), and again when the next transaction fails; the Produce
// error is marked stages.Unavailable and still an *AbortableError
// wrapping the broker's error.
func TestOnTxnFailedAbortable(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 2)
	ctx := context.Background()
	p, hook := newHooked(t, c, Config{TransactionalID: "tx-hook", MaxAttempts: 2, RetryBackoff: 5 * time.Millisecond})
	if err := p.ForTopic("out").Produce(ctx, numbered("early", 1)); !errors.Is(err, ErrNotInTransaction) || !stages.IsUnavailable(err) {
		t.Fatalf("produce before Begin: %v, want ErrNotInTransaction marked unavailable", err)
	}
	for round := 1; round <= 2; round++ {
		if err := p.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		h := c.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Err: kerr.NotEnoughReplicas, Count: -1})
		err := p.ForTopic("out").Produce(ctx, numbered("x", 10))
		h.Remove()
		var ab *AbortableError
		if !stages.IsUnavailable(err) || !errors.As(err, &ab) || !errors.Is(err, kafka.NotEnoughReplicas) {
			t.Fatalf("round %d: failed produce: %v, want an unavailable AbortableError wrapping NOT_ENOUGH_REPLICAS", round, err)
		}
		if stages.IsPermanent(err) {
			t.Fatalf("round %d: %v is permanent: the chain would dead-letter for it", round, err)
		}
		// a later call meets the failure: the same error, no new hook call
		if err := p.ForTopic("out").Produce(ctx, numbered("y", 1)); !errors.As(err, &ab) || !stages.IsUnavailable(err) {
			t.Fatalf("round %d: produce in an abortable transaction: %v, want the AbortableError marked unavailable", round, err)
		}
		if err := p.Commit(ctx); !errors.As(err, &ab) {
			t.Fatalf("round %d: commit: %v, want the AbortableError", round, err)
		}
		got := hook.got()
		if len(got) != round {
			t.Fatalf("round %d: the hook was called %d times (%v), want %d", round, len(got), got, round)
		}
		if !errors.As(got[round-1], &ab) || !errors.Is(got[round-1], kafka.NotEnoughReplicas) {
			t.Fatalf("round %d: hook told %v, want the AbortableError", round, got[round-1])
		}
		if err := p.Abort(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOnTxnFailedFenced: a second producer with the same transactional
// id fences the first. The zombie's next Produce fails (kfake answers
// INVALID_TXN_STATE: abortable, as a stale producer epoch may be a timeout) and
// its Abort learns it is fenced: the hook is told both, in order, and
// nothing more after the producer failed for good.
func TestOnTxnFailedFenced(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	p1, hook := newHooked(t, c, Config{TransactionalID: "tx-hook-fence"})
	if err := p1.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p1.ForTopic("out").Produce(ctx, numbered("a", 1)); err != nil {
		t.Fatal(err)
	}
	p2 := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-hook-fence"})
	if err := p2.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	err := p1.ForTopic("out").Produce(ctx, numbered("b", 1))
	if !stages.IsUnavailable(err) {
		t.Fatalf("zombie produce: %v, want it marked unavailable", err)
	}
	if err := p1.Abort(ctx); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("zombie abort: %v, want ErrProducerFenced", err)
	}
	if err := p1.ForTopic("out").Produce(ctx, numbered("c", 1)); !errors.Is(err, ErrProducerFenced) || !stages.IsUnavailable(err) {
		t.Fatalf("produce of a fenced producer: %v, want ErrProducerFenced marked unavailable", err)
	}
	if err := p1.Begin(ctx); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("zombie begin: %v, want ErrProducerFenced", err)
	}
	got := hook.got()
	var ab *AbortableError
	if len(got) != 2 || !errors.As(got[0], &ab) || !errors.Is(got[1], ErrProducerFenced) {
		t.Fatalf("hook told %v, want the AbortableError, then ErrProducerFenced", got)
	}
}

// TestOnTxnFailedFencedCommit: a zombie's Commit fails fenced; the hook
// is told once, with ErrProducerFenced.
func TestOnTxnFailedFencedCommit(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	p1, hook := newHooked(t, c, Config{TransactionalID: "tx-hook-commit"})
	if err := p1.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p1.ForTopic("out").Produce(ctx, numbered("zombie", 3)); err != nil {
		t.Fatal(err)
	}
	p2 := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-hook-commit"})
	if err := p2.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p1.Commit(ctx); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("zombie commit: %v, want ErrProducerFenced", err)
	}
	if got := hook.got(); len(got) != 1 || !errors.Is(got[0], ErrProducerFenced) {
		t.Fatalf("hook told %v, want ErrProducerFenced once", got)
	}
}

// TestOnTxnFailedNeverConcurrent: many calls failing at once tell the
// hook once, never concurrently (the recorder fails the test if it is
// entered twice at once, or called with the lock held).
func TestOnTxnFailedNeverConcurrent(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 8)
	ctx := context.Background()
	p, hook := newHooked(t, c, Config{TransactionalID: "tx-hook-conc", MaxAttempts: 1})
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	h := c.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Err: kerr.NotEnoughReplicas, Count: -1})
	defer h.Remove()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs := numbered("c", 1)
			recs[0].Key = []byte{byte(i)}
			if err := p.ForTopic("out").Produce(ctx, recs); !stages.IsUnavailable(err) {
				t.Errorf("produce: %v, want an error marked unavailable", err)
			}
		}()
	}
	wg.Wait()
	if got := hook.got(); len(got) != 1 {
		t.Fatalf("hook told %d times (%v), want once", len(got), got)
	}
}

// TestFailureBeforeWriteKeepsTransaction: a Produce that fails with
// nothing of it written (refused before sending, or refused outright by
// the broker) returns its error as the idempotent producer would, does
// not tell the hook, and the transaction commits the other calls'
// records. A call partly written fails the transaction.
func TestFailureBeforeWriteKeepsTransaction(t *testing.T) {
	c := kafkatest.New(t, 1)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	big := stages.Record{Key: []byte("big"), Value: make([]byte, 5000)}
	tests := []struct {
		name  string
		topic string // of the failing call
		ctx   context.Context
		recs  []stages.Record
		fault *kfake.Fault
		// check is what the failing call's error must be
		check func(error) bool
		// abortable: the call was partly written, the transaction fails
		abortable bool
	}{
		{name: "one record too large refuses the whole call", recs: append(numbered("bad", 5), big),
			check: func(err error) bool {
				var tl *RecordTooLargeError
				return stages.IsPermanent(err) && errors.As(err, &tl) && tl.Limit == 4096
			}},
		{name: "ctx done before sending", ctx: canceled, recs: numbered("bad", 5),
			check: func(err error) bool { return errors.Is(err, context.Canceled) }},
		{name: "topic does not exist", topic: "missing", recs: numbered("bad", 5),
			check: func(err error) bool { var se *SinkError; return errors.As(err, &se) && stages.IsUnavailable(err) }},
		{name: "the broker refuses the only batch (MESSAGE_TOO_LARGE)", recs: numbered("bad", 5),
			fault: &kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.MessageTooLarge, Count: 1},
			check: func(err error) bool { return stages.IsPermanent(err) && errors.Is(err, kafka.MessageSizeTooLarge) }},
		{name: "the broker refuses one partition's batch, another is written", topic: "two", recs: numbered("bad", 10),
			fault:     &kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Partitions: []int32{1}, Err: kerr.MessageTooLarge, Count: -1},
			abortable: true,
			check:     func(err error) bool { var ab *AbortableError; return errors.As(err, &ab) && stages.IsUnavailable(err) }},
	}
	c.CreateTopic(t, "two", 2)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := "keep-" + string(rune('a'+i))
			c.CreateTopic(t, out, 1)
			topic := tt.topic
			if topic == "" {
				topic = out
			}
			ctx := context.Background()
			p, hook := newHooked(t, c, Config{TransactionalID: "tx-" + out, MaxAttempts: 2, RetryBackoff: 5 * time.Millisecond, MaxBatchBytes: 4096})
			if err := p.Begin(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.ForTopic(out).Produce(ctx, numbered("before", 5)); err != nil {
				t.Fatal(err)
			}
			if tt.fault != nil {
				f := *tt.fault
				f.Topic = topic
				h := c.Cluster.Fault(f)
				defer h.Remove()
			}
			err := p.ForTopic(topic).Produce(cmpCtx(tt.ctx), tt.recs)
			if err == nil || !tt.check(err) {
				t.Fatalf("failing call: %v", err)
			}
			if tt.abortable {
				if got := hook.got(); len(got) != 1 {
					t.Fatalf("hook told %v, want the abortable error once", got)
				}
				var ab *AbortableError
				if err := p.Commit(ctx); !errors.As(err, &ab) {
					t.Fatalf("commit after a partly written call: %v, want the AbortableError", err)
				}
				return
			}
			var ab *AbortableError
			if errors.As(err, &ab) {
				t.Fatalf("%v is abortable: nothing was written, the transaction is not over", err)
			}
			if err := p.ForTopic(out).Produce(ctx, numbered("after", 5)); err != nil {
				t.Fatalf("produce after the failed call: %v, want the transaction still open", err)
			}
			if err := p.Commit(ctx); err != nil {
				t.Fatalf("commit: %v, want the transaction to commit", err)
			}
			if got := hook.got(); len(got) != 0 {
				t.Fatalf("hook told %v, want nothing", got)
			}
			// One partition: the failed call's records would be read
			// before the last "after" one, committed or not.
			want := slices.Concat(wantValues("before", 5), wantValues("after", 5))
			slices.Sort(want)
			for _, committed := range []bool{true, false} {
				if got := values(consume(t, c.Addrs, out, 10, committed)); !slices.Equal(got, want) {
					t.Fatalf("read (committed %v) %v, want %v", committed, got, want)
				}
			}
		})
	}
}

func cmpCtx(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// TestOnTxnFailedHookMayCallProducer: a hook that calls the producer,
// and fails it again from there (the zombie's Abort learns it is
// fenced), neither deadlocks nor runs twice at once: the second failure
// is told after the hook call under way returns, in order.
func TestOnTxnFailedHookMayCallProducer(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	var (
		mu     sync.Mutex
		told   []error
		depth  int
		nested bool
		p1     *Producer
	)
	p1 = New(newWire(t, c.Addrs), Config{TransactionalID: "tx-hook-reenter", OnTxnFailed: func(err error) {
		mu.Lock()
		depth++
		nested = nested || depth > 1
		told = append(told, err)
		first := len(told) == 1
		mu.Unlock()
		if first {
			_ = p1.Abort(ctx) // fenced: fails the producer for good, from inside the hook
		}
		mu.Lock()
		depth--
		mu.Unlock()
	}})
	if err := p1.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p1.ForTopic("out").Produce(ctx, numbered("a", 1)); err != nil {
		t.Fatal(err)
	}
	p2 := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-hook-reenter"})
	if err := p2.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p1.ForTopic("out").Produce(ctx, numbered("b", 1)) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("zombie produce succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Produce did not return: the hook calling the producer deadlocked")
	}
	mu.Lock()
	defer mu.Unlock()
	var ab *AbortableError
	if nested || len(told) != 2 || !errors.As(told[0], &ab) || !errors.Is(told[1], ErrProducerFenced) {
		t.Fatalf("hook told %v (nested %v), want the AbortableError then ErrProducerFenced, one at a time", told, nested)
	}
}

// TestMixedFailureIsNotPermanent: a call one partition of which the
// broker refuses for good while another fails transiently is not
// permanent as a whole (retrying may write the other partition's
// records), though the refusal is still found in it.
func TestMixedFailureIsNotPermanent(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "mixed", 2)
	h := c.Cluster.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "mixed", Partitions: []int32{0}, Err: kerr.MessageTooLarge, Count: -1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "mixed", Partitions: []int32{1}, Err: kerr.NotEnoughReplicas, Count: -1},
	)
	defer h.Remove()
	p := New(newWire(t, c.Addrs), Config{MaxAttempts: 2, RetryBackoff: 5 * time.Millisecond})
	err := p.ForTopic("mixed").Produce(context.Background(), numbered("m", 10))
	if err == nil || stages.IsPermanent(err) {
		t.Fatalf("mixed failure: %v (permanent %v), want an error that is not permanent", err, stages.IsPermanent(err))
	}
	if !errors.Is(err, kafka.MessageSizeTooLarge) || !errors.Is(err, kafka.NotEnoughReplicas) {
		t.Fatalf("mixed failure: %v, want both partitions' errors in it", err)
	}
}
