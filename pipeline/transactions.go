package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/group"
	"github.com/fencepost-dev/fencepost/internal/produce"
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
	err := s.prod.Abort(ctx)
	if err != nil && ctx.Err() != nil && !failedForGood(err) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txnRetryTimeout)
		err = s.prod.Abort(rctx)
		cancel()
	}
	if errors.Is(err, produce.ErrProducerFenced) {
		// fenced by an epoch bump: the broker aborted a transaction that
		// outlived transaction_timeout (then the producer takes its id
		// back), or another instance took the transactional id (then it
		// cannot, and this one must stop)
		if rerr := s.prod.Recover(ctx); rerr != nil {
			err = fmt.Errorf("%w; taking the transactional id back failed: %w", err, rerr)
		} else {
			err = nil
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
// current epoch: fenced (which Recover may undo), or fatal.
func failedForGood(err error) bool {
	return errors.Is(err, produce.ErrProducerFenced) || isFatal(err)
}

// isFatal reports whether err ends the transactional producer for good:
// no retry, abort or recovery helps (permissions, an unsupported broker).
func isFatal(err error) bool {
	var fatal *produce.FatalError
	return errors.As(err, &fatal)
}
