package pipeline

// Transactions (guarantee exactly_once): the outputs of the records
// processed since the last commit are in one open transaction, which the
// commit step commits with their offsets (offsets.TransactionStore). The
// coordinator keeps that exact:
//
//   - A commit is a barrier. Once one is due, no batch is handed to
//     processing (fetched batches are held), and the commit is sent only
//     when nothing is in processing: every output in the transaction then
//     belongs to a record below the committed offsets, and every record
//     below them has its outputs in it or in an earlier one. Processing
//     resumes when the commit is answered.
//   - An abort is a reset. Every partition goes back to where the
//     transaction began for it (its committed offset) with a new epoch
//     (reason transaction_aborted); its processing is fenced and the
//     running units are cancelled; when nothing is in processing the
//     commit step aborts the transaction (and opens the next) and
//     processing resumes from those offsets. A commit the store could not
//     complete aborts the same way (the store aborted it already).
//   - A partition that stops on a failed record aborts the transaction:
//     later records of its batch may have written outputs. It stays
//     stopped at the offset where its transaction began. A record that
//     fails in a batch handed out before a seek aborts it too (without
//     a stop).
//   - A revoke does not fence processing: what was handed out runs to
//     the end, and the final commit commits it.
//   - A failed producer (fenced by another instance with the same
//     transactional id) stops everything: nothing more is processed, and
//     the run ends with the error.

