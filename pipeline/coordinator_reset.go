package pipeline

// Resolving and resets: lookup results, the reset decision, epochs and
// the watermark across resets.

import (
	"errors"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/internal/engine/resolve"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

func (c *coordinator) onResolve(r *resolve.Result) {
	req := r.Request
	slots, ok := c.resolver.answer(req.ID(), req.Len())
	if !ok {
		c.ignore("resolve result that matches no lookup in flight")
		return
	}
	current := c.active // the entry's epoch names the partition's incarnation (see onFetch)
	for i, slot := range slots {
		e := req.At(i)
		pr := &resolve.PartitionResult{Err: errMisaligned, LogStart: -1, HighWatermark: -1, TimeOffset: -1}
		if len(r.Partitions) == len(slots) {
			pr = &r.Partitions[i]
		}
		p := c.lookup(slot, e.Partition)
		if p == nil || p.op != opResolve {
			c.stale("lookup result of a partition no longer assigned", e.Partition)
			continue
		}
		p.op = opNone
		if p.zombie {
			c.bury(p)
			continue
		}
		if !current || e.Epoch != p.epoch || e.Request != p.req || e.LeaderEpoch != p.leaderEpoch ||
			e.ValidateLeaderEpoch != p.resolveValidateLeaderEpoch() ||
			(p.state != AwaitReset && p.state != AwaitValidation) {
			c.stale("lookup result", e.Partition)
			c.needResolve = true
			c.makeReady(p)
			continue
		}
		if p.revoking {
			continue
		}
		if pr.Err != nil || pr.LogStart < 0 || pr.HighWatermark < pr.LogStart {
			if pr.NotLeader {
				c.setLeader(p, -1)
				c.requestMetadata()
			}
			p.backoff(c)
			c.needResolve = true
			c.log.Debug("lookup failed; retrying with backoff", zap.Stringer("partition", p.tp), zap.Error(pr.Err),
				zap.Int64("log_start", pr.LogStart), zap.Int64("high_watermark", pr.HighWatermark))
			continue
		}
		p.failures = 0
		c.resolved(p, pr)
	}
}

// errMisaligned is the error of every entry of a result that does not
// have one answer per entry of its request.
var errMisaligned = errors.New("result does not answer every entry of its request")

// startDecision is where a partition starts once its lookup answered:
// the offset, and why it moved (reason 0: the position it had is valid).
type startDecision struct {
	to       int64
	reason   offsetstore.ResetReason
	dataLoss bool
	// stop: there is no valid position and the reset policy is none;
	// the partition stops with a ResetError of reason.
	stop bool
	// truncated: the leader's log diverged below the position (an
	// unclean election truncated it); to is the divergence point.
	truncated bool
}

// decideStart is the reset decision: where a partition whose start
// request is req (seek: a seek asked for it; recreated: its topic was
// recreated; validateLeaderEpoch: the leader epoch of the record before
// an offset being validated, -1 if none) starts, given the lookup's
// answer and the reset policy. It has no effects.
func decideStart(req offsetstore.StartRequest, seek, recreated bool, validateLeaderEpoch int32,
	pr *resolve.PartitionResult, policy offsetstore.ResetPolicy) startDecision {
	ls, hw := pr.LogStart, pr.HighWatermark
	byPolicy := func(d startDecision) startDecision {
		r, ok := policy.Request()
		switch {
		case !ok:
			d.stop = true
		case r.Kind() == offsetstore.StartLatest:
			d.to = hw
		default:
			d.to = ls
		}
		return d
	}
	switch req.Kind() {
	case offsetstore.StartEarliest:
		return startDecision{to: ls, reason: offsetstore.ReasonSeek}
	case offsetstore.StartLatest:
		return startDecision{to: hw, reason: offsetstore.ReasonSeek}
	case offsetstore.StartAtTime:
		to := pr.TimeOffset
		if to < 0 || to > hw {
			to = hw
		}
		return startDecision{to: max(to, ls), reason: offsetstore.ReasonSeek}
	case offsetstore.StartByPolicy:
		reason := offsetstore.ReasonNoCommittedOffset
		if recreated {
			reason = offsetstore.ReasonTopicRecreated
		}
		return byPolicy(startDecision{reason: reason})
	}
	off, _ := req.Offset() // an offset to validate
	switch {
	case validateLeaderEpoch >= 0 && pr.LeaderEpochEndOffset >= 0 && pr.LeaderEpochEndOffset < off:
		// The leader's log holds the leader epoch of the record before
		// off only up to LeaderEpochEndOffset: it diverged below off (an
		// unclean election truncated it). Resume at the divergence
		// point: what the new leader wrote from there on is new.
		return startDecision{to: max(pr.LeaderEpochEndOffset, ls), reason: offsetstore.ReasonLogTruncation, dataLoss: true, truncated: true}
	case seek:
		// a sought offset outside the log is clamped to it (the event's
		// log bounds say so)
		return startDecision{to: min(max(off, ls), hw), reason: offsetstore.ReasonSeek}
	case off < ls:
		return startDecision{to: ls, reason: offsetstore.ReasonBelowLogStart}
	case validateLeaderEpoch >= 0 && pr.LeaderEpochEndOffset >= off:
		// the leader's log holds the leader epoch of the record before
		// off up to off or past it: the position is valid, even if a
		// new leader's high watermark has not caught up yet
		return startDecision{to: off}
	case off > hw:
		return byPolicy(startDecision{reason: offsetstore.ReasonAboveHighWatermark, dataLoss: true})
	}
	return startDecision{to: off}
}

// resolved applies the reset decision for p (decideStart): it starts p
// fetching, with a reset event when it moved, or stops it.
func (c *coordinator) resolved(p *partition, pr *resolve.PartitionResult) {
	ls, hw := pr.LogStart, pr.HighWatermark
	d := decideStart(p.req, p.seek, p.recreated, p.resolveValidateLeaderEpoch(), pr, c.cfg.policy)
	if p.req.Kind() == offsetstore.StartByPolicy {
		p.recreated = false
	}
	to, reason, dataLoss := d.to, d.reason, d.dataLoss
	if d.stop {
		from := int64(-1)
		if off, ok := p.req.Offset(); ok {
			from = off
		}
		c.stop(p, &offsetstore.ResetError{Partition: p.tp, Reason: reason, From: from, LogStart: ls, HighWatermark: hw})
		return
	}
	if d.truncated {
		off, _ := p.req.Offset()
		c.log.Warn("log truncation detected: the partition's log diverged below the position", zap.Stringer("partition", p.tp),
			zap.Int64("offset", off), zap.Int32("fetched_leader_epoch", p.validateLeaderEpoch),
			zap.Int32("leader_epoch", pr.EndLeaderEpoch), zap.Int64("leader_epoch_end_offset", pr.LeaderEpochEndOffset),
			zap.Int32("current_leader_epoch", p.leaderEpoch))
	}
	if reason == 0 {
		// validated: resume where we were, same (partition) epoch
		p.validateLeaderEpoch = -1
		c.startFetching(p, to)
		return
	}
	// where the partition resumes, the leader epoch of the record before
	// it is only known at a divergence point
	p.fetchedLeaderEpoch, p.validateLeaderEpoch = -1, -1
	if reason == offsetstore.ReasonLogTruncation && to == pr.LeaderEpochEndOffset {
		p.fetchedLeaderEpoch = pr.EndLeaderEpoch
	}
	from := p.from
	ev := offsetstore.ResetEvent{
		Partition: p.tp, Reason: reason, From: from, To: to,
		Skipped:  offsets.Skipped(from, to, ls, hw),
		LogStart: ls, HighWatermark: hw, DataLoss: dataLoss,
	}
	c.newEpoch(p)
	ev.Epoch = p.epoch
	c.notices = append(c.notices, notice{Reset: &ev})
	if reason == offsetstore.ReasonNoCommittedOffset {
		// where a partition the group never committed starts: the
		// policy's choice, not a reset
		c.log.Info("starting at the "+c.cfg.policy.String()+" offset (no committed offset)", zap.Stringer("partition", p.tp),
			zap.Int64("offset", to), zap.Int64("skipped", ev.Skipped), zap.Int64("log_start", ls), zap.Int64("high_watermark", hw))
	} else {
		c.stats.resets.Add(1)
		lvl := zap.InfoLevel
		if dataLoss || (ev.Skipped > 0 && reason != offsetstore.ReasonSeek) {
			lvl = zap.WarnLevel
		}
		c.log.Check(lvl, "partition reset").Write(zap.Stringer("partition", p.tp), zap.Stringer("reason", reason),
			zap.Int64("from", from), zap.Int64("to", to), zap.Int64("skipped", ev.Skipped),
			zap.Int64("log_start", ls), zap.Int64("high_watermark", hw), zap.Bool("data_loss", dataLoss))
	}
	c.moveWatermark(p, from, to, dataLoss)
	c.startFetching(p, to)
}

// moveWatermark applies a reset from `from` to `to` to p's watermark.
// Batches already handed to processing are not dropped: they finish and
// count. A forward jump marks the offsets it skips, so the committable
// offset passes them only after everything before them is processed. A
// data-loss reset restarts the watermark at the new position, even
// backwards, and forgets the committed offset so the next commit writes
// it: the old offsets name records that no longer exist.
//
// A seek (p.seek) is the application's decision about where the
// partition goes on, so it skips from the committable offset, not from
// the position: offsets below the target that are in flight still run,
// but the commit no longer waits for them, and a record among them that
// fails does not stop the partition (see onProcessed). Offsets from the
// target on are fetched again.
func (c *coordinator) moveWatermark(p *partition, from, to int64, dataLoss bool) {
	c.dirty = true
	switch committable, set := p.wm.Committable(); {
	case !set || p.wm.Generation() != c.gen:
		p.wm = offsets.NewWatermark(c.gen, p.epoch, to)
	case dataLoss:
		p.wm.Restart(p.epoch, to)
		p.markedLeaderEpochs.forget() // the old lineage's offsets name other records now
		p.committed = -1
	case p.seek && to > committable:
		p.wm.Skip(offsets.Span{Start: committable, End: to})
	case !p.seek && from >= 0 && to > from:
		p.wm.Skip(offsets.Span{Start: from, End: to})
	}
}

// newEpoch gives p a new epoch: fetch and lookup results of the old
// position are stale from now on. Batches already handed to processing are
// not affected.
func (c *coordinator) newEpoch(p *partition) {
	p.epoch = c.nextEpoch()
}

func (c *coordinator) fenceProcessing(p *partition) {
	c.toProcess.Fences = append(c.toProcess.Fences, processFence(p, false))
}

// processFence fences p's processing up to its current epoch; cancel
// also cancels its running units.
func processFence(p *partition, cancel bool) process.Fence {
	return process.Fence{Partition: p.tp, Epoch: p.epoch, Cancel: cancel}
}

// startFetching moves p to Fetching at offset (>= 0) in its current epoch.
func (c *coordinator) startFetching(p *partition, offset int64) {
	pos, err := offsets.NewPosition(offset, p.epoch, c.gen)
	if err != nil {
		// Cannot happen for bounds the resolver validated; never leave
		// a hole: stay awaiting and retry the lookup.
		c.ignore("resolved to an invalid offset", zap.Stringer("partition", p.tp), zap.Error(err))
		p.backoff(c)
		c.needResolve = true
		return
	}
	p.state, p.pos, p.hasPos, p.seek, p.from = Fetching, pos, true, false, -1
	p.idle = false
	p.req = offsetstore.StartRequest{}
	if _, set := p.wm.Committable(); !set || p.wm.Generation() != c.gen {
		p.wm = offsets.NewWatermark(c.gen, p.epoch, offset)
	}
	if !p.hasTxnBase {
		// its first position: what a transaction aborted before its
		// first commit goes back to
		p.txnBase, p.hasTxnBase = offset, true
	}
	c.dirty = true
	c.makeReady(p)
}

func (c *coordinator) stop(p *partition, err error) {
	if p.state != Stopped {
		c.stats.stoppedPartitions.Add(1)
	}
	c.stats.stops.Add(1)
	p.state, p.stopErr = Stopped, err
	p.req = offsetstore.StartRequest{}
	c.notices = append(c.notices, notice{Stopped: &PartitionStopped{Partition: p.tp, Err: err}})
	c.log.Error("partition stopped", zap.Stringer("partition", p.tp), zap.Error(err))
}

func (c *coordinator) planResolve() {
	entries := c.scratchR[:0]
	slots := c.scratchSlots[:0]
	c.needResolve = false
	for _, p := range c.slots {
		if p == nil || p.zombie || !p.needsResolve(c) {
			continue
		}
		p.op = opResolve
		slots = append(slots, p.slot)
		entries = append(entries, offsets.ResolveEntry{Partition: p.tp, Request: p.req, Epoch: p.epoch,
			Leader: p.leader, LeaderEpoch: p.leaderEpoch, ValidateLeaderEpoch: p.resolveValidateLeaderEpoch()})
	}
	c.scratchR, c.scratchSlots = entries[:0], slots[:0]
	if len(entries) == 0 {
		return
	}
	rb := offsets.NewResolveRequest(c.gen, entries)
	c.resolver.start(rb.ID(), slots)
	c.out.resolve(rb)
}
