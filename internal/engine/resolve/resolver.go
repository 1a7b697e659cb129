// Package resolve is the pipeline's resolve step: it looks up the log
// bounds (log start offset, high watermark) and time offsets of
// partitions with batched ListOffsets requests, for the coordinator to
// turn start requests into positions and to validate committed offsets.
//
// It is internal to the engine: package pipeline wires it, and nothing
// outside this module can import it.
package resolve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/listoffsets"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
)

const (
	earliest = -2 // ListOffsets timestamp for the log start offset
	latest   = -1 // ListOffsets timestamp for the high watermark
)

// Resolver answers ResolveRequests. It is safe for concurrent use.
type Resolver struct {
	client  *kafkawire.Client
	timeout time.Duration
}

// NewResolver returns a Resolver; timeout bounds one lookup (default 10s).
func NewResolver(client *kafkawire.Client, timeout time.Duration) *Resolver {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &Resolver{client: client, timeout: timeout}
}

type key struct {
	topic     string
	partition int32
}

// Resolve looks up every entry of b: log start, high watermark and, for
// AtTime requests, the offset at the time. It returns one result per
// entry, in order; a failed lookup is that entry's Err.
func (r *Resolver) Resolve(ctx context.Context, b offsets.ResolveRequest) *Result {
	res := &Result{Request: b, Partitions: make([]PartitionResult, b.Len())}
	req := &listoffsets.Request{ReplicaID: -1}
	topicIdx := map[string]int{}
	for i := 0; i < b.Len(); i++ {
		e := b.At(i)
		res.Partitions[i] = PartitionResult{LogStart: -1, HighWatermark: -1, TimeOffset: -1}
		ti, ok := topicIdx[e.Partition.Topic]
		if !ok {
			ti = len(req.Topics)
			topicIdx[e.Partition.Topic] = ti
			req.Topics = append(req.Topics, listoffsets.RequestTopic{Topic: e.Partition.Topic})
		}
		parts := &req.Topics[ti].Partitions
		*parts = append(*parts,
			listoffsets.RequestPartition{Partition: e.Partition.Partition, CurrentLeaderEpoch: -1, Timestamp: earliest},
			listoffsets.RequestPartition{Partition: e.Partition.Partition, CurrentLeaderEpoch: -1, Timestamp: latest})
		if t, ok := e.Request.Time(); ok {
			*parts = append(*parts, listoffsets.RequestPartition{Partition: e.Partition.Partition, CurrentLeaderEpoch: -1, Timestamp: t.UnixMilli()})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	m, err := r.client.RoundTrip(ctx, req)
	if err == nil {
		if _, ok := m.(*listoffsets.Response); !ok {
			err = fmt.Errorf("unexpected ListOffsets response %T", m)
		}
	}
	if err != nil {
		for i := range res.Partitions {
			res.Partitions[i].Err = fmt.Errorf("ListOffsets: %w", err)
			res.Partitions[i].NotLeader = notLeader(err)
		}
		return res
	}
	type found struct {
		ls, hw int64
		at     map[int64]int64 // by requested timestamp
		err    error
	}
	got := map[key]*found{}
	for _, t := range m.(*listoffsets.Response).Topics {
		for _, p := range t.Partitions {
			k := key{t.Topic, p.Partition}
			f := got[k]
			if f == nil {
				f = &found{ls: -1, hw: -1}
				got[k] = f
			}
			if p.ErrorCode != 0 {
				f.err = kafka.Error(p.ErrorCode)
				continue
			}
			switch p.Timestamp {
			case earliest:
				f.ls = p.Offset
			case latest:
				f.hw = p.Offset
			default:
				if f.at == nil {
					f.at = map[int64]int64{}
				}
				f.at[p.Timestamp] = p.Offset
			}
		}
	}
	for i := range res.Partitions {
		e := b.At(i)
		f := got[key{e.Partition.Topic, e.Partition.Partition}]
		pr := &res.Partitions[i]
		switch {
		case f == nil:
			pr.Err = errors.New("partition missing from the ListOffsets response")
		case f.err != nil:
			pr.Err = fmt.Errorf("ListOffsets %s: %w", e.Partition, f.err)
			pr.NotLeader = notLeader(f.err)
		case f.ls < 0 || f.hw < f.ls:
			pr.Err = fmt.Errorf("ListOffsets %s: incomplete answer (log start %d, high watermark %d)", e.Partition, f.ls, f.hw)
		default:
			pr.LogStart, pr.HighWatermark = f.ls, f.hw
			if t, ok := e.Request.Time(); ok {
				if at, found := f.at[t.UnixMilli()]; found {
					pr.TimeOffset = at
				}
			}
		}
	}
	return res
}

func notLeader(err error) bool {
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.NotLeaderForPartition, kafka.UnknownTopicOrPartition, kafka.LeaderNotAvailable,
			kafka.FencedLeaderEpoch, kafka.UnknownLeaderEpoch:
			return true
		}
		return false
	}
	var ne net.Error
	return !errors.As(err, &ne)
}