import (
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/commit"
	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// txnState is the coordinator's transaction state (transactional only).
type txnState struct {
	// inProcess are the batches handed to processing and not completed.
	inProcess map[*fetch.Batch]struct{}
	// held are batches fetched while processing is held, in order.
	held []*fetch.Batch
	// commitWanted: a commit is due; processing is held until it is
	// answered. since is when the hold (of a commit or an abort) began.
	commitWanted bool
	since        time.Time
	// aborting: the partitions were rewound; the abort is sent once
	// nothing is in processing, and processing resumes when it is
	// answered. abortSent: it was sent.
	aborting, abortSent bool
	// failed: the producer failed for good; nothing is processed any
	// more.
	failed error
}

// errTxnNotDrained is why a transaction aborts when processing did not
// drain for a commit in time.
var errTxnNotDrained = errors.New("processing did not drain for the transaction's commit in time")

// txnHolding reports whether batches must not be handed to processing
// now.
func (c *coordinator) txnHolding() bool {
	t := &c.txn
	return t.commitWanted || t.aborting || t.failed != nil || c.committer.busy() || c.revoke != nil
}

// txnDrained reports whether nothing is in processing.
func (c *coordinator) txnDrained() bool { return len(c.txn.inProcess) == 0 }

// handOut sends a batch to processing, or holds it while a transaction
// commit or abort needs processing quiet.
func (c *coordinator) handOut(bt *fetch.Batch) {
	if !c.cfg.transactional {
		c.toProcess.Batches = append(c.toProcess.Batches, bt)
		return
	}
	if c.txnHolding() || len(c.txn.held) > 0 {
		// (behind those held still: a hold may end after planTxn ran,
		// as a revoke's does, and a partition's batches go out in
		// order)
		c.txn.held = append(c.txn.held, bt)
		return
	}
	c.txn.inProcess[bt] = struct{}{}
	c.toProcess.Batches = append(c.toProcess.Batches, bt)
}

// planTxn runs the transaction barrier: it sends the due commit or the
// pending abort once processing drained, aborts a transaction whose
// processing does not drain, and releases held batches when nothing
// holds them.
func (c *coordinator) planTxn() {
	t := &c.txn
	if t.failed != nil {
		return
	}
	if c.commitDue() && !t.commitWanted && !t.aborting {
		t.commitWanted, t.since = true, c.now
	}
	drained := c.txnDrained()
	switch {
	case t.aborting && !t.abortSent && !c.committer.busy() && (drained || c.now.Sub(t.since) > c.cfg.txnDrainTimeout):
		// (not drained in time: a stage ignores its cancellation; the
		// producer's abort then waits for its call, within the commit
		// step's deadline, or fails the run)
		c.sendAbort()
	case t.commitWanted && c.revoke == nil && drained && !c.committer.busy():
		if !c.sendCommit() {
			t.commitWanted = false
			for _, f := range c.flushes {
				reply(f, nil)
			}
			c.flushes = nil
		}
	case t.commitWanted && !drained && c.now.Sub(t.since) > c.cfg.txnDrainTimeout:
		c.log.Warn("transaction: in-flight records did not finish in time for its commit; aborting it",
			zap.Duration("waited", c.now.Sub(t.since)))
		c.abortTxn(errTxnNotDrained)
	}
	if !c.txnHolding() && len(t.held) > 0 {
		c.dropHeld(func(*partition) bool { return false })
		for _, bt := range t.held {
			t.inProcess[bt] = struct{}{}
		}
		c.toProcess.Batches = append(c.toProcess.Batches, t.held...)
		clear(t.held)
		t.held = t.held[:0]
	}
}

// sendAbort asks the commit step to abort the open transaction.
func (c *coordinator) sendAbort() {
	if c.store == nil || c.out.commit == nil {
		// no generation: nothing can be committed; the next
		// generation's store aborts what is open before it commits
		c.txn.aborting, c.txn.abortSent = false, false
		return
	}
	c.txn.abortSent = true
	req := offsets.NewCommitRequest(c.gen, nil)
	c.committer.start(req.ID(), nil)
	c.out.commit(commit.Job{Request: req, Store: c.store, Abort: true})
}

// onTxnResult takes a commit or abort result of a transactional store. It
// reports whether the result was handled (a successful commit is applied
// by onCommit as usual).
func (c *coordinator) onTxnResult(r *commit.Result) bool {
	t := &c.txn
	wasAbort := r.Request.Len() == 0 && t.abortSent
	switch err := r.Err; {
	case errors.Is(err, offsets.ErrTransactionFailed):
		c.txnFailed(err)
	case wasAbort && err == nil:
		t.aborting, t.abortSent = false, false
		c.txnBoundary()
	case wasAbort:
		c.txnFailed(err)
	case errors.Is(err, offsets.ErrTransactionAborted):
		// the store aborted the transaction already (and opened the
		// next): rewind, with nothing more to send
		c.log.Warn("transaction aborted at commit; the partitions go back to their committed offsets", zap.Error(err))
		c.abortTxn(err)
		t.aborting, t.abortSent = false, false
		c.txnBoundary()
	case err == nil:
		t.commitWanted = false
		c.txnBoundary()
		return false
	default:
		// a stale generation or a commit the group fenced: the
		// transaction cannot commit these offsets; abort it
		t.commitWanted = false
		c.abortTxn(err)
		return false
	}
	t.commitWanted = false
	return true
}

// txnBoundary records, after a commit or an abort with nothing in
// processing, where every partition's next transaction begins.
func (c *coordinator) txnBoundary() {
	for _, p := range c.slots {
		if p == nil || p.zombie {
			continue
		}
		if off, ok := p.wm.Committable(); ok {
			p.txnBase, p.hasTxnBase = off, true
		}
	}
}

// abortTxn aborts the open transaction: every partition goes back to
// where it began (see the file comment), and the abort is sent once
// processing drained.
func (c *coordinator) abortTxn(cause error) {
	t := &c.txn
	if t.failed != nil || t.aborting {
		return
	}
	t.aborting, t.abortSent, t.since = true, false, c.now
	c.stats.txnAborts.Add(1)
	for _, p := range c.slots {
		if p == nil || p.zombie {
			continue
		}
		c.rewind(p, cause)
	}
	// batches held for processing were fetched from positions the
	// rewind replaced: drop them
	c.dropHeld(func(*partition) bool { return true })
	c.dirty = false
}

// rewind moves p back to where its transaction began, cancelling its
// processing.
func (c *coordinator) rewind(p *partition, cause error) {
	c.toProcess.Fences = append(c.toProcess.Fences, processFence(p, true))
	from := p.currentOffset()
	c.newEpoch(p)
	p.abortedBelow = p.epoch
	if !p.hasTxnBase {
		// it never had a position: it is still resolving where to
		// start, which the abort does not change
		return
	}
	to := p.txnBase
	p.wm.Restart(p.epoch, to)
	if p.state == Stopped {
		// stopped: it stays so, at the offset its transaction began
		return
	}
	if from != to {
		ev := offsetstore.ResetEvent{Partition: p.tp, Reason: offsetstore.ReasonTransactionAborted, From: from, To: to,
			LogStart: -1, HighWatermark: -1, Epoch: p.epoch}
		c.notices = append(c.notices, notice{Reset: &ev})
		c.stats.resets.Add(1)
		c.log.Info("partition reset", zap.Stringer("partition", p.tp), zap.Stringer("reason", ev.Reason),
			zap.Int64("from", from), zap.Int64("to", to), zap.NamedError("cause", cause))
	}
	p.fetchedLeaderEpoch, p.validateLeaderEpoch = -1, -1
	p.seek = false
	c.startFetching(p, to)
}

// txnFailed stops all processing for good: the producer cannot commit any
// more.
func (c *coordinator) txnFailed(err error) {
	if c.txn.failed != nil {
		return
	}
	c.txn.failed = err
	c.log.Error("transactional producer failed; stopping", zap.Error(err))
	for _, p := range c.slots {
		if p != nil && !p.zombie {
			c.toProcess.Fences = append(c.toProcess.Fences, processFence(p, true))
		}
	}
	if c.out.fatal != nil {
		c.out.fatal(err)
	}
}

// onTxnProducerFailed takes the producer's report that its transaction
// must abort, or that it failed for good.
func (c *coordinator) onTxnProducerFailed(e txnFailedEvent) {
	if !c.cfg.transactional {
		return
	}
	if e.fatal {
		c.txnFailed(e.err)
		return
	}
	if c.txn.aborting {
		return
	}
	c.log.Warn("transaction failed; aborting it: the partitions go back to their committed offsets", zap.Error(e.err))
	c.abortTxn(e.err)
}

// checkRevokeTxn is checkRevoke's drain and final commit under
// transactions: the final commit commits the transaction, so it waits
// for all processing to drain, not only the revoked partitions'; if that
// misses the drain deadline, the transaction is aborted (everything goes
// back to its committed offset) and the revoke finishes after the abort.
// It reports whether checkRevoke should go on (the final commit was sent
// or is not needed: finalCommit is set).
func (c *coordinator) checkRevokeTxn(e *revokeEvent) bool {
	t := &c.txn
	switch {
	case t.failed != nil:
	case t.aborting || !c.txnDrained():
		if !t.aborting && c.now.Before(e.drainBy) {
			return false
		}
		if !t.aborting {
			e.drainMissed = true
			c.log.Warn("revoke: in-flight work did not finish before the drain deadline; aborting the transaction",
				zap.Int32("generation", int32(c.gen)))
			c.abortTxn(errRevokeNotDrained)
			return false
		}
		if c.now.Before(e.deadline) {
			return false // the abort's answer comes first
		}
	case c.committer.busy():
		if c.now.Before(e.deadline) {
			return false
		}
	default:
		if c.sendCommit() {
			c.finalCommit = true
			return false // the commit result finishes the revoke
		}
	}
	c.finalCommit = true
	return true
}

// errRevokeNotDrained is why a revoke aborts the transaction.
var errRevokeNotDrained = errors.New("a revoke's drain deadline passed with records in processing")

// dropHeld drops the batches held for processing of the partitions drop
// selects, and those of partitions released since they were fetched.
func (c *coordinator) dropHeld(drop func(*partition) bool) {
	t := &c.txn
	kept := t.held[:0]
	for _, bt := range t.held {
		p := c.byTP(bt.Partition())
		if p == nil || !slices.ContainsFunc(p.out, func(h handout) bool { return h.batch == bt }) {
			continue // released (its bytes went with it)
		}
		if !drop(p) {
			kept = append(kept, bt)
			continue
		}
		if h, ok := p.complete(bt); ok {
			p.outBytes -= h.bytes
			c.buffered -= h.bytes
		}
	}
	clear(t.held[len(kept):])
	t.held = kept
}
