package kafkatools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/cli/kafkaclient"
	"github.com/fencepost-dev/fencepost/internal/state"
)

// changelogFold is a store's changelog partitions read and folded: the
// latest value of each key, with deleted keys (tombstones) gone.
type changelogFold struct {
	// parts are the keys of each partition read, with their values
	// (nil when the values were not kept).
	parts map[int32]map[string][]byte
	// ends are the offsets the partitions were read to: their last
	// stable offsets, unless the read stopped short (a note says so).
	ends  map[int32]int64
	order []int32
}

// foldChangelog reads the changelog of store, partitions parts (every
// partition when nil), read_committed from the log start to the last
// stable offset as it is when the read starts, and folds it, keeping the
// keys match accepts, and their values if values is set. A record of an
// aborted transaction is never read, and one of a transaction still open
// lies beyond the last stable offset: the fold is what a restore would
// load.
func (c *cli) foldChangelog(ctx context.Context, o *stateOptions, store string, parts []int32, match func(key []byte) bool, values bool) (changelogFold, error) {
	k, _, err := o.cluster.settings(c)
	if err != nil {
		return changelogFold{}, err
	}
	topic := state.ChangelogTopic(o.group, store)
	var b kafkaclient.Bounds
	err = o.cluster.withAdminTo(ctx, k, func(ctx context.Context, adm *kadm.Client) error {
		exists, err := topicExists(ctx, adm, topic)
		if err != nil {
			return o.cluster.unreachable(err)
		}
		if !exists {
			return clibase.Failure("changelog topic %q does not exist: group %q has no store %q, or has not run with it yet%s",
				topic, o.group, store, o.declared())
		}
		if b, err = kafkaclient.ReadBounds(ctx, adm, []string{topic}, true); err != nil {
			return o.cluster.unreachable(err)
		}
		return nil
	})
	if err != nil {
		return changelogFold{}, err
	}
	all := b.Partitions(topic, nil)
	if parts == nil {
		parts = all
	}
	for _, p := range parts {
		if !slices.Contains(all, p) {
			return changelogFold{}, clibase.Failure("changelog topic %q has no partition %d (it has %d, one per input partition)", topic, p, len(all))
		}
	}
	f := changelogFold{parts: map[int32]map[string][]byte{}, ends: map[int32]int64{}, order: parts}
	offsets := map[int32]kgo.Offset{}
	pending := map[int32]int64{} // partition: its end, while it is read
	read := map[int32]int64{}    // partition: the offset after the last record read
	for _, p := range parts {
		f.parts[p] = map[string][]byte{}
		start, _ := b.Starts.Lookup(topic, p)
		end, _ := b.Ends.Lookup(topic, p)
		f.ends[p] = end.Offset
		if start.Offset < end.Offset {
			offsets[p] = kgo.NewOffset().At(start.Offset)
			pending[p], read[p] = end.Offset, start.Offset
		}
	}
	if len(pending) == 0 {
		return f, nil
	}
	// Control records (transaction markers) are kept, so that a
	// partition whose last offsets are markers is seen to reach its end.
	cl, err := kafkaclient.NewClient(k, "-state", kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return changelogFold{}, clibase.Failure("%v", err)
	}
	defer cl.Close()
	for len(pending) > 0 {
		pctx, cancel := context.WithTimeout(ctx, o.cluster.timeout)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return changelogFold{}, ctx.Err()
		}
		if err := fetchError(fs); err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				return changelogFold{}, o.cluster.unreachable(err)
			}
			// what is left are aborted records (never returned) or a
			// cluster that does not answer: say how far the fold goes
			var short []string
			for p := range pending {
				f.ends[p] = read[p]
				short = append(short, fmt.Sprintf("%d (read to %d of %d)", p, read[p], pending[p]))
			}
			slices.Sort(short)
			fmt.Fprintf(c.Stderr, "note: nothing more arrived within --timeout %v; partitions folded short of their last stable offset: %s\n",
				o.cluster.timeout, strings.Join(short, ", "))
			return f, nil
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, reading := pending[r.Partition]
			if !reading {
				return
			}
			if r.Offset >= end {
				delete(pending, r.Partition)
				return
			}
			read[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() && match(r.Key) {
				m := f.parts[r.Partition]
				switch {
				case r.Value == nil:
					delete(m, string(r.Key))
				case values:
					m[string(r.Key)] = r.Value
				default:
					m[string(r.Key)] = nil
				}
			}
			if r.Offset+1 >= end {
				delete(pending, r.Partition)
			}
		})
	}
	return f, nil
}

// topicExists says whether topic exists.
func topicExists(ctx context.Context, adm *kadm.Client, topic string) (bool, error) {
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return false, err
	}
	d, ok := td[topic]
	switch {
	case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		return false, nil
	case d.Err != nil:
		return false, fmt.Errorf("topic %q: %w", topic, d.Err)
	}
	return true, nil
}
