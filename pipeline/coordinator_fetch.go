package pipeline

// Fetching: fetch results, leaders, ready lists and fetch planning.

import (
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

func (c *coordinator) onFetch(r *fetch.Result) {
	req := r.Request
	b := c.brokers[fetcherKey{req.Broker(), req.Fetcher()}]
	if b == nil {
		c.ignore("fetch result that matches no fetch in flight", zap.Int32("broker", req.Broker()))
		return
	}
	slots, ok := b.flight.answer(req.ID(), req.Len())
	if !ok {
		c.ignore("fetch result that matches no fetch in flight", zap.Int32("broker", req.Broker()))
		return
	}
	c.reserved -= b.reserved
	b.reserved = 0
	// A position names the partition's epoch, and every assignment
	// gives a new epoch: a result whose position is the partition's
	// current one answers this incarnation of it, whatever generation
	// the fetch was sent in (cooperative rebalancing keeps partitions
	// across generations).
	current := c.active
	// Partitions that brought records queue after those that did not,
	// so a broker that fills a response from the first partitions it is
	// asked for serves the others next time: no partition starves.
	later := c.scratchLater[:0]
	for i := range slots {
		pr := &fetch.PartitionResult{Outcome: fetch.Retriable, Err: errMisaligned}
		if len(r.Partitions) == len(slots) {
			pr = &r.Partitions[i]
		}
		// The result answers the batch in flight (its ID matched), so
		// slot i is the partition that was fetched: a slot with an
		// operation in flight is never reused (see release).
		p := c.slots[slots[i]]
		if p == nil || p.op != opFetch || p.fetcher != b {
			c.ignore("fetch result of a partition with no fetch in flight", zap.Stringer("partition", req.At(i).Partition))
			continue
		}
		p.op = opNone
		if p.zombie {
			c.bury(p)
			continue
		}
		if !current || p.state != Fetching || req.PositionAt(i) != p.pos {
			c.stale("fetch result", p.tp)
			c.needResolve = true
			c.makeReady(p)
			continue
		}
		if p.revoking || p.paused {
			// Keep the position: the records are fetched again after
			// resume or by the next owner.
			continue
		}
		switch pr.Outcome {
		case fetch.OK:
			if c.onFetched(p, pr) {
				later = append(later, p)
			} else {
				c.makeReady(p)
			}
		case fetch.OffsetOutOfRange:
			c.outOfRange(p, pr)
		case fetch.NotLeader:
			c.log.Debug("fetch: not leader; refreshing metadata", zap.Stringer("partition", p.tp), zap.Error(pr.Err))
			c.setLeader(p, -1)
			c.requestMetadata()
		default:
			p.backoff(c)
			lvl := zap.DebugLevel
			if pr.Outcome == fetch.Fatal || p.failures > 3 {
				lvl = zap.WarnLevel
			}
			if ce := c.log.Check(lvl, "fetch failed; retrying with backoff"); ce != nil {
				ce.Write(zap.Stringer("partition", p.tp), zap.Stringer("outcome", pr.Outcome), zap.Error(pr.Err),
					zap.Int("failures", p.failures))
			}
		}
	}
	for i, p := range later {
		c.makeReady(p)
		later[i] = nil
	}
	c.scratchLater = later[:0]
}

// onFetched takes an OK result and reports whether the position moved;
// the caller queues p for its next fetch either way (see onFetch).
func (c *coordinator) onFetched(p *partition, pr *fetch.PartitionResult) (moved bool) {
	at := p.pos.Offset()
	if pr.Next < at {
		c.ignore("fetch result going backwards", zap.Stringer("partition", p.tp), zap.Int64("position", at), zap.Int64("next", pr.Next))
		p.backoff(c)
		return false
	}
	p.failures = 0
	if pr.Next == at {
		return false
	}
	if bt := pr.Batch; bt != nil {
		// The coordinator records what it hands out (span, epoch,
		// bytes) and marks exactly that when the batch completes: it
		// never trusts, or even reads, the batch itself here.
		c.toProcess.Batches = append(c.toProcess.Batches, bt)
		p.out = append(p.out, handout{batch: bt, span: offsets.Span{Start: at, End: pr.Next}, epoch: p.epoch, bytes: pr.Bytes})
		p.outBytes += pr.Bytes
		c.buffered += pr.Bytes
	} else {
		// Only offsets without records (transaction markers): nothing
		// to process, the span is done.
		_ = p.wm.Mark(c.gen, p.epoch, offsets.Span{Start: at, End: pr.Next})
		c.dirty = true
	}
	p.pos, _ = p.pos.Advance(pr.Next) // pr.Next > at
	return true
}

// outOfRange handles a broker's OffsetOutOfRange: the position is checked
// against fresh log bounds before anything is reset. The epoch stays: if
// the position turns out valid, batches already being processed still
// count.
func (c *coordinator) outOfRange(p *partition, pr *fetch.PartitionResult) {
	off := p.pos.Offset()
	c.log.Info("offset out of range; checking the log bounds", zap.Stringer("partition", p.tp),
		zap.Int64("offset", off), zap.Int64("log_start", pr.LogStart), zap.Int64("high_watermark", pr.HighWatermark))
	p.from = off
	p.seek = false
	p.req = offsetstore.Exact(off)
	p.state = AwaitValidation
	c.needResolve = true
}

func (c *coordinator) onLeaders(l *fetch.Leaders) {
	if l.Err != nil {
		c.log.Warn("metadata refresh failed", zap.Error(l.Err))
		c.needLeaders = true
		return
	}
	c.leaders = l.Leaders
	c.needLeaders = false
	for _, p := range c.slots {
		if p == nil || p.zombie {
			continue
		}
		leader, ok := l.Leaders[p.tp]
		if !ok {
			leader = -1
		}
		c.setLeader(p, leader)
	}
}

func (c *coordinator) setLeader(p *partition, leader int32) {
	if leader < 0 {
		c.needLeaders = true
	}
	if p.leader == leader {
		if !p.queued {
			c.makeReady(p)
		}
		return
	}
	p.leader = leader
	p.queued = false // a stale entry in the old broker's list is skipped
	c.makeReady(p)
}

// makeReady queues p in its leader's ready list if it can be fetched.
func (c *coordinator) makeReady(p *partition) {
	if p.queued || !p.fetchable(c) {
		return
	}
	b := p.leaderF
	if b == nil || b.id != p.leader {
		k := fetcherKey{broker: p.leader, index: p.slot % c.cfg.fetchersPerBroker}
		b = c.brokers[k]
		if b == nil {
			b = &fetcher{id: k.broker, index: k.index}
			c.brokers[k] = b
			c.fetchers = append(c.fetchers, b)
		}
		p.leaderF = b
	}
	b.ready = append(b.ready, p.slot)
	p.queued = true
}

// planFetch sends b a fetch of its ready partitions, if the byte budget
// has room. The fetch reserves what it can return: its partitions times
// partitionMaxBytes, at most fetchMaxBytes and what is left of the
// budget, so one fetch (a long poll of idle partitions, say) never holds
// the budget other brokers need.
func (c *coordinator) planFetch(b *fetcher) {
	avail := c.cfg.budget - c.buffered - c.reserved
	if avail <= 0 {
		return
	}
	var fb offsets.FetchRequestBuilder
	fb.Grow(len(b.ready))
	slots := c.scratchSlots[:0]
	for _, slot := range b.ready {
		p := c.slots[slot]
		if p == nil || !p.queued || p.leaderF != b {
			continue
		}
		p.queued = false
		if !p.fetchable(c) {
			continue
		}
		p.op, p.fetcher = opFetch, b
		slots = append(slots, slot)
		fb.Add(offsets.FetchEntry{Partition: p.tp, Position: p.pos})
	}
	b.ready = b.ready[:0]
	if fb.Len() == 0 {
		return
	}
	maxBytes := min(int64(c.cfg.fetchMaxBytes), avail)
	if c.cfg.partitionMaxBytes > 0 {
		maxBytes = min(maxBytes, int64(fb.Len())*int64(c.cfg.partitionMaxBytes))
	}
	b.reserved = maxBytes
	c.reserved += maxBytes
	batch := fb.Build(b.id, b.index, c.gen, int32(maxBytes))
	b.flight.start(batch.ID(), slots)
	c.scratchSlots = slots[:0]
	c.out.fetch(batch)
}
