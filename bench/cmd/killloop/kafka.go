//go:build unix

package main

import (
	"context"
	"fmt"
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

// produceAtRate writes records with ids 0, 1, 2, ... to topic at rate
// records per second until ctx ends, then waits for every write to be
// acknowledged. It returns how many records were written (ids 0..n-1);
// any failed write is an error, so no id in that range is missing from
// the topic.
func produceAtRate(ctx context.Context, cl *kgo.Client, topic string, rate int) (int64, error) {
	var (
		mu       sync.Mutex
		firstErr error
		n        int64
	)
	failed := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
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
		// The key is the id too: the default partitioner hashes it, so
		// ids spread evenly over the partitions.
		for due := int64(time.Since(start).Seconds() * float64(rate)); n < due && ctx.Err() == nil; n++ {
			v := idValue(n)
			// Not ctx: records still buffered when it ends must not fail.
			cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: v, Value: v}, failed)
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
	records int64           // every record read
	unknown int64           // records whose value is not an id
	pos     map[int32]int64 // next offset to read, per partition
	byPhase map[int64]int64 // duplicate copies, by the phase they were seen in
	phase   *atomic.Int64   // the current phase: kills so far; kills+1 once stopping
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
		fs.EachRecord(func(r *kgo.Record) {
			t.records++
			t.pos[r.Partition] = r.Offset + 1
			id, ok := parseID(r.Value)
			if !ok {
				t.unknown++
				return
			}
			for int64(len(t.count)) <= id {
				t.count = append(t.count, make([]uint32, len(t.count)+1024)...)
			}
			t.count[id]++
			if t.count[id] > 1 {
				t.byPhase[t.phase.Load()]++
			}
		})
		t.mu.Unlock()
	}
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
// offsets of topic on every partition, and the committed lag if not.
func caughtUp(ctx context.Context, adm *kadm.Client, group, topic string) (bool, int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false, 0, err
	}
	if err := ends.Error(); err != nil {
		return false, 0, err
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false, 0, err
	}
	var lag int64
	ends.Each(func(e kadm.ListedOffset) {
		at := int64(0)
		if o, ok := offs.Lookup(topic, e.Partition); ok && o.At > 0 {
			at = o.At
		}
		lag += max(e.Offset-at, 0)
	})
	return lag == 0, lag, nil
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
