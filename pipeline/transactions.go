package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	kafka "github.com/segmentio/kafka-go"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/group"
	"github.com/fencepost-dev/fencepost/internal/produce"
	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// txnStore commits a generation's offsets in the pipeline's transactions
// (guarantee exactly_once, KIP-447): the open transaction holds every
// output written since the last commit; Commit adds the offsets to it,
// commits it and opens the next. It implements offsets.TransactionStore.
type txnStore struct {
	prod  *produce.Producer
	gm    *group.Member
	group string
	gen   offsets.Generation
	// fencing tells a producer fenced by another process from one whose
	// producer epoch the broker bumped (nil: every fencing is recovered
	// from)
	fencing *fencingRule
	// state, if not nil, applies the stores' staged changes when a
	// transaction commits and drops them when it aborts.
	state *state.Manager
}

// Commit implements offsets.TransactionStore.
func (s *txnStore) Commit(ctx context.Context, b offsets.CommitRequest) error {
	if b.Generation() != s.gen {
		return fmt.Errorf("%w: request of generation %d, store of generation %d", offsets.ErrStaleGeneration, b.Generation(), s.gen)
	}
	tps := make([]offsetstore.TopicPartition, b.Len())
	offs := make([]produce.Offset, b.Len())
	for i := range b.Len() {
		e := b.At(i)
		tps[i] = e.Partition
		offs[i] = produce.Offset{Topic: e.Partition.Topic, Partition: e.Partition.Partition, Offset: e.Offset, LeaderEpoch: e.LeaderEpoch}
	}
	// The member's current generation: a cooperative rebalance may have
	// moved it on since this store's, and a partition it still owns is
	// still its to commit (the coordinator learns of the new generation
	// a moment later). One it lost fails here, and the transaction aborts.
	gen, memberID, instanceID, err := s.gm.Identity(tps)
	if err == nil {
		member := produce.GroupMember{Group: s.group, Generation: gen, MemberID: memberID, InstanceID: instanceID}
		err = s.prod.SendOffsets(ctx, member, offs)
	}
	if err != nil && errors.Is(err, kafka.FencedInstanceID) && s.fencing != nil {
		// the group refused the offsets: another member holds our
		// group_instance_id, unless our own member rejoined since
		// (then its member id changed, and this is a stale commit)
		if _, nowID, _, ierr := s.gm.Identity(nil); ierr == nil && nowID == memberID {
			// (not aborting: the abort's re-initialization would fence
			// the other process; its own InitProducerID aborted this
			// transaction, or its next one will)
			return fmt.Errorf("%w: %w", offsets.ErrTransactionFailed, s.fencing.duplicate("the group coordinator answered FENCED_INSTANCE_ID to the transaction's offsets", err))
		}
	}
	if err == nil {
		err = s.prod.Commit(ctx)
		if err != nil && ctx.Err() != nil {
			// the outcome is unknown: ask once more, briefly
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txnRetryTimeout)
			err = s.prod.Commit(rctx)
			cancel()
			if err != nil && rctx.Err() != nil {
				return fmt.Errorf("%w: committing the transaction: its outcome is unknown: %w", offsets.ErrTransactionFailed, err)
			}
		}
	}
	if err == nil {
		if s.state != nil {
			// the changes are committed in the changelog; a failure
			// to apply them locally leaves the stores behind it, and
			// they restore again
			_ = s.state.Committed()
		}
		return s.begin(ctx)
	}
	if isFatal(err) {
		return fmt.Errorf("%w: %w", offsets.ErrTransactionFailed, err)
	}
	if aerr := s.Abort(ctx); aerr != nil {
		return fmt.Errorf("%w (after %v)", aerr, err)
	}
	return fmt.Errorf("%w: %w", offsets.ErrTransactionAborted, err)
}

