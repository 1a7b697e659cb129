package pipeline

import (
	"time"

	"github.com/fencepost-dev/fencepost/offsetstore"
)

// The coordinator's input events that do not come from a stage. Stage
// results arrive as their own types: *fetch.Result, *fetch.Leaders,
// *resolve.Result, *process.Report, *commit.Result.

// assignedPartition is one partition of a new generation with where it
// should start: offsetstore.Committed(n) if the group has an offset for
// it, the zero request (the reset policy) if not.
type assignedPartition struct {
	tp    offsetstore.TopicPartition
	start offsetstore.StartRequest
}

// assignEvent starts a generation with its partitions and the store that
// commits offsets under it.
type assignEvent struct {
	gen        offsetstore.Generation
	store      offsetstore.CommitStore
	partitions []assignedPartition
}

// revokeEvent ends a generation: stop fetching, finish or drop in-flight
// work, commit, then reply on done (buffered) and forget the partitions.
// After drainBy the coordinator stops waiting for processing and commits
// what is done; at deadline it replies whatever the state.
type revokeEvent struct {
	gen      offsetstore.Generation
	drainBy  time.Time
	deadline time.Time
	done     chan error
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
