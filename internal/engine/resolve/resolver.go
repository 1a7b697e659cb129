// Package resolve is the pipeline's resolve step: it looks up the log
// bounds (log start offset, high watermark or, under read_committed, the
// last stable offset) and time offsets of partitions with batched
// ListOffsets requests, and where a leader epoch must be checked, where
// that leader epoch ends on the leader (OffsetForLeaderEpoch), for the
// coordinator to turn start requests into positions and to validate
// offsets.
//
// It is internal to the engine: package pipeline wires it, and nothing
// outside this module can import it.
package resolve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go/protocol/listoffsets"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
)

const (
	earliest = -2 // ListOffsets timestamp for the log start offset
	latest   = -1 // ListOffsets timestamp for the end: high watermark, or the last stable offset read_committed
)

// offsetForLeaderEpochVersion is the OffsetForLeaderEpoch version sent:
// v3 carries CurrentLeaderEpoch and the replica id, is served by every
// Kafka from 2.3 on (like the fetch path's Fetch v11) and by Kafka 4.x
// (whose oldest is v2).
const offsetForLeaderEpochVersion = 3

// Config configures a Resolver.
type Config struct {
	// Timeout bounds one lookup. Default 10s.
	Timeout time.Duration
	// ReadCommitted asks for the last stable offset instead of the high
	// watermark (ListOffsets with isolation level READ_COMMITTED): under
	// read_committed, "latest" is where the records of open
	// transactions start, not past them.
	ReadCommitted bool
	// Dial connects to a broker by node id, for the requests that must go
	// to a partition's leader and that the Client's transport does not
	// route (OffsetForLeaderEpoch). nil: leader epochs are never
	// checked, and every entry's LeaderEpochEndOffset is -1.
	Dial func(ctx context.Context, broker int32) (*kafkawire.Conn, error)
}

// Resolver answers ResolveRequests. It is safe for concurrent use.
type Resolver struct {
	client *kafkawire.Client
	cfg    Config
}

// NewResolver returns a Resolver sending ListOffsets through client.
func NewResolver(client *kafkawire.Client, cfg Config) *Resolver {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &Resolver{client: client, cfg: cfg}
}

type key struct {
	topic     string
	partition int32
}

