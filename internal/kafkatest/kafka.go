package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/realkafka"
)

// Kafka is a running cluster, in process (New) or Apache Kafka (FromReal),
// reached through independent clients: what a scenario needs to set up
// topics, produce, delete records, and check committed offsets.
type Kafka struct {
	// Addrs are the bootstrap addresses.
	Addrs []string
	// Client produces; Admin administers.
	Client *kgo.Client
	Admin  *kadm.Client
	// Nodes are the broker ids; CreateTopic puts partition i's leader on
	// Nodes[i mod len(Nodes)].
	Nodes []int32

	prefix      string
	createTopic func(ctx context.Context, topic string, partitions int32) error
	moveLeader  func(ctx context.Context, topic string, partition, to int32) error
	intercept   func(t testing.TB, key int16, fn Interceptor)
}

// Action is what an Interceptor decides for a request: hold it back
// (Delay) before the broker handles it, or drop the client's connection
// instead (Cut). It is the real-Kafka proxies' own type.
type Action = realkafka.Action

// Interceptor sees a request of one key that broker node received; it may
// hold it back or cut the connection.
type Interceptor func(node int32, req kmsg.Request) Action

// Named returns a copy of k whose Name puts prefix before every name, so
// scenarios can share one cluster without meeting each other's topics and
// groups.
func (k *Kafka) Named(prefix string) *Kafka {
	c := *k
	c.prefix = prefix
	return &c
}

// Bootstrap returns the bootstrap addresses.
func (k *Kafka) Bootstrap() []string { return k.Addrs }

// Name returns the cluster-unique name of a topic or group.
func (k *Kafka) Name(s string) string { return k.prefix + s }

// Intercept calls fn for every request of key the brokers receive, until
// the test ends. On kfake it runs in the cluster's control hook; on Apache
// Kafka in the proxy in front of each node.
func (k *Kafka) Intercept(t testing.TB, key kmsg.Key, fn Interceptor) {
	t.Helper()
	k.intercept(t, int16(key), fn)
}

// CreateTopic creates a topic and spreads its partition leaders over the
// brokers round-robin (partition i on broker Nodes[i mod brokers]).
func (k *Kafka) CreateTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	if err := k.CreateTopicE(topic, partitions); err != nil {
		t.Fatal(err)
	}
}

// CreateTopicE is CreateTopic returning its error.
func (k *Kafka) CreateTopicE(topic string, partitions int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return k.createTopic(ctx, topic, partitions)
}

// Leader returns the broker leading a partition, from Metadata.
func (k *Kafka) Leader(t testing.TB, topic string, partition int32) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := k.Admin.Metadata(ctx, topic)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	p, ok := md.Topics[topic].Partitions[partition]
	if !ok || p.Err != nil {
		t.Fatalf("metadata of %s/%d: missing or %v", topic, partition, p.Err)
	}
	return p.Leader
}

// LeaderEpoch returns a partition's leader epoch, from Metadata.
func (k *Kafka) LeaderEpoch(t testing.TB, topic string, partition int32) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := k.Admin.Metadata(ctx, topic)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	p, ok := md.Topics[topic].Partitions[partition]
	if !ok || p.Err != nil {
		t.Fatalf("metadata of %s/%d: missing or %v", topic, partition, p.Err)
	}
	return p.LeaderEpoch
}

