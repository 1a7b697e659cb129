package kafkaclient

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
)

// Bounds are the log start and end (high watermark, or last stable offset
// for a read_committed consumer) of a set of topics.
type Bounds struct{ Starts, Ends kadm.ListedOffsets }

// ReadBounds lists the log bounds of topics; a topic that does not
// exist is a failure (clibase.Failed) naming it. With readCommitted the
// end is the last stable offset (ListOffsets with isolation level
// READ_COMMITTED): what a read_committed consumer can read, so its lag is
// measured against it.
func ReadBounds(ctx context.Context, adm *kadm.Client, topics []string, readCommitted bool) (Bounds, error) {
	var b Bounds
	var err error
	if b.Starts, err = adm.ListStartOffsets(ctx, topics...); err == nil {
		err = b.Starts.Error()
	}
	if err == nil {
		list := adm.ListEndOffsets
		if readCommitted {
			list = adm.ListCommittedOffsets
		}
		if b.Ends, err = list(ctx, topics...); err == nil {
			err = b.Ends.Error()
		}
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		var missing []string
		for t, ps := range b.Starts {
			for _, o := range ps {
				if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
					missing = append(missing, strconv.Quote(t))
					break
				}
			}
		}
		slices.Sort(missing)
		if len(missing) == 0 {
			missing = []string{strings.Join(topics, ", ")}
		}
		return b, clibase.Failure("topic %s does not exist (check the name; 'processor topics list' lists the topics, 'processor topics create' creates one)", strings.Join(missing, ", "))
	}
	if err != nil {
		return b, err
	}
	for _, t := range topics {
		if len(b.Ends[t]) == 0 {
			return b, clibase.Failure("topic %q does not exist (check the name; 'processor topics list' lists the topics, 'processor topics create' creates one)", t)
		}
	}
	return b, nil
}

// Partitions returns the partitions of topic in want, or all of topic's
// if want is empty; sorted, without repeats.
func (b Bounds) Partitions(topic string, want []int32) []int32 {
	parts := slices.Clone(want)
	if len(parts) == 0 {
		for p := range b.Ends[topic] {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	return slices.Compact(parts)
}

// TimeOffset returns, from the answer at of ListAfter, the offset of the
// first record of topic's partition p at or after the time, or its high
// watermark if there is none.
func (b Bounds) TimeOffset(at kadm.ListedOffsets, topic string, p int32) int64 {
	if l, ok := at.Lookup(topic, p); ok && l.Offset >= 0 {
		return l.Offset
	}
	end, _ := b.Ends.Lookup(topic, p)
	return end.Offset
}

// ListAfter lists, for every partition of topics, the first record at or
// after t.
func ListAfter(ctx context.Context, adm *kadm.Client, t time.Time, topics ...string) (kadm.ListedOffsets, error) {
	at, err := adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topics...)
	if err == nil {
		err = at.Error()
	}
	return at, err
}
