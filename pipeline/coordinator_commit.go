package pipeline

// Processing completions and commits.

import (
	"errors"
	"fmt"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/commit"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
)

func (c *coordinator) onProcessed(r *process.Report) {
	for i := range r.Completions {
		cp := &r.Completions[i]
		bt := cp.Batch
		if bt == nil {
			c.ignore("completion without a batch")
			continue
		}
		if c.cfg.transactional {
			delete(c.txn.inProcess, bt)
		}
		p := c.byTP(bt.Partition())
		if p == nil || !c.active {
			c.stale("completion of a partition no longer assigned", bt.Partition())
			continue
		}
		// Only a batch handed out to this incarnation of the partition
		// completes: one of an earlier assignment (before a revoke) is
		// not in p.out. A batch of an earlier generation is, when the
		// partition stayed assigned through a cooperative rebalance.
		h, ok := p.complete(bt)
		switch {
		case !ok && bt.Generation() != c.gen:
			c.stale("completion of a partition no longer assigned", bt.Partition())
			continue
		case !ok:
			c.ignore("completion of a batch not handed out", zap.Stringer("partition", p.tp))
			continue
		}
		p.outBytes -= h.bytes
		c.buffered -= h.bytes
		// What the coordinator handed out (h.span) bounds what the
		// completion may claim.
		done := min(max(cp.FinishedBelow, h.span.Start), h.span.End)
		if done > h.span.Start {
			if err := p.wm.Mark(c.gen, h.epoch, offsets.Span{Start: h.span.Start, End: done}); err != nil {
				c.stale("processed mark", p.tp)
			} else {
				c.dirty = true
				if done == h.span.End {
					p.markedLeaderEpochs.note(done, h.leaderEpoch)
				}
				if c.cfg.reportCommits {
					p.recent.note(bt, done)
				}
			}
		}
		if done == h.span.End || cp.Err == nil {
			// finished, or dropped: the partition is stopped, fenced or
			// stopping, and what was dropped is fetched again by whoever
			// resumes it
			continue
		}
		switch {
		case h.epoch < p.seekEpoch:
			// Handed out before a seek: the seek decided where the
			// partition goes on. Offsets below its target are skipped,
			// offsets from it on are fetched again, so this failure
			// does not stop the partition.
			c.log.Warn("a record failed after a seek moved its partition; the seek stands and the partition goes on",
				zap.Stringer("partition", p.tp), zap.Int64("offset", done), zap.Error(cp.Err))
			if c.cfg.transactional && h.epoch >= p.abortedBelow {
				// later records of the batch may have written outputs
				// into the transaction, and a commit before the seek
				// is applied (a revoke's) would commit them below
				// their offsets: it must not commit
				c.abortTxn(fmt.Errorf("partition %s: a record failed: %w", p.tp, cp.Err))
			}
		case h.epoch < p.abortedBelow:
			// handed out in a transaction that was aborted since: the
			// record runs again from the transaction's start
		case p.state != Stopped:
			c.stop(p, cp.Err)
			if c.cfg.transactional {
				// later records of the batch may have written outputs
				// into the transaction: it must not commit
				c.abortTxn(fmt.Errorf("partition %s stopped: %w", p.tp, cp.Err))
			}
		}
	}
	if c.buffered < 0 {
		c.buffered = 0
	}
	c.stats.bufferedBytes.Store(c.buffered)
}

func (c *coordinator) onCommit(r *commit.Result) {
	if _, ok := c.committer.answer(r.Request.ID(), 0); !ok {
		c.ignore("commit result with no commit in flight")
		return
	}
	if c.cfg.transactional && c.onTxnResult(r) {
		// an abort's answer, or a commit whose transaction was aborted
		// or failed: nothing was committed
		c.committing = nil
		if c.revoke != nil && c.finalCommit {
			c.finalErr = r.Err
		}
		for _, f := range c.flushes {
			reply(f, r.Err)
		}
		c.flushes = nil
		return
	}
	current := c.active && r.Request.Generation() == c.gen
	err := r.Err
	switch {
	case err == nil && current:
		c.stats.commits.Add(1)
		if len(c.committing) > 0 {
			c.notices = append(c.notices, notice{Committed: c.committing})
		}
		for i := 0; i < r.Request.Len(); i++ {
			e := r.Request.At(i)
			if p := c.byTP(e.Partition); p != nil && e.Offset > p.committed {
				p.committed = e.Offset
			}
		}
	case err == nil:
	case errors.Is(err, offsets.ErrGenerationEnded):
		c.stats.commitErrors.Add(1)
		if current {
			c.fenced = true
		} else if c.active {
			// A cooperative rebalance moved the member to a new
			// generation meanwhile: the partitions it kept commit
			// their progress under that one.
			c.dirty = true
		}
		c.log.Warn("commit fenced: the group generation ended; partitions that stay are committed under the next",
			zap.Int32("generation", int32(r.Request.Generation())), zap.Error(err))
	default:
		c.stats.commitErrors.Add(1)
		c.log.Warn("commit failed; retrying after commit_interval", zap.Int32("generation", int32(r.Request.Generation())),
			zap.Int("partitions", r.Request.Len()), zap.Error(err))
		if current {
			c.dirty = true
		}
	}
	c.committing = nil
	if c.revoke != nil && c.finalCommit {
		c.finalErr = err
	}
	for _, f := range c.flushes {
		reply(f, err)
	}
	c.flushes = nil
}

func (c *coordinator) onFlush(e *flushEvent) {
	if !c.active || c.store == nil {
		reply(e.done, nil)
		return
	}
	c.flushes = append(c.flushes, e.done)
}

// sendCommit sends a commit of every partition whose watermark moved past
// its committed offset. It reports whether a commit was sent.
func (c *coordinator) sendCommit() bool {
	c.dirty = false
	if c.store == nil || c.fenced || c.out.commit == nil {
		return false
	}
	var entries []offsets.CommitEntry
	for _, p := range c.slots {
		if p == nil || p.zombie || p.wm.Generation() != c.gen {
			continue
		}
		if off, ok := p.wm.Committable(); ok && off > p.committed {
			entries = append(entries, offsets.CommitEntry{Partition: p.tp, Offset: off, LeaderEpoch: p.markedLeaderEpochs.at(off)})
			if c.cfg.reportCommits {
				c.committing = append(c.committing, CommittedOffset{Partition: p.tp, Offset: off, RecordTime: p.recent.newestBelow(off)})
			}
		}
	}
	if len(entries) == 0 {
		c.committing = nil
		return false
	}
	cb := offsets.NewCommitRequest(c.gen, entries)
	c.committer.start(cb.ID(), nil)
	c.nextCommitAt = c.now.Add(c.cfg.commitInterval)
	c.out.commit(commit.Job{Request: cb, Store: c.store})
	return true
}
