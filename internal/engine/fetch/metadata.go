package fetch

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/segmentio/kafka-go/protocol/createtopics"
	meta "github.com/segmentio/kafka-go/protocol/metadata"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// Metadata reads the partition leaders (and their leader epochs, from
// Metadata v7 on, which kafka-go's transport negotiates) of the consumed
// topics with one
// Metadata request, and from the same response fills Brokers, the
// addresses the fetch Streams dial: the coordinator groups partitions by
// the leaders the streams will reach.
type Metadata struct {
	client  *kafkawire.Client
	topics  []string
	brokers *Brokers
}

// NewMetadata returns a Metadata for topics that keeps brokers (the
// fetchers' address book) current.
func NewMetadata(client *kafkawire.Client, topics []string, brokers *Brokers) *Metadata {
	return &Metadata{client: client, topics: append([]string(nil), topics...), brokers: brokers}
}

// Leaders returns the current leaders. With refresh it first makes the
// transport reload its metadata from the cluster (after a NotLeader
// answer the cache is stale; waiting for its TTL would stall fetching).
func (m *Metadata) Leaders(ctx context.Context, refresh bool) *Leaders {
	if refresh {
		m.refresh(ctx)
	}
	r, err := m.client.RoundTrip(ctx, &meta.Request{TopicNames: m.topics})
	if err != nil {
		return &Leaders{Err: fmt.Errorf("metadata: %w", err)}
	}
	resp, ok := r.(*meta.Response)
	if !ok {
		return &Leaders{Err: fmt.Errorf("metadata: unexpected response %T", r)}
	}
	if len(resp.Brokers) > 0 {
		addrs := make(map[int32]string, len(resp.Brokers))
		for _, b := range resp.Brokers {
			addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		m.brokers.Set(addrs)
	}
	leaders := make(map[offsetstore.TopicPartition]int32)
	leaderEpochs := make(map[offsetstore.TopicPartition]int32)
	var missing []string
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			missing = append(missing, fmt.Sprintf("%s (%v)", t.Name, kafkawire.CodeError(t.ErrorCode)))
			continue
		}
		for _, p := range t.Partitions {
			leader, leaderEpoch := p.LeaderID, p.LeaderEpoch
			if p.ErrorCode != 0 && p.ErrorCode != kerr.ReplicaNotAvailable.Code {
				leader, leaderEpoch = -1, -1
			}
			tp := offsetstore.TopicPartition{Topic: t.Name, Partition: p.PartitionIndex}
			leaders[tp] = leader
			leaderEpochs[tp] = leaderEpoch
		}
	}
	l := &Leaders{Leaders: leaders, LeaderEpochs: leaderEpochs}
	if len(leaders) == 0 && len(missing) > 0 {
		l.Err = fmt.Errorf("metadata: no partition of %v is available; check the topic names and that the brokers are up", missing)
		l.Leaders, l.LeaderEpochs = nil, nil
	}
	return l
}

// refresh makes the transport reload its cached metadata now. kafka-go's
// Transport refreshes on a timer, and also after every CreateTopics
// request; an empty CreateTopics creates nothing and answers at once, so
// it is the way to ask for a refresh without waiting for the timer.
// If it fails, the timer still refreshes the cache; nothing else to do.
func (m *Metadata) refresh(ctx context.Context) {
	_, _ = m.client.RoundTrip(ctx, &createtopics.Request{})
}