// Resolve looks up every entry of b: log start, end (high watermark or
// last stable offset) and, for AtTime requests, the offset at the time;
// for entries with a ValidateLeaderEpoch, where that leader epoch ends on
// the leader. Every request carries the entry's LeaderEpoch as CurrentLeaderEpoch. It
// returns one result per entry, in order; a failed lookup is that entry's
// Err.
func (r *Resolver) Resolve(ctx context.Context, b offsets.ResolveRequest) *Result {
	res := &Result{Request: b, Partitions: make([]PartitionResult, b.Len())}
	for i := range res.Partitions {
		res.Partitions[i] = PartitionResult{LogStart: -1, HighWatermark: -1, TimeOffset: -1, LeaderEpochEndOffset: -1, EndLeaderEpoch: -1}
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	r.listOffsets(ctx, b, res)
	r.leaderEpochEnds(ctx, b, res)
	return res
}

// fail records err as entry i's failure, classified.
func fail(pr *PartitionResult, err error) {
	pr.Err = err
	pr.NotLeader = kafkawire.Classify(err) == kafkawire.StaleMetadata
}

func (r *Resolver) listOffsets(ctx context.Context, b offsets.ResolveRequest, res *Result) {
	req := &listoffsets.Request{ReplicaID: -1}
	if r.cfg.ReadCommitted {
		req.IsolationLevel = 1
	}
	topicIdx := map[string]int{}
	for i := 0; i < b.Len(); i++ {
		e := b.At(i)
		ti, ok := topicIdx[e.Partition.Topic]
		if !ok {
			ti = len(req.Topics)
			topicIdx[e.Partition.Topic] = ti
			req.Topics = append(req.Topics, listoffsets.RequestTopic{Topic: e.Partition.Topic})
		}
		parts := &req.Topics[ti].Partitions
		le := e.LeaderEpoch
		*parts = append(*parts,
			listoffsets.RequestPartition{Partition: e.Partition.Partition, CurrentLeaderEpoch: le, Timestamp: earliest},
			listoffsets.RequestPartition{Partition: e.Partition.Partition, CurrentLeaderEpoch: le, Timestamp: latest})
		if t, ok := e.Request.Time(); ok {
			*parts = append(*parts, listoffsets.RequestPartition{Partition: e.Partition.Partition, CurrentLeaderEpoch: le, Timestamp: t.UnixMilli()})
		}
	}
	m, err := r.client.RoundTrip(ctx, req)
	if err == nil {
		if _, ok := m.(*listoffsets.Response); !ok {
			err = fmt.Errorf("unexpected ListOffsets response %T", m)
		}
	}
	if err != nil {
		for i := range res.Partitions {
			fail(&res.Partitions[i], fmt.Errorf("ListOffsets: %w", err))
		}
		return
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
				f.err = kafkawire.CodeError(p.ErrorCode)
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
			fail(pr, fmt.Errorf("ListOffsets %s: %w", e.Partition, f.err))
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
}

// leaderEpochEnds asks each leader, for the entries with a
// ValidateLeaderEpoch that ListOffsets answered, where that leader epoch
// ends in its log (OffsetForLeaderEpoch). kafka-go's protocol package has no
// OffsetForLeaderEpoch, so it is framed with franz-go's kmsg on a
// connection of the resolver's own to the leader, like the fetch path's
// Fetch (see docs/architecture.md).
func (r *Resolver) leaderEpochEnds(ctx context.Context, b offsets.ResolveRequest, res *Result) {
	if r.cfg.Dial == nil {
		return
	}
	byLeader := map[int32][]int{}
	for i := 0; i < b.Len(); i++ {
		if e := b.At(i); e.ValidateLeaderEpoch >= 0 && res.Partitions[i].Err == nil {
			if e.Leader < 0 {
				fail(&res.Partitions[i], fmt.Errorf("OffsetForLeaderEpoch %s: no known leader", e.Partition))
				res.Partitions[i].NotLeader = true
				continue
			}
			byLeader[e.Leader] = append(byLeader[e.Leader], i)
		}
	}
	for leader, idx := range byLeader {
		r.leaderEpochEndsAt(ctx, leader, b, idx, res)
	}
}

func (r *Resolver) leaderEpochEndsAt(ctx context.Context, leader int32, b offsets.ResolveRequest, idx []int, res *Result) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = offsetForLeaderEpochVersion
	req.ReplicaID = -1
	topicIdx := map[string]int{}
	for _, i := range idx {
		e := b.At(i)
		ti, ok := topicIdx[e.Partition.Topic]
		if !ok {
			ti = len(req.Topics)
			topicIdx[e.Partition.Topic] = ti
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = e.Partition.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		p.Partition = e.Partition.Partition
		p.CurrentLeaderEpoch = e.LeaderEpoch
		p.LeaderEpoch = e.ValidateLeaderEpoch
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, p)
	}
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	conn, err := r.cfg.Dial(ctx, leader)
	if err == nil {
		err = conn.Request(ctx, req, resp)
		_ = conn.Close()
	}
	if err != nil {
		for _, i := range idx {
			fail(&res.Partitions[i], fmt.Errorf("OffsetForLeaderEpoch to broker %d: %w", leader, err))
		}
		return
	}
	type answer struct {
		code        int16
		leaderEpoch int32
		end         int64
		found       bool
	}
	got := map[key]answer{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			got[key{t.Topic, p.Partition}] = answer{code: p.ErrorCode, leaderEpoch: p.LeaderEpoch, end: p.EndOffset, found: true}
		}
	}
	for _, i := range idx {
		e := b.At(i)
		pr := &res.Partitions[i]
		a := got[key{e.Partition.Topic, e.Partition.Partition}]
		switch {
		case !a.found:
			pr.Err = fmt.Errorf("OffsetForLeaderEpoch %s: partition missing from the response of broker %d", e.Partition, leader)
		case a.code != 0:
			fail(pr, fmt.Errorf("OffsetForLeaderEpoch %s (leader epoch %d, current %d) to broker %d: %w",
				e.Partition, e.ValidateLeaderEpoch, e.LeaderEpoch, leader, kafkawire.CodeError(a.code)))
		default:
			pr.EndLeaderEpoch, pr.LeaderEpochEndOffset = a.leaderEpoch, a.end
		}
	}
}
