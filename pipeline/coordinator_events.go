package pipeline

import (
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/commit"
	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/internal/engine/resolve"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// event is what the coordinator receives. The set is closed: the types
// below are every event there is, so handle's switch lists all of them
// and nothing else can arrive.
type event interface{ coordinatorEvent() }

// Results of the pipeline's steps, each a distinct event.
type (
	fetchedEvent   struct{ r *fetch.Result }   // a fetch answered
	leadersEvent   struct{ l *fetch.Leaders }  // partition leaders refreshed
	resolvedEvent  struct{ r *resolve.Result } // a lookup answered
	processedEvent struct{ r *process.Report } // batches finished processing
	committedEvent struct{ r *commit.Result }  // a commit answered
)

func (fetchedEvent) coordinatorEvent()   {}
func (leadersEvent) coordinatorEvent()   {}
func (resolvedEvent) coordinatorEvent()  {}
func (processedEvent) coordinatorEvent() {}
func (committedEvent) coordinatorEvent() {}
func (*assignEvent) coordinatorEvent()   {}
func (*revokeEvent) coordinatorEvent()   {}
func (*seekEvent) coordinatorEvent()     {}
func (*pauseEvent) coordinatorEvent()    {}
func (*flushEvent) coordinatorEvent()    {}
func (*statsEvent) coordinatorEvent()    {}
func (tickEvent) coordinatorEvent()      {}
func (txnFailedEvent) coordinatorEvent() {}

// The coordinator's input events that do not come from a step.

// assignedPartition is one partition of a new generation with where it
// should start: offsetstore.Committed(n) if the group has an offset for
// it, the zero request (the reset policy) if not.
type assignedPartition struct {
	tp    offsetstore.TopicPartition
	start offsetstore.StartRequest
	// recreated: the topic was deleted and created again, so the start
	// is the reset policy and its reset says topic_recreated.
	recreated bool
}

// assignEvent starts a generation and the store that commits offsets
// under it. Its partitions are the member's assignment: those it did not
// own start (from their committed offset, or the reset policy); those it
// already owns (kept by a cooperative rebalance) go on where they are,
// under the new generation. A partition owned and not listed stays until
// a revoke names it.
type assignEvent struct {
	gen        offsets.Generation
	store      offsets.CommitStore
	partitions []assignedPartition
}

// revokeEvent takes partitions away: stop fetching them, finish or drop
// their in-flight work, commit, then reply on done (buffered) and forget
// them. partitions nil means every partition, which ends the generation
// (eager rebalancing, shutdown); otherwise the others keep going
// (cooperative rebalancing). After drainBy the coordinator stops waiting
// for processing and commits what is done; at deadline it replies
// whatever the state. lost means the group already gave the partitions
// to another member: nothing is drained or committed.
type revokeEvent struct {
	gen        offsets.Generation
	partitions []offsetstore.TopicPartition
	lost       bool
	drainBy    time.Time
	deadline   time.Time
	done       chan error
	// drainMissed: work was still in flight at drainBy, so the commit
	// covers only what finished. The coordinator sets it before it
	// replies on done; the sender reads it once it has the reply.
	drainMissed bool
}

// seekEvent replaces a partition's position with a start request.
type seekEvent struct {
	tp   offsetstore.TopicPartition
	req  offsetstore.StartRequest
	done chan error
}

// pauseEvent pauses or resumes fetching partitions.
type pauseEvent struct {
	tps   []offsetstore.TopicPartition
	pause bool
	done  chan error
}

// flushEvent asks for a commit of everything committable now; done gets
// the commit's result.
type flushEvent struct {
	done chan error
}

// statsEvent asks for a snapshot of the partitions.
type statsEvent struct {
	done chan []PartitionStatus
}

// tickEvent advances the coordinator's clock: retries, commit interval,
// revoke deadlines. The run loop sends it from a ticker; tests send it
// directly.
type tickEvent struct{ now time.Time }

// txnFailedEvent is the transactional producer's report that its open
// transaction must be aborted (a write failed), or, fatal, that it failed
// for good (fenced by another instance with the same transactional id).
type txnFailedEvent struct {
	err   error
	fatal bool
}
