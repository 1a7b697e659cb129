//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// idValue is the value (and key) of the record with sequence number n.
func idValue(n int64) []byte { return fmt.Appendf(nil, "id-%09d", n) }

// parseID is the inverse of idValue.
func parseID(v []byte) (int64, bool) {
	s, ok := strings.CutPrefix(string(v), "id-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// inputRecord returns the key and value of the input record with id n:
// the id for both; with -state the key is keyValue; with -window the
// value is JSON, the id and a user (windowInput).
func inputRecord(o options) func(n int64) (key, value []byte) {
	switch {
	case o.window:
		return windowInput(o.keys)
	case o.state:
		return func(n int64) ([]byte, []byte) { return keyValue(n, o.keys), idValue(n) }
	}
	return func(n int64) ([]byte, []byte) { v := idValue(n); return v, v }
}

// produceAtRate writes records with ids 0, 1, 2, ... to topic at rate
// records per second until ctx ends, then waits for every write to be
// acknowledged. rec gives the key and value of each id (inputRecord). It
// returns how many records were written (ids 0..n-1); any failed write
// is an error, so no id in that range is missing from the topic.
// written, if set, learns the partition of each id its value names
// (parseID).
func produceAtRate(ctx context.Context, cl *kgo.Client, topic string, rate int, rec func(n int64) (key, value []byte), written func(id int64, partition int32)) (int64, error) {
	var (
		mu       sync.Mutex
		firstErr error
		n        int64
	)
	failed := func(r *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
			return
		}
		if written != nil {
			if id, ok := parseID(r.Value); ok {
				written(id, r.Partition)
			}
		}
	}
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		// The default partitioner hashes the key: keyed by id, ids
		// spread evenly over the partitions; keyed by keyValue, every
		// record of a key is in the key's partition.
		for due := int64(time.Since(start).Seconds() * float64(rate)); n < due && ctx.Err() == nil; n++ {
			k, v := rec(n)
			// Not ctx: records still buffered when it ends must not fail.
			cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: k, Value: v}, failed)
		}
	}
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		return n, fmt.Errorf("flushing the producer: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return n, fmt.Errorf("producing to %q: %w", topic, firstErr)
	}
	return n, nil
}

// tally is what the reader saw in the output topic.
type tally struct {
	mu      sync.Mutex
	count   []uint32        // times each id was seen
	at      []int64         // where each id was first seen: partition<<48 | offset
	dupsAt  []string        // the first duplicates: the id, where each copy is
	records int64           // every record read
	unknown int64           // records whose value is not an id
	pos     map[int32]int64 // next offset to read, per partition
	byPhase map[int64]int64 // duplicate copies, by the phase they were seen in
	phase   *atomic.Int64   // the current phase: restarts so far; restarts+1 once stopping
	// the input partition each id was produced to (-1 not yet known),
	// and, per input partition, when the reader first saw each of its
	// ids: when they were processed, within the reader's poll latency
	inPartition  []int32
	seenAt       map[int32][]time.Time
	early        map[int64]time.Time // ids seen before their partition was known
	lastRecordAt time.Time           // when the reader last saw a record
	keyed        *keyTally           // -state: the counts the outputs carry
}

func newTally(phase *atomic.Int64) *tally {
	return &tally{pos: map[int32]int64{}, byPhase: map[int64]int64{}, phase: phase,
		seenAt: map[int32][]time.Time{}, early: map[int64]time.Time{}}
}

// producedTo records that id was written to the input partition p.
func (t *tally) producedTo(id int64, p int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for int64(len(t.inPartition)) <= id {
		t.inPartition = append(t.inPartition, -1)
	}
	t.inPartition[id] = p
	if at, ok := t.early[id]; ok {
		delete(t.early, id)
		t.seenAt[p] = append(t.seenAt[p], at)
	}
}

// firstSeen notes when id was first seen in the output (t.mu held).
func (t *tally) firstSeen(id int64, at time.Time) {
	if id < int64(len(t.inPartition)) && t.inPartition[id] >= 0 {
		p := t.inPartition[id]
		t.seenAt[p] = append(t.seenAt[p], at)
		return
	}
	t.early[id] = at
}

// everyPartitionSeen reports whether records of every input partition
// reached the output.
func (t *tally) everyPartitionSeen(partitions int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p := int32(0); p < partitions; p++ {
		if len(t.seenAt[p]) == 0 {
			return false
		}
	}
	return true
}

