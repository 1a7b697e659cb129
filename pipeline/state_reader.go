package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// changelogReader reads changelog partitions for restores through a
// read_committed fetcher of its own: an aborted transaction's changes
// never reach a store, and a restore ends at the last stable offset.
// Restores of several partitions run at once (one per process worker),
// each on a fetch stream it takes from the idle ones.
type changelogReader struct {
	fetcher  *fetch.Fetcher
	meta     *fetch.Metadata
	maxBytes int32

	mu      sync.Mutex
	leaders *fetch.Leaders
	idle    map[int32][]*fetch.Stream
}

func (r *changelogReader) route(ctx context.Context, tp offsetstore.TopicPartition, refresh bool) (int32, int32) {
	r.mu.Lock()
	l := r.leaders
	r.mu.Unlock()
	if l == nil || refresh || l.Err != nil {
		l = r.meta.Leaders(ctx, refresh)
		r.mu.Lock()
		r.leaders = l
		r.mu.Unlock()
	}
	leader, ok := l.Leaders[tp]
	if !ok {
		return -1, -1
	}
	epoch, ok := l.LeaderEpochs[tp]
	if !ok {
		epoch = -1
	}
	return leader, epoch
}

func (r *changelogReader) stream(broker int32) *fetch.Stream {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.idle[broker]; len(s) > 0 {
		st := s[len(s)-1]
		r.idle[broker] = s[:len(s)-1]
		return st
	}
	return r.fetcher.Stream(broker)
}

func (r *changelogReader) done(broker int32, s *fetch.Stream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.idle[broker] = append(r.idle[broker], s)
}

// Read implements state.Reader.
func (r *changelogReader) Read(ctx context.Context, topic string, partition int32, offset int64) (state.Chunk, error) {
	tp := offsetstore.TopicPartition{Topic: topic, Partition: partition}
	for refresh := false; ; refresh = true {
		leader, epoch := r.route(ctx, tp, refresh)
		if leader < 0 {
			if refresh {
				return state.Chunk{}, stages.Unavailable(fmt.Errorf("changelog partition %s has no leader now", tp))
			}
			continue
		}
		pos, err := offsets.NewPosition(offset, 0, offsets.NoGeneration)
		if err != nil {
			return state.Chunk{}, err
		}
		req := offsets.NewFetchRequest(leader, 0, offsets.NoGeneration, r.maxBytes,
			[]offsets.FetchEntry{{Partition: tp, Position: pos, LeaderEpoch: epoch}})
		s := r.stream(leader)
		res := s.Fetch(ctx, req)
		r.done(leader, s)
		c, err := changelogChunk(tp, offset, res.Partitions[0])
		if errors.Is(err, errChangelogNotLeader) && !refresh {
			continue // route it again
		}
		return c, err
	}
}

// changelogMaxWait is how long a broker may hold a changelog or table
// read that finds nothing new: the least a fetch can ask for.
const changelogMaxWait = time.Millisecond

// changelogReadCommitted is the isolation of the fetcher restores read
// changelogs with: read_committed, so the records of aborted and open
// transactions never reach a store.
const changelogReadCommitted = true

// errChangelogNotLeader: the broker asked does not lead the changelog
// partition (Read routes it again once).
var errChangelogNotLeader = errors.New("not the changelog partition's leader")

// changelogChunk turns the answer of a read_committed fetch of a
// changelog partition at offset into what a restore reads: the committed
// records, where to read next, and the last stable offset as the
// restore's end (never the high watermark: records above the last stable
// offset may belong to a transaction that aborts).
func changelogChunk(tp offsetstore.TopicPartition, offset int64, pr fetch.PartitionResult) (state.Chunk, error) {
	c := state.Chunk{Next: pr.Next, End: pr.LastStable, HighWatermark: max(pr.HighWatermark, 0), LogStart: pr.LogStart}
	switch pr.Outcome {
	case fetch.OK, fetch.Corrupt:
		if pr.Batch != nil {
			c.Records = pr.Batch.Records()
		}
		if pr.Outcome == fetch.Corrupt && pr.Batch == nil {
			return c, fmt.Errorf("changelog partition %s at offset %d: %w", tp, offset, pr.Err)
		}
		if c.End < 0 {
			return c, stages.Unavailable(fmt.Errorf("changelog partition %s: the broker did not say its last stable offset", tp))
		}
		return c, nil
	case fetch.OffsetOutOfRange:
		return c, fmt.Errorf("changelog partition %s at offset %d: %w", tp, offset, state.ErrOutOfRange)
	case fetch.NotLeader:
		return c, stages.Unavailable(fmt.Errorf("changelog partition %s: %w: %w", tp, errChangelogNotLeader, pr.Err))
	default:
		return c, stages.Unavailable(fmt.Errorf("changelog partition %s: %w", tp, pr.Err))
	}
}

// changelogWriter writes changes through a producer: the run's
// transactional one under exactly_once, an idempotent one of its own
// otherwise.
type changelogWriter struct {
	write func(ctx context.Context, topic string, partition int32, recs []stages.Record) (int64, error)
}

func (w changelogWriter) Write(ctx context.Context, topic string, partition int32, recs []stages.Record) (int64, error) {
	return w.write(ctx, topic, partition, recs)
}

// close closes the idle streams (every restore has returned).
func (r *changelogReader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for b, ss := range r.idle {
		for _, s := range ss {
			s.Close()
		}
		delete(r.idle, b)
	}
}
