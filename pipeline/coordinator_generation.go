package pipeline

// Generations: assignment, revoke (drain, final commit, release), and
// zombies of partitions released with an operation in flight.

import (
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

func (c *coordinator) onAssign(e *assignEvent) {
	kept := 0
	switch {
	case c.active && c.revoke != nil:
		// The group layer waits for a revoke before it moves on; if it
		// did not, forget the old generation without committing (its
		// offsets are fenced anyway).
		c.log.Warn("new generation assigned before the revoke finished; dropping the old one",
			zap.Int32("old_generation", int32(c.gen)), zap.Int32("generation", int32(e.gen)))
		c.release(nil, errors.New("superseded by a new generation"))
	case c.active:
		// Cooperative rebalancing: the partitions this member keeps go
		// on, with what they fetched and processed, under the new
		// generation; their next commit is sent with it.
		for _, p := range c.slots {
			if p != nil && !p.zombie {
				if p.wm.Generation() == c.gen {
					p.wm.Continue(e.gen)
				}
				kept++
			}
		}
	}
	c.gen, c.store, c.active, c.fenced = e.gen, e.store, true, false
	if kept > 0 {
		// What the kept partitions processed under the old generation
		// may not be committed: its last commit can have been fenced
		// (the coordinator refuses it from the JoinGroup answer on).
		// Commit it under the new one at once, so that a crash of this
		// member does not make the next owner redo it.
		c.dirty = true
	}
	c.finalCommit, c.finalErr = false, nil
	// the first commit of a generation may go out as soon as a
	// watermark moves: the interval counts from the last commit sent
	c.nextCommitAt = c.now
	added := 0
	for _, a := range e.partitions {
		if _, owned := c.index[a.tp]; owned {
			if kept == 0 {
				c.ignore("partition assigned twice", zap.Stringer("partition", a.tp))
			}
			continue // kept: it goes on where it is
		}
		added++
		slot := len(c.slots)
		if n := len(c.free); n > 0 {
			slot, c.free = c.free[n-1], c.free[:n-1]
		} else {
			c.slots = append(c.slots, nil)
		}
		p := &partition{tp: a.tp, slot: slot, epoch: c.nextEpoch(), from: -1, committed: -1, leader: -1,
			leaderEpoch: -1, fetchedLeaderEpoch: -1, validateLeaderEpoch: -1, recreated: a.recreated}
		_, p.waitZombie = c.zombies[a.tp]
		p.paused = c.paused[a.tp]
		if l, ok := c.leaders[a.tp]; ok && l >= 0 {
			p.leader = l
			if le, ok := c.leaderEpochs[a.tp]; ok {
				p.leaderEpoch = le
			}
		} else {
			c.needLeaders = true
		}
		c.slots[slot] = p
		c.index[a.tp] = slot
		if off, ok := a.start.Offset(); ok && a.start.Kind() == offsetstore.StartCommitted {
			if off < 0 {
				c.ignore("negative committed offset treated as none", zap.Stringer("partition", a.tp), zap.Int64("offset", off))
				c.await(p, offsetstore.ByPolicy())
				continue
			}
			p.committed = off
			p.from = off
			p.wm = offsets.NewWatermark(c.gen, p.epoch, off)
			c.await(p, a.start)
			if le, ok := a.start.LeaderEpoch(); ok {
				// committed with the leader epoch of the record before
				// it: the validation asks the leader whether its log
				// still holds that leader epoch up to the offset
				// (KIP-320)
				p.fetchedLeaderEpoch = le
				if p.state == AwaitValidation {
					p.validateLeaderEpoch = le
				}
			}
			continue
		}
		c.await(p, a.start)
	}
	if c.needLeaders {
		c.requestMetadata()
	}
	c.log.Info("partitions assigned", zap.Int32("generation", int32(e.gen)), zap.Int("added", added), zap.Int("kept", kept))
}

// await puts p in the state that resolves req: an offset to validate
// (or to use directly when validation is off), or a logical request.
func (c *coordinator) await(p *partition, req offsetstore.StartRequest) {
	p.req = req
	p.stopErr = nil
	if off, ok := req.Offset(); ok {
		if off < 0 {
			req = offsetstore.ByPolicy()
			p.req = req
		} else if !c.cfg.validate {
			c.startFetching(p, off)
			return
		} else {
			p.state = AwaitValidation
			c.needResolve = true
			return
		}
	}
	p.state = AwaitReset
	c.needResolve = true
}

func (c *coordinator) onRevoke(e *revokeEvent) {
	if !c.active || e.gen != c.gen || c.revoke != nil {
		reply(e.done, nil)
		return
	}
	revoking := 0
	for _, p := range c.slots {
		if p == nil || p.zombie || (e.partitions != nil && !slices.Contains(e.partitions, p.tp)) {
			continue
		}
		p.revoking = true
		p.queued = false // planFetch skips its ready entry
		if !c.cfg.transactional {
			c.fenceProcessing(p)
		}
		// (Under transactions what was handed out runs to the end: the
		// final commit commits the transaction and waits for it anyway,
		// and a fence would drop queued records of a batch whose later
		// records, of another key, wrote their outputs already. A
		// drain that misses its deadline aborts, with cancelling
		// fences.)
		revoking++
	}
	if c.cfg.transactional {
		// their batches held for processing will not run here
		c.dropHeld(func(p *partition) bool { return p.revoking })
	}
	if e.lost {
		if c.cfg.transactional {
			// their outputs are in the open transaction, and their new
			// owner processes the records again: it must not commit
			c.abortTxn(errPartitionsLost)
		}
		// The group took the partitions away (the session expired, the
		// member was fenced): their offsets can no longer be committed.
		c.log.Warn("partitions lost: the group gave them to another member; in-flight records are dropped and fetched again by their new owner",
			zap.Int32("generation", int32(c.gen)), zap.Int("partitions", revoking))
		c.release(e.partitions, errPartitionsLost)
		reply(e.done, nil)
		return
	}
	c.revoke = e
	// (a generation may see two revokes: some partitions in a
	// cooperative rebalance, then the rest at shutdown; each drains and
	// commits)
	c.finalCommit, c.finalErr = false, nil
	if e.partitions == nil && c.out.abortFetches != nil {
		// A fetch long-polls for up to fetch_max_wait; its records would
		// be dropped anyway, so do not let it hold up the revoke. (A
		// partial revoke lets fetches finish: they carry partitions
		// that stay.)
		c.out.abortFetches()
	}
	c.log.Info("revoking partitions", zap.Int32("generation", int32(c.gen)), zap.Int("partitions", revoking),
		zap.Int("staying", len(c.index)-revoking))
}

// errPartitionsLost is the cause of a lost revoke's release.
var errPartitionsLost = errors.New("partitions lost to another member")

// checkRevoke finishes a revoke once in-flight work of its partitions
// drained and the final commit is done, or its deadlines passed.
func (c *coordinator) checkRevoke() {
	if c.revoke == nil {
		return
	}
	e := c.revoke
	if !c.finalCommit && c.cfg.transactional && !c.checkRevokeTxn(e) {
		return
	}
	if !c.finalCommit {
		drained := true
		for _, p := range c.slots {
			if p != nil && !p.zombie && p.revoking && (len(p.out) > 0 || p.op != opNone) {
				drained = false
				break
			}
		}
		if !drained && c.now.Before(e.drainBy) {
			return
		}
		if !drained {
			e.drainMissed = true
			c.log.Warn("revoke: in-flight work did not finish before the drain deadline; committing what is done",
				zap.Int32("generation", int32(c.gen)))
		}
		if c.committer.busy() {
			if c.now.Before(e.deadline) {
				return // wait for the periodic commit in flight first
			}
		} else if c.sendCommit() {
			c.finalCommit = true
			return // the commit result finishes the revoke
		}
		c.finalCommit = true
	}
	if c.committer.busy() && c.now.Before(e.deadline) {
		return
	}
	var err error
	if c.committer.busy() {
		err = fmt.Errorf("revoke of generation %d: final commit not acknowledged before the deadline", c.gen)
	} else if c.finalErr != nil {
		err = c.finalErr
	}
	c.release(e.partitions, nil)
	reply(e.done, err)
}

// release forgets partitions: the given ones, or every one (nil), which
// ends the generation. A partition with a fetch or lookup still in flight
// (a revoke that hit its deadline) stays as a zombie until the result
// comes back, so a new owner of the same partition never has two
// operations in flight. cause, if set, fences the partitions' processing
// (nothing of theirs is committed).
func (c *coordinator) release(tps []offsetstore.TopicPartition, cause error) {
	all := tps == nil
	var stopped []PartitionStopped
	released := map[int]bool{}
	for slot, p := range c.slots {
		if p == nil || p.zombie || (!all && !slices.Contains(tps, p.tp)) {
			continue
		}
		released[slot] = true
		if p.state == Stopped {
			stopped = append(stopped, PartitionStopped{Partition: p.tp, Err: p.stopErr})
			c.stats.stoppedPartitions.Add(-1)
		}
		if cause != nil {
			c.fenceProcessing(p)
		}
		c.buffered -= p.outBytes
		delete(c.index, p.tp)
		p.revoking, p.queued = false, false
		if p.op != opNone {
			p.zombie = true
			c.zombies[p.tp] = slot
			continue
		}
		c.slots[slot] = nil
		c.free = append(c.free, slot)
	}
	for _, b := range c.fetchers {
		b.ready = slices.DeleteFunc(b.ready, func(slot int) bool { return released[slot] })
	}
	// The lookup, fetches and commit in flight stay in flight: their
	// answers free the workers (and bury the zombies).
	c.stats.bufferedBytes.Store(c.buffered)
	c.revoke = nil
	if !all {
		return
	}
	for _, f := range c.flushes {
		reply(f, errors.New("generation ended before the commit"))
	}
	c.flushes = nil
	c.active, c.store = false, nil
	c.dirty = false
	c.stats.stoppedPartitions.Store(0)
	c.stats.stoppedAtRelease.Store(&stopped)
}

// bury frees a zombie whose last operation came back, and lets the
// partition's new owner (if assigned again meanwhile) start.
func (c *coordinator) bury(z *partition) {
	c.stale("result of a released partition", z.tp)
	delete(c.zombies, z.tp)
	c.slots[z.slot] = nil
	c.free = append(c.free, z.slot)
	if p := c.byTP(z.tp); p != nil {
		p.waitZombie = false
		c.needResolve = true
		c.makeReady(p)
	}
}