// stalls returns, per input partition, the total of the gaps of at least
// after between records of it processed (as the reader saw them), and
// the longest gap of all.
func (t *tally) stalls(partitions int32, after time.Duration) (perPartition []time.Duration, longest time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stallsLocked(partitions, after)
}

// stallsLocked is stalls with t.mu held.
func (t *tally) stallsLocked(partitions int32, after time.Duration) (perPartition []time.Duration, longest time.Duration) {
	for p := int32(0); p < partitions; p++ {
		ts := slices.SortedFunc(slices.Values(t.seenAt[p]), func(a, b time.Time) int { return a.Compare(b) })
		var total time.Duration
		for i := 1; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap >= after {
				total += gap
				longest = max(longest, gap)
			}
		}
		perPartition = append(perPartition, total)
	}
	return perPartition, longest
}

// window is a stretch of the run in which the gaps are measured.
type window struct{ from, to time.Time }

// windowStall is what a window's gaps of one input partition add up to.
type windowStall struct {
	total   time.Duration // the parts of the gaps of at least `after` inside the window
	longest time.Duration // the longest such gap overlapping the window, whole
	endedAt time.Time     // when the longest ended (zero: no gap)
}

// stallsIn measures, in w, the gaps of at least after between
// consecutive times of ts (sorted): the total of their parts inside w,
// and the longest gap overlapping w, whole (a pause that began just
// before a restart is that restart's) with when it ended.
func stallsIn(ts []time.Time, after time.Duration, w window) windowStall {
	var s windowStall
	for i := 1; i < len(ts); i++ {
		a, b := ts[i-1], ts[i]
		gap := b.Sub(a)
		if gap < after || !b.After(w.from) || !a.Before(w.to) {
			continue
		}
		from, to := a, b
		if from.Before(w.from) {
			from = w.from
		}
		if to.After(w.to) {
			to = w.to
		}
		s.total += to.Sub(from)
		if gap > s.longest {
			s.longest, s.endedAt = gap, b
		}
	}
	return s
}

// windowStallsLocked is stallsIn for every input partition, with t.mu
// held.
func (t *tally) windowStallsLocked(partitions int32, after time.Duration, w window) []windowStall {
	out := make([]windowStall, partitions)
	for p := int32(0); p < partitions; p++ {
		ts := slices.SortedFunc(slices.Values(t.seenAt[p]), func(a, b time.Time) int { return a.Compare(b) })
		out[p] = stallsIn(ts, after, w)
	}
	return out
}

// read consumes every partition of topic from the start, with no group,
// until ctx ends.
func (t *tally) read(ctx context.Context, cl *kgo.Client) error {
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var err error
		fs.EachError(func(topic string, p int32, e error) { err = fmt.Errorf("reading %s/%d: %w", topic, p, e) })
		if err != nil {
			return err
		}
		t.mu.Lock()
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			t.lastRecordAt = now
			t.records++
			t.pos[r.Partition] = r.Offset + 1
			id, ok := t.parseOutput(r)
			if !ok {
				t.unknown++
				return
			}
			for int64(len(t.count)) <= id {
				t.count = append(t.count, make([]uint32, len(t.count)+1024)...)
			}
			for int64(len(t.at)) <= id {
				t.at = append(t.at, make([]int64, len(t.at)+1024)...)
			}
			t.count[id]++
			if t.count[id] > 1 {
				t.byPhase[t.phase.Load()]++
				if len(t.dupsAt) < 10 {
					first := t.at[id]
					t.dupsAt = append(t.dupsAt, fmt.Sprintf("id %d at %s/%d@%d and %s/%d@%d",
						id, r.Topic, first>>48, first&(1<<48-1), r.Topic, r.Partition, r.Offset))
				}
			} else {
				t.at[id] = int64(r.Partition)<<48 | r.Offset
				t.firstSeen(id, now)
			}
		})
		t.mu.Unlock()
	}
}

// quiet reports whether the reader has seen no record for d. Read
// read_committed, a partition ends with transaction markers (and maybe
// aborted records) the reader never sees, so its end offsets cannot be
// compared: once every writer stopped, a quiet reader is at the end.
func (t *tally) quiet(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Since(t.lastRecordAt) > d
}

