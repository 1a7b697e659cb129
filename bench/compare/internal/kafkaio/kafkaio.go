// Package kafkaio is the benchmark's own Kafka client work, done with
// franz-go's kgo and kadm: creating and loading topics, reading an output
// topic in full, and the group and log offsets that tell when a pipeline
// under test is done.
package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/events"
)

// Admin is a client for topic and group administration.
type Admin struct {
	cl  *kgo.Client
	adm *kadm.Client
}

// NewAdmin connects to the cluster at addrs (host:port bootstrap list).
func NewAdmin(addrs []string) (*Admin, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return nil, fmt.Errorf("kafka client for %v: %w", addrs, err)
	}
	return &Admin{cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close releases the client.
func (a *Admin) Close() { a.cl.Close() }

// CreateTopic creates topic with the given number of partitions.
func (a *Admin) CreateTopic(ctx context.Context, topic string, partitions int) error {
	resp, err := a.adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// Offsets are per-partition offsets of one topic.
type Offsets map[int32]int64

// Sum adds the offsets up: for end offsets of a topic written from
// offset 0, the number of records.
func (o Offsets) Sum() int64 {
	var n int64
	for _, v := range o {
		n += v
	}
	return n
}

// Reached reports whether o has every partition of target at or past
// target's offset.
func (o Offsets) Reached(target Offsets) bool {
	for p, want := range target {
		if o[p] < want {
			return false
		}
	}
	return true
}

// EndOffsets returns the high watermarks of topic's partitions.
func (a *Admin) EndOffsets(ctx context.Context, topic string) (Offsets, error) {
	l, err := a.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	out := Offsets{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// Committed returns the offsets group has committed for topic (absent
// partitions have none).
func (a *Admin) Committed(ctx context.Context, group, topic string) (Offsets, error) {
	r, err := a.adm.FetchOffsets(ctx, group)
	if err == nil {
		err = r.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("committed offsets of group %s: %w", group, err)
	}
	out := Offsets{}
	r.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

// Assigned returns how many partitions of topic the members of group
// hold, once the group is stable (0 before).
func (a *Admin) Assigned(ctx context.Context, group, topic string) (int, error) {
	gs, err := a.adm.DescribeGroups(ctx, group)
	if err != nil {
		return 0, err
	}
	g := gs[group]
	if g.Err != nil || g.State != "Stable" {
		return 0, g.Err
	}
	return len(g.AssignedPartitions()[topic]), nil
}

// Load writes events 0..n-1 (events.Value, stamped with the time of
// loading) to topic, keyed by user, uncompressed, and returns once all
// are acknowledged. progress, if not nil, is called now and then with
// the number acknowledged so far.
func Load(ctx context.Context, addrs []string, topic string, n int64, progress func(done int64)) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(50_000), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	var acked atomic.Int64
	var firstErr atomic.Pointer[error]
	ts := time.Now().UnixMicro()
	for i := int64(0); i < n; i++ {
		e := events.Make(i, ts)
		r := &kgo.Record{Key: events.Key(e), Value: events.Value(e)}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
			}
			acked.Add(1)
		})
		if progress != nil && i%20_000 == 0 {
			progress(acked.Load())
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("load %s: %w", topic, err)
	}
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("load %s: %w", topic, *p)
	}
	if progress != nil {
		progress(acked.Load())
	}
	return nil
}

// ReadAll reads topic from its start to the end offsets it has when
// ReadAll starts, calling fn for each record, without a group. It fails
// if the end is not reached within timeout.
func ReadAll(ctx context.Context, addrs []string, topic string, timeout time.Duration, fn func(*kgo.Record)) error {
	adm, err := NewAdmin(addrs)
	if err != nil {
		return err
	}
	end, err := adm.EndOffsets(ctx, topic)
	adm.Close()
	if err != nil {
		return err
	}
	start := map[int32]kgo.Offset{}
	for p, o := range end {
		if o > 0 {
			start[p] = kgo.NewOffset().AtStart()
		}
	}
	if len(start) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	next := Offsets{}
	for !next.Reached(end) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("read %s: got to %v of %v: %w", topic, next, end, ctx.Err())
		}
		var errs []error
		fs.EachError(func(t string, p int32, err error) { errs = append(errs, fmt.Errorf("%s/%d: %w", t, p, err)) })
		if len(errs) > 0 {
			return fmt.Errorf("read %s: %w", topic, errors.Join(errs...))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end[r.Partition] {
				fn(r)
			}
			next[r.Partition] = r.Offset + 1
		})
	}
	return nil
}

// DeleteTopics deletes topics (the broker then frees their records).
func (a *Admin) DeleteTopics(ctx context.Context, topics ...string) error {
	resp, err := a.adm.DeleteTopics(ctx, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("delete topics %v: %w", topics, err)
	}
	return nil
}