// Abort implements offsets.TransactionStore.
func (s *txnStore) Abort(ctx context.Context) error {
	if s.state != nil {
		s.state.Aborted()
	}
	err := s.prod.Abort(ctx)
	if err != nil && ctx.Err() != nil && !failedForGood(err) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txnRetryTimeout)
		err = s.prod.Abort(rctx)
		cancel()
	}
	fenced := errors.Is(err, produce.ErrProducerFenced)
	if s.fencing != nil && (err == nil || fenced) {
		// a producer epoch bump by someone else: this fencing, or one the
		// abort's re-initialization met and took the id back from already
		n := s.fencing.unseen(s.prod.ProducerEpochJumps())
		if fenced {
			n++
		}
		if ferr := s.fencing.note(n, time.Now()); ferr != nil {
			// (not taking the id back: that would fence the other
			// process again)
			return fmt.Errorf("%w: %w", offsets.ErrTransactionFailed, ferr)
		}
	}
	if fenced {
		// fenced by a producer epoch bump: the broker aborted a
		// transaction that outlived transaction_timeout (then the
		// producer takes its id back), or another instance took the
		// transactional id (then it must stop: see fencingRule)
		if rerr := s.prod.Recover(ctx); rerr != nil {
			err = fmt.Errorf("%w; taking the transactional id back failed: %w", err, rerr)
			if errors.Is(rerr, produce.ErrProducerFenced) && s.fencing != nil {
				// the coordinator refused: another producer holds the id
				err = s.fencing.duplicate("the transaction coordinator refused to give the transactional id back", err)
			}
		} else {
			err = nil
			if s.fencing != nil {
				s.fencing.unseen(s.prod.ProducerEpochJumps()) // the bump noted above
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%w: aborting the transaction: %w", offsets.ErrTransactionFailed, err)
	}
	return s.begin(ctx)
}

// begin opens the next transaction (no request: the producer is
// initialized already).
func (s *txnStore) begin(ctx context.Context) error {
	if err := s.prod.Begin(ctx); err != nil {
		return fmt.Errorf("%w: opening the next transaction: %w", offsets.ErrTransactionFailed, err)
	}
	return nil
}

// txnRetryTimeout bounds the second attempt of an EndTxn whose first
// attempt's context ended.
const txnRetryTimeout = 5 * time.Second

// failedForGood reports whether err ends the transactional producer's
// current producer epoch: fenced (which Recover may undo), or fatal.
func failedForGood(err error) bool {
	return errors.Is(err, produce.ErrProducerFenced) || isFatal(err)
}

// isFatal reports whether err ends the transactional producer for good:
// no retry, abort or recovery helps (permissions, an unsupported broker).
func isFatal(err error) bool {
	var fatal *produce.FatalError
	return errors.As(err, &fatal)
}

// ErrDuplicateInstance is why a run stops when another process uses its
// transactional id: two instances with the same group_instance_id.
var ErrDuplicateInstance = errors.New("another process uses this instance's transactional id")

// fencingRule tells the two causes of a fenced transactional producer
// apart, for exactly_once. Both reach the producer the same way (its next
// request is answered PRODUCER_FENCED or INVALID_PRODUCER_EPOCH, and its
// producer epoch is one higher when it takes the id back), so the wire
// alone does not say which it was:
//
//   - the broker bumped the producer epoch itself (KIP-360/KIP-588): it
//     aborted a transaction that outlived transaction_timeout, or a
//     restart aborted open transactions. The producer takes its id back
//     and the run goes on from the committed offsets.
//   - another process initialized the same transactional id (two
//     instances with the same group_instance_id). Taking the id back
//     fences that process, which takes it back in turn: the two fence each
//     other until one stops. This one must stop.
//
// The rule: the group's answer FENCED_INSTANCE_ID to the transaction's
// offsets (another member registered our group_instance_id) stops the run
// at once, as does the coordinator refusing to give the id back; and so
// does the third producer epoch bump by someone else within half of
// transaction_timeout. The broker times out a transaction only after it
// was open for transaction_timeout, and every recovery opens a new one,
// so within half of it at most one bump is a timeout; a second may be a
// broker restart; a third is another process.
type fencingRule struct {
	txnID, instanceID string
	window            time.Duration
	limit             int

	mu    sync.Mutex
	seen  int64       // the producer's ProducerEpochJumps counted so far
	times []time.Time // when each counted jump was seen, the last limit
}

// fencingLimit is how many producer epoch bumps within fencingRule.window
// stop the run.
const fencingLimit = 3

func newFencingRule(cfg Config, txnID string) *fencingRule {
	return &fencingRule{txnID: txnID, instanceID: cfg.Consumer.GroupInstanceID,
		window: cfg.TransactionTimeout / 2, limit: fencingLimit}
}

// unseen returns how many of the producer's producer epoch bumps by
// others (see produce.Producer.ProducerEpochJumps) it was not told of
// yet, and marks them told.
func (f *fencingRule) unseen(jumps int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := int(max(jumps-f.seen, 0))
	f.seen = max(f.seen, jumps)
	return n
}

// note records n fencings at now, and returns the run's error when the
// rule says another process holds the transactional id.
func (f *fencingRule) note(n int, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.times = append(f.times, now)
	}
	if len(f.times) > f.limit {
		f.times = f.times[len(f.times)-f.limit:]
	}
	if n == 0 || len(f.times) < f.limit || now.Sub(f.times[0]) > f.window {
		return nil
	}
	return f.duplicate(fmt.Sprintf("its producer was fenced %d times within %v, less than half of transaction_timeout "+
		"(the broker's own abort of a transaction that outlived transaction_timeout fences it at most once in that time)",
		len(f.times), now.Sub(f.times[0]).Round(time.Millisecond)), nil)
}

// duplicate is the run's error when another process holds the
// transactional id: why it is known (and the error that told), and what
// to check.
func (f *fencingRule) duplicate(why string, cause error) error {
	var msg string
	if f.instanceID != "" {
		msg = fmt.Sprintf("%s: two processes run with consumer.group_instance_id %q (transactional id %q); "+
			"give every instance its own group_instance_id", why, f.instanceID, f.txnID)
	} else {
		msg = fmt.Sprintf("%s: another process initialized transactional id %q", why, f.txnID)
	}
	if cause != nil {
		return fmt.Errorf("%w: %s: %w", ErrDuplicateInstance, msg, cause)
	}
	return fmt.Errorf("%w: %s", ErrDuplicateInstance, msg)
}