// reached reports whether the reader got to ends (the end offsets of the
// topic) on every partition.
func (t *tally) reached(ends kadm.ListedOffsets) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 && t.pos[o.Partition] < o.Offset {
			ok = false
		}
	})
	return ok
}

// caughtUp reports whether group's committed offsets equal the end
// offsets of topic on every partition, and the committed lag if not,
// with the lagging partitions ("3: 1200/1450", committed/end).
func caughtUp(ctx context.Context, adm *kadm.Client, group, topic string) (bool, int64, []string, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false, 0, nil, err
	}
	if err := ends.Error(); err != nil {
		return false, 0, nil, err
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false, 0, nil, err
	}
	var lag int64
	var lagging []string
	ends.Each(func(e kadm.ListedOffset) {
		at := int64(0)
		if o, ok := offs.Lookup(topic, e.Partition); ok && o.At > 0 {
			at = o.At
		}
		if e.Offset > at {
			lag += e.Offset - at
			lagging = append(lagging, fmt.Sprintf("%d: %d/%d", e.Partition, at, e.Offset))
		}
	})
	slices.Sort(lagging)
	return lag == 0, lag, lagging, nil
}

// endOffsets sums the end offsets of topic and returns them.
func endOffsets(ctx context.Context, adm *kadm.Client, topic string) (kadm.ListedOffsets, int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, 0, fmt.Errorf("end offsets of %q: %w", topic, err)
	}
	var sum int64
	ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return ends, sum, nil
}

// stable reports whether topic has no open transaction: its last stable
// offsets equal its end offsets on every partition. A killed instance's
// open transaction holds the last stable offset back (and read_committed
// readers with it) until its new incarnation fences it or the broker
// aborts it at transaction_timeout.
func stable(ctx context.Context, adm *kadm.Client, topic string) (bool, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return false, fmt.Errorf("end offsets of %q: %w", topic, err)
	}
	lsos, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = lsos.Error()
	}
	if err != nil {
		return false, fmt.Errorf("last stable offsets of %q: %w", topic, err)
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		if l, found := lsos.Lookup(topic, o.Partition); !found || l.Offset != o.Offset {
			ok = false
		}
	})
	return ok, nil
}

// countRecords reads topic from the start at the given isolation level
// and returns how many records it holds, once no record came for
// quietFor (every writer has stopped). Read uncommitted, a topic written
// transactionally holds the records of aborted transactions too.
func countRecords(ctx context.Context, addrs []string, topic string, isolation kgo.IsolationLevel, quietFor time.Duration) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var n int64
	for {
		pctx, pcancel := context.WithTimeout(ctx, quietFor)
		fs := cl.PollFetches(pctx)
		quiet := pctx.Err() != nil
		pcancel()
		if ctx.Err() != nil {
			return n, fmt.Errorf("counting the records of %q: no quiet %v within a minute: %w", topic, quietFor, ctx.Err())
		}
		var ferr error
		fs.EachError(func(t string, p int32, e error) {
			if !errors.Is(e, context.DeadlineExceeded) && !errors.Is(e, context.Canceled) {
				ferr = fmt.Errorf("counting the records of %s/%d: %w", t, p, e)
			}
		})
		if ferr != nil {
			return n, ferr
		}
		got := fs.NumRecords()
		n += int64(got)
		if got == 0 && quiet {
			return n, nil
		}
	}
}

// readTo reads topic from the start at isolation until it reached ends
// on every partition, and calls fn with every record, in offset order per
// partition. Control records are kept (fn sees them: r.Attrs.IsControl),
// so that the positions pass the transaction markers a partition may end
// with.
func readTo(ctx context.Context, addrs []string, topic string, isolation kgo.IsolationLevel, ends kadm.ListedOffsets, fn func(*kgo.Record)) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pos := map[int32]int64{}
	reached := func() bool {
		ok := true
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > 0 && pos[o.Partition] < o.Offset {
				ok = false
			}
		})
		return ok
	}
	for !reached() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("reading %q: not at its end offsets within a minute (at %v): %w", topic, pos, ctx.Err())
		}
		var ferr error
		fs.EachError(func(t string, p int32, e error) { ferr = fmt.Errorf("reading %s/%d: %w", t, p, e) })
		if ferr != nil {
			return ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			fn(r)
		})
	}
	return nil
}