// MoveLeader makes broker to the leader of a partition and waits until
// Metadata says so. On Apache Kafka it reorders the partition's replicas
// (AlterPartitionAssignments) and elects the preferred one (ElectLeaders):
// to must hold a replica.
func (k *Kafka) MoveLeader(t testing.TB, topic string, partition, to int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := k.moveLeader(ctx, topic, partition, to); err != nil {
		t.Fatalf("move the leader of %s/%d to %d: %v", topic, partition, to, err)
	}
	for k.Leader(t, topic, partition) != to {
		select {
		case <-ctx.Done():
			t.Fatalf("the leader of %s/%d did not move to %d", topic, partition, to)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// electPreferred is MoveLeader on Apache Kafka.
func (k *Kafka) electPreferred(ctx context.Context, topic string, partition, to int32) error {
	md, err := k.Admin.Metadata(ctx, topic)
	if err != nil {
		return err
	}
	replicas := []int32{to}
	for _, r := range md.Topics[topic].Partitions[partition].Replicas {
		if r != to {
			replicas = append(replicas, r)
		}
	}
	if len(replicas) != len(md.Topics[topic].Partitions[partition].Replicas) {
		return fmt.Errorf("broker %d holds no replica", to)
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, partition, replicas)
	resps, err := k.Admin.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("reorder replicas: %w", err)
	}
	for {
		res, err := k.Admin.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {partition: {}}})
		if err == nil {
			err = res[topic][partition].Err
		}
		if err == nil || errors.Is(err, kerr.ElectionNotNeeded) {
			return nil
		}
		if !kerr.IsRetriable(err) && !errors.Is(err, kerr.PreferredLeaderNotAvailable) {
			return fmt.Errorf("elect the preferred leader: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("elect the preferred leader: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Produce writes n records to one partition, each in its own record
// batch (so DeleteRecords can cut between any two); value(i) gives the
// i-th value, which is also its key.
func (k *Kafka) Produce(t testing.TB, topic string, partition int32, n int, value func(i int) []byte) {
	t.Helper()
	if err := k.ProduceE(topic, partition, n, 1, value); err != nil {
		t.Fatal(err)
	}
}

// ProduceE writes n records to one partition in batches of perBatch
// records and returns the first error.
func (k *Kafka) ProduceE(topic string, partition int32, n, perBatch int, value func(i int) []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := k.Client
	for i := 0; i < n; i += perBatch {
		recs := make([]*kgo.Record, 0, perBatch)
		for j := i; j < min(n, i+perBatch); j++ {
			v := value(j)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Key: v, Value: v})
		}
		var err error
		for attempt := 0; ; attempt++ {
			if err = cl.ProduceSync(ctx, recs...).FirstErr(); err == nil {
				break
			}
			if attempt == 3 {
				return fmt.Errorf("produce to %s/%d: %w", topic, partition, err)
			}
			// A recreated topic has a new id: a fresh client learns it.
			fresh, ferr := kgo.NewClient(kgo.SeedBrokers(k.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
			if ferr != nil {
				return ferr
			}
			defer fresh.Close()
			cl = fresh
		}
	}
	return nil
}

// Committed returns the group's committed offsets of topic, by partition.
func (k *Kafka) Committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := k.Admin.FetchOffsets(ctx, group)
	for kerr.IsRetriable(err) && ctx.Err() == nil { // Kafka: the coordinator is loading or moving
		time.Sleep(50 * time.Millisecond)
		resp, err = k.Admin.FetchOffsets(ctx, group)
	}
	if errors.Is(err, kerr.GroupIDNotFound) { // kfake, before the group's first join
		return map[int32]int64{}
	}
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	for _, o := range resp[topic] {
		if o.Err == nil {
			out[o.Partition] = o.At
		}
	}
	return out
}

// DeleteRecords deletes a partition's records before offset.
func (k *Kafka) DeleteRecords(t testing.TB, topic string, partition int32, before int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: partition, At: before})
	resp, err := k.Admin.DeleteRecords(ctx, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete records of %s/%d before %d: %v", topic, partition, before, err)
	}
}

// CommitOffsets sets the group's committed offsets (the group must have no
// members).
func (k *Kafka) CommitOffsets(t testing.TB, group, topic string, offsets map[int32]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var os kadm.Offsets
	for p, at := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	resp, err := k.Admin.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit offsets of %s: %v", group, err)
	}
}

// Bounds returns a partition's log start offset and high watermark.
func (k *Kafka) Bounds(t testing.TB, topic string, partition int32) (logStart, hw int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	starts, err := k.Admin.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := k.Admin.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := starts.Lookup(topic, partition)
	e, _ := ends.Lookup(topic, partition)
	return s.Offset, e.Offset
}

