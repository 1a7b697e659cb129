package run

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencepost-dev/fencepost/internal/cli/kafkaclient"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// partitionLag is one assigned partition's lag in records.
type partitionLag struct {
	// processed is the high watermark (the last stable offset under
	// read_committed) minus the processed watermark: what this member
	// has yet to process.
	processed int64
	// committed is the high watermark minus the committed offset (the
	// log start if none): what the group would process again, or for
	// the first time, after a crash.
	committed int64
}

// lagSampler computes the lag of the assigned partitions from the
// pipeline's positions and the brokers' log bounds. The bounds are asked
// for at most once per maxAge (and again when the assignment changes),
// so /metrics and the progress line share them; the positions are
// always current.
type lagSampler struct {
	adm    *kadm.Client
	topics []string
	maxAge time.Duration
	// readCommitted measures lag against the last stable offset: records
	// of open transactions are not readable yet, and aborted ones never.
	readCommitted bool

	mu sync.Mutex // held while asking: one request at a time
	at time.Time
	b  kafkaclient.Bounds
}

// lags returns the lag of every assigned partition of s whose bounds are
// known. It asks the brokers when its bounds are older than maxAge or
// lack a partition of s.
func (l *lagSampler) lags(ctx context.Context, s pipeline.Stats) (map[offsetstore.TopicPartition]partitionLag, error) {
	if len(s.Partitions) == 0 {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.at) >= l.maxAge || !l.covers(s) {
		if err := l.refresh(ctx); err != nil {
			return nil, err
		}
	}
	out := make(map[offsetstore.TopicPartition]partitionLag, len(s.Partitions))
	for _, ps := range s.Partitions {
		end, ok := l.b.Ends.Lookup(ps.Partition.Topic, ps.Partition.Partition)
		if !ok || end.Err != nil {
			continue
		}
		committed := ps.Committed
		if committed < 0 {
			committed = 0
			if st, ok := l.b.Starts.Lookup(ps.Partition.Topic, ps.Partition.Partition); ok && st.Err == nil {
				committed = st.Offset
			}
		}
		processed := ps.Committable
		if processed < 0 {
			processed = committed // no position yet: nothing processed past the commit
		}
		out[ps.Partition] = partitionLag{processed: max(end.Offset-processed, 0), committed: max(end.Offset-committed, 0)}
	}
	return out, nil
}

// covers reports whether the bounds held include every partition of s.
func (l *lagSampler) covers(s pipeline.Stats) bool {
	for _, ps := range s.Partitions {
		if _, ok := l.b.Ends.Lookup(ps.Partition.Topic, ps.Partition.Partition); !ok {
			return false
		}
	}
	return true
}

func (l *lagSampler) refresh(ctx context.Context) error {
	b, err := kafkaclient.ReadBounds(ctx, l.adm, l.topics, l.readCommitted)
	if err != nil {
		return err
	}
	l.b, l.at = b, time.Now()
	return nil
}

// total sums the lag by the processed position.
func total(lags map[offsetstore.TopicPartition]partitionLag) int64 {
	var n int64
	for _, l := range lags {
		n += l.processed
	}
	return n
}
