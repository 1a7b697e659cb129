package fetch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// TestFetchLeaderEpochs: a fetch carries the metadata's leader epoch
// (KIP-320): the current one is answered, with the leader epoch of the
// last batch read; an older one is FENCED_LEADER_EPOCH (NotLeader:
// refresh the metadata); a newer one is UNKNOWN_LEADER_EPOCH (Retriable).
func TestFetchLeaderEpochs(t *testing.T) {
	c := kafkatest.New(t, 2)
	c.CreateTopic(t, "le", 1)
	value := func(i int) []byte { return []byte{byte(i)} }
	c.Produce(t, "le", 0, 3, value) // offsets 0..2
	first := c.LeaderEpoch(t, "le", 0)
	c.MoveLeader(t, "le", 0, 1)
	c.MoveLeader(t, "le", 0, 0)
	cur := c.LeaderEpoch(t, "le", 0)
	if cur <= first {
		t.Fatalf("leader epoch %d after two moves, was %d", cur, first)
	}
	c.Produce(t, "le", 0, 2, value) // offsets 3..4, in the new leader epoch
	f := newStream(t, c, fetch.Config{MaxWait: 50 * time.Millisecond})
	tp := offsetstore.TopicPartition{Topic: "le", Partition: 0}
	fetchAt := func(offset int64, le int32, maxBytes int32) fetch.PartitionResult {
		pos, _ := offsets.NewPosition(offset, 1, 1)
		return f.Fetch(context.Background(), offsets.NewFetchRequest(0, 0, 1, maxBytes,
			[]offsets.FetchEntry{{Partition: tp, Position: pos, LeaderEpoch: le}})).Partitions[0]
	}
	for _, tt := range []struct {
		name     string
		offset   int64
		le       int32
		maxBytes int32
		outcome  fetch.Outcome
		err      error
		last     int32 // LastLeaderEpoch
		next     int64
	}{
		{name: "current leader epoch, all", offset: 0, le: cur, maxBytes: 1 << 20, outcome: fetch.OK, last: cur, next: 5},
		{name: "current leader epoch, first batch only", offset: 0, le: cur, maxBytes: 1, outcome: fetch.OK, last: first, next: 1},
		{name: "no leader epoch is not checked", offset: 3, le: -1, maxBytes: 1 << 20, outcome: fetch.OK, last: cur, next: 5},
		{name: "older leader epoch is fenced", offset: 0, le: cur - 1, maxBytes: 1 << 20, outcome: fetch.NotLeader, err: kerr.FencedLeaderEpoch, last: -1, next: 0},
		{name: "newer leader epoch is unknown", offset: 0, le: cur + 1, maxBytes: 1 << 20, outcome: fetch.Retriable, err: kerr.UnknownLeaderEpoch, last: -1, next: 0},
		{name: "nothing new", offset: 5, le: cur, maxBytes: 1 << 20, outcome: fetch.OK, last: -1, next: 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pr := fetchAt(tt.offset, tt.le, tt.maxBytes)
			if pr.Outcome != tt.outcome || pr.LastLeaderEpoch != tt.last || pr.Next != tt.next {
				t.Fatalf("%v (%v), last leader epoch %d, next %d; want %v, %d, %d", pr.Outcome, pr.Err, pr.LastLeaderEpoch, pr.Next, tt.outcome, tt.last, tt.next)
			}
			if tt.err != nil && !errors.Is(pr.Err, tt.err) {
				t.Fatalf("error %v, want %v", pr.Err, tt.err)
			}
		})
	}
}