// ConsumerGroupProtocol asks the brokers whether they offer the consumer
// group protocol (KIP-848): ApiVersions lists ConsumerGroupHeartbeat and
// the cluster's finalized group.version feature is 1 or more. Kafka 4.0
// and later do by default; 3.7 to 3.9 list the API but have no
// group.version and refuse it (UNSUPPORTED_VERSION) unless its preview is
// enabled on the brokers, which the real-Kafka suite does not do.
func (k *Kafka) ConsumerGroupProtocol(t testing.TB) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, k.Client)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	listed := false
	for _, key := range resp.ApiKeys {
		listed = listed || key.ApiKey == int16(kmsg.ConsumerGroupHeartbeat)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "group.version" {
			return listed && f.MaxVersionLevel >= 1
		}
	}
	return false
}

// FromReal fronts an Apache Kafka cluster; its clients are closed when
// the test ends. Topics get min(3, nodes) replicas, partition i led by
// node i mod nodes; Intercept goes through the nodes' proxies (one
// interceptor per key; they are removed when the test that set them ends).
func FromReal(t testing.TB, c *realkafka.Cluster) *Kafka {
	t.Helper()
	cl, err := newClient(c.Addrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	k := &Kafka{Addrs: c.Addrs, Client: cl, Admin: kadm.NewClient(cl), Nodes: c.Nodes()}
	hooks := &realHooks{c: c, fns: map[int16]Interceptor{}}
	k.createTopic = k.createPlaced
	k.moveLeader = k.electPreferred
	k.intercept = hooks.set
	return k
}

// newClient returns the client a Kafka produces and administers with:
// records go to the partition they name, unbatched, and metadata is
// refreshed quickly (tests create topics and move leaders).
func newClient(addrs []string, extra ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.MetadataMinAge(10 * time.Millisecond)}, extra...)...)
}

// realHooks dispatches the proxies' requests to the interceptors by key.
type realHooks struct {
	c   *realkafka.Cluster
	mu  sync.Mutex
	fns map[int16]Interceptor
}

func (h *realHooks) set(t testing.TB, key int16, fn Interceptor) {
	h.mu.Lock()
	h.fns[key] = fn
	h.mu.Unlock()
	h.c.SetHook(func(r *realkafka.Request) realkafka.Action {
		h.mu.Lock()
		fn := h.fns[r.Key]
		h.mu.Unlock()
		if fn == nil {
			return realkafka.Action{}
		}
		req, err := r.Decode()
		if err != nil {
			return realkafka.Action{}
		}
		return fn(r.Node, req)
	})
	t.Cleanup(func() {
		h.mu.Lock()
		delete(h.fns, key)
		empty := len(h.fns) == 0
		h.mu.Unlock()
		if empty {
			h.c.SetHook(nil)
		}
	})
}

// createPlaced creates a topic with an explicit replica assignment
// (partition i's preferred leader is Nodes[i mod n]) and waits until
// every partition has that leader.
func (k *Kafka) createPlaced(ctx context.Context, topic string, partitions int32) error {
	n := int32(len(k.Nodes))
	rf := min(3, n)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 15000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions, rt.ReplicationFactor = -1, -1
	for p := int32(0); p < partitions; p++ {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition = p
		for r := int32(0); r < rf; r++ {
			a.Replicas = append(a.Replicas, k.Nodes[(p+r)%n])
		}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, k.Client)
	if err == nil && len(resp.Topics) == 1 {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	// Brokers learn of a new topic from the controller one by one: wait
	// until every broker's Metadata has it, with the leaders in place, or
	// a client that asks a late broker is told it does not exist.
	for _, node := range k.Nodes {
		for {
			err := k.placed(ctx, node, topic, partitions)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("topic %s: not in place on broker %d: %w", topic, node, errors.Join(err, ctx.Err()))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// placed checks broker node's Metadata for topic: every partition there,
// led by Nodes[i mod n].
func (k *Kafka) placed(ctx context.Context, node int32, topic string, partitions int32) error {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, k.Client.Broker(int(node)))
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("%d topics in metadata", len(resp.Topics))
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		return err
	}
	n := int32(len(k.Nodes))
	ready := int32(0)
	for _, p := range t.Partitions {
		if p.ErrorCode == 0 && p.Leader == k.Nodes[p.Partition%n] {
			ready++
		}
	}
	if ready != partitions {
		return fmt.Errorf("%d of %d partitions led by their preferred leader", ready, partitions)
	}
	return nil
}
