package pipeline

// Fetching: fetch results, leaders, ready lists and fetch planning.

import (
	"fmt"

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
		// A fetch sent with another leader epoch than the partition's
		// now is stale too: its answer came from (or was refused by) a
		// leader the metadata has moved past (KIP-320).
		if !current || p.state != Fetching || req.PositionAt(i) != p.pos || req.At(i).LeaderEpoch != p.leaderEpoch {
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
		case fetch.Corrupt:
			c.onCorrupt(p, pr)
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
		// Nothing new. Caught up (the position is at the high
		// watermark the broker reported): its next fetch is a long
		// poll that reserves no budget for it (see planFetch). Left
		// out of a full response, or blocked by an open transaction:
		// it has records to bring, and reserves its full share.
		p.idle = pr.Batch == nil && pr.HighWatermark >= 0 && at >= pr.HighWatermark
		return false
	}
	p.idle = false
	if bt := pr.Batch; bt != nil {
		// The coordinator records what it hands out (span, epoch,
		// bytes) and marks exactly that when the batch completes: it
		// never trusts, or even reads, the batch itself here.
		c.handOut(bt)
		p.out = append(p.out, handout{batch: bt, span: offsets.Span{Start: at, End: pr.Next}, epoch: p.epoch, bytes: pr.Bytes,
			leaderEpoch: pr.LastLeaderEpoch})
		p.outBytes += pr.Bytes
		c.buffered += pr.Bytes
	} else {
		// Only offsets without records (transaction markers): nothing
		// to process, the span is done.
		_ = p.wm.Mark(c.gen, p.epoch, offsets.Span{Start: at, End: pr.Next})
		p.markedLeaderEpochs.note(pr.Next, pr.LastLeaderEpoch)
		c.dirty = true
	}
	p.pos, _ = p.pos.Advance(pr.Next) // pr.Next > at
	if pr.LastLeaderEpoch >= 0 {
		p.fetchedLeaderEpoch = pr.LastLeaderEpoch
	}
	return true
}

// corruptAttempts is how many times a partition fetches a corrupt record
// batch before it stops: once more than the first can be a fault in
// transit; bytes that stay corrupt are corrupt in the log.
const corruptAttempts = 3

// onCorrupt takes a result whose records end at a corrupt batch: the
// records before it are handed out (the position moves to the corrupt
// batch), the batch is fetched again after a backoff, and when it is
// still corrupt on the corruptAttempts-th fetch the partition stops with
// the reason (it never skips the bytes on its own: a Seek past them
// does, by the application's decision).
func (c *coordinator) onCorrupt(p *partition, pr *fetch.PartitionResult) {
	if pr.Next > p.pos.Offset() {
		c.onFetched(p, pr) // resets p.failures: this is the first sighting at the new position
	}
	if p.failures+1 >= corruptAttempts {
		c.stop(p, fmt.Errorf("%w (fetched %d times; the records before it were processed; seek past the batch to skip it, or restore the log)",
			pr.Err, corruptAttempts))
		return
	}
	p.backoff(c)
	c.log.Warn("fetch: corrupt record batch; fetching it again", zap.Stringer("partition", p.tp),
		zap.Int64("offset", p.pos.Offset()), zap.Error(pr.Err), zap.Int("attempt", p.failures))
}

// outOfRange handles a broker's OffsetOutOfRange: the position is checked
// against fresh log bounds, and against the leader's log for the leader
// epoch of the last record fetched (a log truncated by an unclean leader
// election answers OffsetOutOfRange to a position past its new end),
// before anything is reset. The partition's epoch stays: if the position
// turns out valid, batches already being processed still count.
func (c *coordinator) outOfRange(p *partition, pr *fetch.PartitionResult) {
	off := p.pos.Offset()
	c.log.Info("offset out of range; checking the log bounds", zap.Stringer("partition", p.tp),
		zap.Int64("offset", off), zap.Int64("log_start", pr.LogStart), zap.Int64("high_watermark", pr.HighWatermark))
	c.validate(p)
}

// validate moves a fetching p to AwaitValidation of its position: the log
// bounds, and where the leader epoch of the last record fetched ends on
// the leader, if that leader epoch is known.
func (c *coordinator) validate(p *partition) {
	off := p.pos.Offset()
	p.from = off
	p.seek = false
	p.req = offsetstore.Exact(off)
	p.state = AwaitValidation
	p.validateLeaderEpoch = p.fetchedLeaderEpoch
	c.needResolve = true
}

func (c *coordinator) onLeaders(l *fetch.Leaders) {
	if l.Err != nil {
		c.log.Warn("metadata refresh failed", zap.Error(l.Err))
		c.needLeaders = true
		return
	}
	c.leaders = l.Leaders
	c.leaderEpochs = l.LeaderEpochs
	c.needLeaders = false
	for _, p := range c.slots {
		if p == nil || p.zombie {
			continue
		}
		leader, ok := l.Leaders[p.tp]
		if !ok {
			leader = -1
		}
		leaderEpoch, ok := l.LeaderEpochs[p.tp]
		if !ok {
			leaderEpoch = -1
		}
		// An older leader epoch than the one known is taken too:
		// partitions are named by topic, not topic id, and a topic
		// deleted and created again starts its leader epochs over
		// (keeping ours, every fetch would be refused as
		// UNKNOWN_LEADER_EPOCH forever). A broker behind the others that
		// answered the metadata costs one FENCED_LEADER_EPOCH answer and
		// a refresh.
		if leaderEpoch >= 0 {
			// an unknown leader epoch (no leader now: an offline
			// partition) keeps the last one known, so the next
			// leader's is compared with it
			c.setLeaderEpoch(p, leaderEpoch)
		}
		c.setLeader(p, leader)
	}
}

