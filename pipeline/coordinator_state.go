package pipeline

import (
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// PartitionState is the state of one assigned partition, named as in the
// Java client.
type PartitionState uint8

const (
	// AwaitReset: the partition has a start request (earliest, latest,
	// a time, the reset policy) that the resolve step must turn into
	// an offset.
	AwaitReset PartitionState = iota + 1
	// AwaitValidation: the partition has an offset (committed, sought,
	// or one the broker called out of range) that is being checked
	// against the log start and high watermark before fetching.
	AwaitValidation
	// Fetching: the partition has an absolute position and is fetched
	// from it (unless paused).
	Fetching
	// Stopped: the partition stopped with an error (reset policy none,
	// or a record failed with the dead-letter policy stop). It is not
	// fetched until a Seek restarts it.
	Stopped
)

func (s PartitionState) String() string {
	switch s {
	case AwaitReset:
		return "AWAIT_RESET"
	case AwaitValidation:
		return "AWAIT_VALIDATION"
	case Fetching:
		return "FETCHING"
	case Stopped:
		return "STOPPED"
	}
	return "UNKNOWN"
}

// op is the one operation a partition may have in flight.
type op uint8

const (
	opNone op = iota
	opResolve
	opFetch
)

// partition is the coordinator's state for one assigned partition. Only
// the coordinator goroutine touches it.
type partition struct {
	tp   offsetstore.TopicPartition
	slot int

	state PartitionState
	// req is the pending request in AwaitReset and AwaitValidation.
	req offsetstore.StartRequest
	// pos is the position in Fetching; in the other states it is the
	// last position the partition had, if hasPos.
	pos    offsets.Position
	hasPos bool
	// seek is set when the pending request came from Seek, so the reset
	// event says so.
	seek bool
	// from is the offset the pending reset started from (the committed
	// or current offset), -1 if none.
	from int64
	// epoch is the partition's incarnation: every assignment, reset and
	// seek gives it a new one, and a result of an older one is dropped.
	epoch offsetstore.Epoch
	// seekEpoch is the (partition) epoch the last Seek gave the
	// partition: batches handed out in older epochs were handed out
	// before it.
	seekEpoch offsetstore.Epoch
	// recreated: the partition was assigned after its topic was deleted
	// and created again; its start by the reset policy is reported as
	// a topic_recreated reset (cleared once resolved).
	recreated bool

	op      op
	fetcher *fetcher // fetcher of the fetch in flight
	leader  int32    // -1 unknown
	// leaderEpoch is the partition's leader epoch as the metadata said
	// (KIP-320), sent with every fetch and lookup of the partition; -1
	// unknown. A result of a request sent with another leader epoch is
	// stale.
	leaderEpoch int32
	// fetchedLeaderEpoch is the leader epoch of the record just before
	// the position (the last one fetched, or the committed offset's); -1
	// unknown (after a seek or a reset). It is what a leader change or
	// an out-of-range answer is checked with (validateLeaderEpoch).
	fetchedLeaderEpoch int32
	// validateLeaderEpoch is the leader epoch the pending validation asks
	// the leader about (OffsetForLeaderEpoch), -1 for none.
	validateLeaderEpoch int32
	// markedLeaderEpochs: the leader epochs of the last spans marked
	// processed, for the commit's leader epoch.
	markedLeaderEpochs leaderEpochMarks

	leaderF *fetcher // the fetcher this partition goes to, cached
	paused  bool     // mirrors coordinator.paused for this partition
	// revoking: the revoke in progress takes this partition away; it
	// is neither fetched nor looked up, its in-flight work drains.
	revoking bool
	queued   bool // in its leader's ready list
	retryAt  time.Time
	failures int
	// idle: the last fetch found the partition caught up, so its next
	// fetch (a long poll) reserves no budget for it (see planFetch).
	idle bool

	wm        offsets.Watermark
	committed int64 // last offset committed in this generation, -1 none
	recent    recentMarks

	out      []handout // batches handed to processing and not completed
	outBytes int64     // their bytes

	stopErr error

	// txnBase is where the open transaction began for this partition
	// (exactly_once: the committed offset, or its first position since);
	// an abort goes back to it. abortedBelow: batches of epochs below it
	// were handed out in an aborted transaction, and their failures do
	// not stop the partition.
	txnBase      int64
	hasTxnBase   bool
	abortedBelow offsetstore.Epoch

	// zombie: released (its generation ended) with an operation still
	// in flight; kept only until that operation's result arrives.
	zombie bool
	// waitZombie: a zombie of the same partition has an operation in
	// flight; this partition starts nothing until it returns.
	waitZombie bool
}

// fetchable reports whether the partition may be put in a fetch now.
func (p *partition) fetchable(c *coordinator) bool {
	return p.state == Fetching && p.op == opNone && !p.waitZombie && p.leader >= 0 &&
		!p.paused && !p.revoking && !p.retryAt.After(c.now)
}

// handout is the coordinator's record of a batch it handed to
// processing: what the batch covers is what the coordinator decided when
// it accepted the fetch, whatever the batch itself says.
type handout struct {
	batch *fetch.Batch
	span  offsets.Span
	epoch offsetstore.Epoch // the partition's epoch it was handed out in
	bytes int64
	// leaderEpoch is the leader epoch of the record at span.End-1, -1
	// unknown.
	leaderEpoch int32
}

// complete removes bt from the batches handed out and returns its record;
// ok is false if bt was not handed out (a duplicate or forged completion).
func (p *partition) complete(bt *fetch.Batch) (h handout, ok bool) {
	for i := range p.out {
		if p.out[i].batch == bt {
			h = p.out[i]
			last := len(p.out) - 1
			copy(p.out[i:], p.out[i+1:])
			p.out[last] = handout{}
			p.out = p.out[:last]
			return h, true
		}
	}
	return handout{}, false
}

// currentOffset is where the partition is, for the From of a reset
// event: its position; for a stopped partition, where processing stopped
// (its watermark); while a seek is pending, where that seek started from;
// else the offset it waits to validate (committed, or called out of
// range), else its watermark; -1 if it never had one.
func (p *partition) currentOffset() int64 {
	switch {
	case p.state == Stopped:
	case p.hasPos:
		return p.pos.Offset()
	case p.seek:
		return p.from
	case p.state == AwaitValidation:
		off, _ := p.req.Offset()
		return off
	}
	if off, ok := p.wm.Committable(); ok {
		return off
	}
	return -1
}

// resolveValidateLeaderEpoch is the leader epoch a lookup of p asks the
// leader about (ResolveEntry.ValidateLeaderEpoch): p.validateLeaderEpoch
// while p validates an offset that is not a seek's, else -1.
func (p *partition) resolveValidateLeaderEpoch() int32 {
	if p.state != AwaitValidation || p.seek {
		return -1
	}
	return p.validateLeaderEpoch
}

// needsResolve reports whether the partition waits for a lookup that can
// be sent now.
func (p *partition) needsResolve(c *coordinator) bool {
	return (p.state == AwaitReset || p.state == AwaitValidation) && p.op == opNone && !p.waitZombie &&
		!p.revoking && !p.retryAt.After(c.now)
}

// backoff schedules the partition's next attempt after a failure.
func (p *partition) backoff(c *coordinator) {
	d := c.cfg.retryBackoff << min(p.failures, 6)
	if d > c.cfg.maxRetryBackoff || d <= 0 {
		d = c.cfg.maxRetryBackoff
	}
	p.failures++
	p.retryAt = c.now.Add(d)
	c.retryPending = true
}

// fetcherKey names a fetcher: one of the concurrent fetch requests of
// a broker.
type fetcherKey struct {
	broker int32
	index  int
}

// fetcher is the coordinator's view of one fetcher: at most one request
// in flight, for partitions the broker leads.
type fetcher struct {
	id       int32 // broker
	index    int
	ready    []int    // slots of fetchable partitions it fetches next
	flight   inFlight // the fetch in flight
	reserved int64    // bytes the fetch in flight may return
}

// PartitionStatus is a snapshot of one assigned partition.
type PartitionStatus struct {
	Partition offsetstore.TopicPartition
	State     PartitionState
	// Position is the next offset to fetch in Fetching, -1 otherwise.
	Position int64
	// Committable is the processed watermark, -1 if the partition has
	// no starting position yet.
	Committable int64
	// Committed is the last offset committed in this generation (or
	// found committed at assignment), -1 if none.
	Committed int64
	Paused    bool
	Leader    int32 // -1 unknown
	// LeaderEpoch is the partition's leader epoch as the metadata said,
	// -1 unknown.
	LeaderEpoch   int32
	BufferedBytes int64 // fetched-but-unfinished bytes of this partition
	Err           error // why a Stopped partition stopped
}

func (c *coordinator) snapshot() []PartitionStatus {
	out := make([]PartitionStatus, 0, len(c.index))
	for _, p := range c.slots {
		if p == nil || p.zombie {
			continue
		}
		st := PartitionStatus{Partition: p.tp, State: p.state, Position: -1, Committable: -1, Committed: p.committed,
			Paused: p.paused, Leader: p.leader, LeaderEpoch: p.leaderEpoch, BufferedBytes: p.outBytes, Err: p.stopErr}
		if p.state == Fetching {
			st.Position = p.pos.Offset()
		}
		if off, ok := p.wm.Committable(); ok {
			st.Committable = off
		}
		out = append(out, st)
	}
	return out
}
