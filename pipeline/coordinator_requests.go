package pipeline

// Application requests (seek, pause) and the clock.

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// ErrNotAssigned is returned by Seek for a partition this member does not
// own in the current generation.
var ErrNotAssigned = errors.New("partition is not assigned to this member")

func (c *coordinator) onSeek(e *seekEvent) error {
	p := c.byTP(e.tp)
	if p == nil || p.revoking {
		return fmt.Errorf("seek %s: %w (check the topic and partition, and call Seek after the partition is assigned)", e.tp, ErrNotAssigned)
	}
	if off, ok := e.req.Offset(); ok && off < 0 {
		return fmt.Errorf("seek %s: %w", e.tp, offsetstore.ErrNegativeOffset)
	}
	if e.req.Kind() == offsetstore.StartCommitted {
		return fmt.Errorf("seek %s: a committed request cannot be sought; use Exact", e.tp)
	}
	from := p.currentOffset()
	if p.state == Stopped {
		c.stats.stoppedPartitions.Add(-1)
	}
	p.fetchedLeaderEpoch, p.validateLeaderEpoch = -1, -1 // the leader epoch of the record before the target is unknown
	c.newEpoch(p)
	p.seekEpoch = p.epoch
	p.seek, p.from = true, from
	p.stopErr = nil
	p.retryAt = time.Time{}
	p.failures = 0
	if off, ok := e.req.Offset(); ok && !c.cfg.validate {
		// no lookup: the seek is applied now
		p.req = e.req
		ev := offsetstore.ResetEvent{Partition: p.tp, Reason: offsetstore.ReasonSeek, From: from, To: off,
			Skipped: offsets.Skipped(from, off, -1, -1), LogStart: -1, HighWatermark: -1, Epoch: p.epoch}
		c.stats.resets.Add(1)
		c.notices = append(c.notices, notice{Reset: &ev})
		c.log.Info("partition reset", zap.Stringer("partition", p.tp), zap.Stringer("reason", ev.Reason),
			zap.Int64("from", from), zap.Int64("to", off), zap.Int64("skipped", ev.Skipped))
		c.moveWatermark(p, from, off, false)
		c.startFetching(p, off)
		return nil
	}
	if _, ok := e.req.Offset(); ok {
		p.req, p.state = e.req, AwaitValidation
	} else {
		p.req, p.state = e.req, AwaitReset
	}
	c.needResolve = true
	return nil
}

func (c *coordinator) onPause(e *pauseEvent) {
	for _, tp := range e.tps {
		if e.pause {
			c.paused[tp] = true
		} else {
			delete(c.paused, tp)
		}
		if p := c.byTP(tp); p != nil {
			p.paused = e.pause
			c.makeReady(p)
		}
	}
}

func (c *coordinator) onTick(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
	if c.retryPending {
		c.retryPending = false
		for _, p := range c.slots {
			if p == nil || p.zombie || p.retryAt.IsZero() {
				continue
			}
			if p.retryAt.After(c.now) {
				c.retryPending = true
				continue
			}
			p.retryAt = time.Time{}
			if p.state == AwaitReset || p.state == AwaitValidation {
				c.needResolve = true
			}
			c.makeReady(p)
		}
	}
	if c.needLeaders && c.active {
		c.requestMetadata()
	}
}

func (c *coordinator) requestMetadata() {
	if c.out.metadata == nil || (!c.lastMetaReq.IsZero() && c.now.Sub(c.lastMetaReq) < c.cfg.metadataBackoff) {
		return
	}
	c.lastMetaReq = c.now
	c.out.metadata()
}