// setLeaderEpoch records the leader epoch the metadata gave p. A newer
// leader epoch than the one p fetched under means the leader changed: a
// fetching partition whose last record's leader epoch is known validates
// its position with the new leader before it fetches again (KIP-320),
// since an unclean election may have truncated the log below it. Fetches
// and lookups in flight with the old leader epoch are stale (see onFetch,
// onResolve).
//
// With no leader epoch known before (p was assigned while it had no
// leader), the leader changed if the leader epoch is newer than that of
// the record below the position: elections happened since that record was written, and
// the check p made of its committed offset, if any, asked a log that may
// have been cut since (the Java consumer likewise validates whenever the
// leader it knows for the position changes, from none included).
func (c *coordinator) setLeaderEpoch(p *partition, leaderEpoch int32) {
	old := p.leaderEpoch
	p.leaderEpoch = leaderEpoch
	changed := leaderEpoch > old && (old >= 0 || leaderEpoch > p.fetchedLeaderEpoch)
	if changed && p.state == Fetching && p.fetchedLeaderEpoch >= 0 {
		c.log.Info("leader changed; validating the position with the new leader", zap.Stringer("partition", p.tp),
			zap.Int64("offset", p.pos.Offset()), zap.Int32("leader_epoch", leaderEpoch), zap.Int32("fetched_leader_epoch", p.fetchedLeaderEpoch))
		c.validate(p)
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

// planFetches sends every idle fetcher with ready partitions a fetch, as
// far as the byte budget allows. Fetchers refused for lack of budget wait
// in line (c.waiting) and are served first, in the order they were
// refused, before any other fetcher takes budget: whatever the sizes, a
// fetcher with ready partitions sends its fetch once the fetches ahead of
// it and the records buffered leave a byte of room (in flight fetches
// always answer, processing always finishes), so no partition starves
// while others keep the budget busy.
func (c *coordinator) planFetches() {
	for len(c.waiting) > 0 {
		b := c.waiting[0]
		if !b.flight.busy() && len(b.ready) > 0 && !c.planFetch(b) {
			return // still no room: nobody goes before it
		}
		c.waiting[0] = nil
		c.waiting = c.waiting[1:]
	}
	for _, b := range c.fetchers {
		if !b.flight.busy() && len(b.ready) > 0 && !c.planFetch(b) {
			// refused: so are the fetchers after it (a refusal
			// changes nothing); they queue behind it
			c.waiting = append(c.waiting, b)
		}
	}
}

// planFetch sends b a fetch of its ready partitions if the byte budget
// has room, and reports false if it has none (b's ready partitions stay
// ready). The fetch reserves what it may return: the partition limit
// (partitionMaxBytes, or fetchMaxBytes without one) for each partition
// that may have records; for the partitions whose last fetch found them
// caught up together, their limits but at most idleShare; at most
// fetchMaxBytes and what is left of the budget, and at least one byte.
// So long polls of idle partitions hold at most half the budget, whatever
// the number of fetchers, and a fetch may ask for less than one record
// batch: the broker still returns the first batch of the first partition
// with records, whatever its size (Kafka's rule, so a consumer always
// progresses), and the budget counts its first record in full when it
// arrives (buffered bytes may then pass the budget by that record until
// it is processed; no fetch starts while they do).
func (c *coordinator) planFetch(b *fetcher) bool {
	avail := c.cfg.budget - c.buffered - c.reserved
	if avail <= 0 {
		return false
	}
	share := int64(c.cfg.fetchMaxBytes)
	if c.cfg.partitionMaxBytes > 0 {
		share = min(share, int64(c.cfg.partitionMaxBytes))
	}
	var fb offsets.FetchRequestBuilder
	fb.Grow(len(b.ready))
	slots := c.scratchSlots[:0]
	want, idle := int64(0), int64(0)
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
		fb.Add(offsets.FetchEntry{Partition: p.tp, Position: p.pos, LeaderEpoch: p.leaderEpoch})
		if p.idle {
			idle += share
		} else {
			want += share
		}
	}
	b.ready = b.ready[:0]
	if fb.Len() == 0 {
		return true
	}
	want += min(idle, c.idleShare())
	maxBytes := max(1, min(int64(c.cfg.fetchMaxBytes), avail, want))
	b.reserved = maxBytes
	c.reserved += maxBytes
	batch := fb.Build(b.id, b.index, c.gen, int32(maxBytes))
	b.flight.start(batch.ID(), slots)
	c.scratchSlots = slots[:0]
	c.out.fetch(batch)
	return true
}

// idleShare is the most a fetch reserves for its caught-up partitions
// together: an equal part of half the budget for each fetcher, so the
// long polls of every fetcher together leave half the budget to the
// partitions with records, and a partition that wakes up still gets that
// much at once (its full limit from its next fetch on).
func (c *coordinator) idleShare() int64 {
	return max(1, c.cfg.budget/int64(2*max(1, len(c.fetchers))))
}
