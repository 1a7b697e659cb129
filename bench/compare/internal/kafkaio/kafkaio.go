// Package kafkaio is the benchmark's own Kafka client work, done with
// franz-go's kgo and kadm: creating and loading topics, reading an output
// topic in full, and the group and log offsets that tell when a pipeline
// under test is done.
package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// StableOffsets returns the last stable offsets of topic's partitions:
// the end offsets a read_committed reader sees (ListOffsets with
// isolation level read_committed). Below the end offset where a
// transaction is open on the partition.
func (a *Admin) StableOffsets(ctx context.Context, topic string) (Offsets, error) {
	l, err := a.adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("last stable offsets of %s: %w", topic, err)
	}
	out := Offsets{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// OpenTransactions returns, in order, the partitions of end whose last
// stable offset in stable is below their end offset: those with a
// transaction still open, whose records no read_committed reader gets
// yet. None means every record written so far is visible to one.
func OpenTransactions(stable, end Offsets) []int32 {
	var open []int32
	for p, e := range end {
		if stable[p] < e {
			open = append(open, p)
		}
	}
	slices.Sort(open)
	return open
}

// Isolation is what a reader of a topic gets of its transactions.
type Isolation int

// The isolation levels.
const (
	// ReadUncommitted gets every data record, those of open and
	// aborted transactions included.
	ReadUncommitted Isolation = iota
	// ReadCommitted gets the records of committed transactions and
	// those written outside transactions, as a read_committed consumer
	// (the users of an exactly-once pipeline) does.
	ReadCommitted
)

// ReadAll reads topic from its start to the end offsets it has when
// ReadAll starts, calling fn for each data record, without a group. It
// fails if the end is not reached within timeout.
//
// With ReadCommitted it first waits until no partition has an open
// transaction (last stable offset = end offset), so that every record
// written has its fate decided, and fails if one stays open for the
// whole timeout.
//
// Where the read ends: a transactional topic holds control records (a
// commit or abort marker after every transaction's records on each
// partition), which a consumer does not hand out by default, and a
// read_committed one also drops the records of aborted transactions. So
// the last offset of a partition may be one no record of the read ever
// has, and "read until a record's offset + 1 reaches the end offset"
// would never finish. ReadAll keeps control records
// (kgo.KeepControlRecords, which returns them whatever the isolation
// level) and gives fn only the data records. Once no transaction is
// open, the last offset of every partition is either a marker or a
// record written outside a transaction, and the read returns both, so
// it ends exactly at the end offset, with no quiet period to guess.
func ReadAll(ctx context.Context, addrs []string, topic string, iso Isolation, timeout time.Duration, fn func(*kgo.Record)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	adm, err := NewAdmin(addrs)
	if err != nil {
		return err
	}
	end, err := adm.settledEnd(ctx, topic, iso)
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
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start})}
	if iso == ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	rp := newReadProgress(end)
	for !rp.done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("read %s: got to %v of %v: %w", topic, rp.next, end, ctx.Err())
		}
		var errs []error
		fs.EachError(func(t string, p int32, err error) { errs = append(errs, fmt.Errorf("%s/%d: %w", t, p, err)) })
		if len(errs) > 0 {
			return fmt.Errorf("read %s: %w", topic, errors.Join(errs...))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if rp.see(r.Partition, r.Offset, r.Attrs.IsControl()) {
				fn(r)
			}
		})
	}
	return nil
}

// settledEnd returns topic's end offsets; with ReadCommitted, once no
// partition has an open transaction (polled until ctx ends).
func (a *Admin) settledEnd(ctx context.Context, topic string, iso Isolation) (Offsets, error) {
	for {
		end, err := a.EndOffsets(ctx, topic)
		if err != nil || iso != ReadCommitted {
			return end, err
		}
		stable, err := a.StableOffsets(ctx, topic)
		if err != nil {
			return nil, err
		}
		open := OpenTransactions(stable, end)
		if len(open) == 0 {
			return end, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("read %s: partitions %v still have an open transaction (last stable offsets %v, end offsets %v): "+
				"a writer neither committed nor aborted it, and the broker has not timed it out: %w", topic, open, stable, end, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readProgress is how far a read of a topic has come against the end
// offsets it reads to.
type readProgress struct {
	end, next Offsets
}

func newReadProgress(end Offsets) *readProgress {
	return &readProgress{end: end, next: Offsets{}}
}

// see notes that the read got offset of partition, a control record
// (a transaction marker) or not, and reports whether it is a data
// record within the end offsets, one to hand on.
func (rp *readProgress) see(partition int32, offset int64, control bool) bool {
	rp.next[partition] = max(rp.next[partition], offset+1)
	return !control && offset < rp.end[partition]
}

// done reports whether the read has got every offset below the end
// offsets.
func (rp *readProgress) done() bool { return rp.next.Reached(rp.end) }

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
