package fetch_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// TestFetchDecoding: records below the requested offset are skipped,
// transaction markers are skipped but the next offset moves past them, the
// payload cap keeps at least one record, and each partition of a response
// gets its own outcome.
func TestFetchDecoding(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "tx", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.TransactionalID("producer"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: "tx", Partition: 0, Value: []byte{byte('a' + i)}}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// offsets 0..4 are records, 5 is the commit marker; high watermark 6
	waitHW(t, c, "tx", 0, 6)
	f := newStream(t, c, fetch.Config{MaxWait: 50 * time.Millisecond})
	tp := offsetstore.TopicPartition{Topic: "tx", Partition: 0}
	missing := offsetstore.TopicPartition{Topic: "tx", Partition: 9}
	at := func(offset int64) offsets.FetchEntry {
		pos, _ := offsets.NewPosition(offset, 1, 1)
		return offsets.FetchEntry{Partition: tp, Position: pos, LeaderEpoch: -1}
	}
	tests := []struct {
		name     string
		entry    offsets.FetchEntry
		maxBytes int32
		offsets  []int64
		next     int64
	}{
		{name: "from the start", entry: at(0), maxBytes: 1 << 20, offsets: []int64{0, 1, 2, 3, 4}, next: 6},
		{name: "mid-batch skips earlier records", entry: at(3), maxBytes: 1 << 20, offsets: []int64{3, 4}, next: 6},
		{name: "only the marker", entry: at(5), maxBytes: 1 << 20, offsets: nil, next: 6},
		{name: "payload cap keeps one record", entry: at(0), maxBytes: 1, offsets: []int64{0}, next: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := offsets.NewFetchRequest(0, 0, 1, tt.maxBytes, []offsets.FetchEntry{tt.entry})
			pr := f.Fetch(ctx, b).Partitions[0]
			if pr.Outcome != fetch.OK || pr.Next != tt.next || pr.HighWatermark != 6 {
				t.Fatalf("outcome %v err %v next %d hw %d, want ok, next %d, hw 6", pr.Outcome, pr.Err, pr.Next, pr.HighWatermark, tt.next)
			}
			var got []int64
			if pr.Batch != nil {
				for _, r := range pr.Batch.Records() {
					got = append(got, r.Offset)
				}
				if sp := pr.Batch.Span(); sp.Start != tt.entry.Position.Offset() || sp.End != pr.Next || pr.Bytes != pr.Batch.Bytes() {
					t.Fatalf("span %v bytes %d/%d", sp, pr.Bytes, pr.Batch.Bytes())
				}
			}
			if len(got) != len(tt.offsets) {
				t.Fatalf("offsets %v, want %v", got, tt.offsets)
			}
			for i := range got {
				if got[i] != tt.offsets[i] {
					t.Fatalf("offsets %v, want %v", got, tt.offsets)
				}
			}
		})
	}
	// A partition the broker does not have gets NotLeader (the
	// coordinator refreshes metadata); the others of the request are
	// answered.
	pos, _ := offsets.NewPosition(0, 1, 1)
	b := offsets.NewFetchRequest(0, 0, 1, 1<<20, []offsets.FetchEntry{at(0), {Partition: missing, Position: pos, LeaderEpoch: -1}})
	res := f.Fetch(ctx, b)
	if res.Partitions[0].Outcome != fetch.OK || res.Partitions[1].Outcome != fetch.NotLeader {
		t.Fatalf("outcomes %v and %v, want ok and not_leader", res.Partitions[0].Outcome, res.Partitions[1].Outcome)
	}
	// A broker the metadata does not name: NotLeader for every entry,
	// before anything is sent.
	res = f.f.Stream(7).Fetch(ctx, offsets.NewFetchRequest(7, 0, 1, 1<<20, []offsets.FetchEntry{at(0)}))
	if pr := res.Partitions[0]; pr.Outcome != fetch.NotLeader {
		t.Fatalf("fetch from an unknown broker: %v %v, want not_leader", pr.Outcome, pr.Err)
	}
}

// stream is a fetch stream to broker 0 of c, closed at the end of the
// test; f is its fetcher.
type stream struct {
	*fetch.Stream
	f *fetch.Fetcher
}

func newStream(t *testing.T, c *kafkatest.Cluster, cfg fetch.Config) stream {
	t.Helper()
	cfg.Dialer = &kafkawire.Dialer{ClientID: "test"}
	cfg.Brokers = &fetch.Brokers{}
	addrs := map[int32]string{}
	for i, a := range c.Addrs {
		addrs[int32(i)] = a
	}
	cfg.Brokers.Set(addrs)
	f, err := fetch.NewFetcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := f.Stream(0)
	t.Cleanup(func() { s.Close(); f.Close() })
	return stream{Stream: s, f: f}
}

// TestFetchPerPartitionErrors: in one response, each partition's error is
// its own: a NotLeader on one leaves the other's records intact.
func TestFetchPerPartitionErrors(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "two", 2)
	c.Produce(t, "two", 0, 3, func(i int) []byte { return []byte{byte(i)} })
	c.Produce(t, "two", 1, 3, func(i int) []byte { return []byte{byte(i)} })
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "two", Partitions: []int32{0}, Err: kerr.NotLeaderForPartition})
	f := newStream(t, c, fetch.Config{MaxWait: 50 * time.Millisecond})
	var entries []offsets.FetchEntry
	for p := int32(0); p < 2; p++ {
		pos, _ := offsets.NewPosition(0, 1, 1)
		entries = append(entries, offsets.FetchEntry{Partition: offsetstore.TopicPartition{Topic: "two", Partition: p}, Position: pos, LeaderEpoch: -1})
	}
	res := f.Fetch(context.Background(), offsets.NewFetchRequest(0, 0, 1, 1<<20, entries))
	p0, p1 := res.Partitions[0], res.Partitions[1]
	if p0.Outcome != fetch.NotLeader || p0.Batch != nil || p0.Next != 0 {
		t.Fatalf("partition 0: %v %v next %d, want not_leader with nothing", p0.Outcome, p0.Err, p0.Next)
	}
	if p1.Outcome != fetch.OK || p1.Batch == nil || len(p1.Batch.Records()) != 3 || p1.Next != 3 {
		t.Fatalf("partition 1: %v %v next %d, want its 3 records", p1.Outcome, p1.Err, p1.Next)
	}
}

// TestFetchResponseLeavesPartitionsOut: a broker that fills a response
// from the first partitions may leave the rest out (kfake does). They come
// back OK with nothing, at their position: no error, so no backoff.
func TestFetchResponseLeavesPartitionsOut(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "full", 2)
	value := func(int) []byte { return make([]byte, 1000) }
	c.Produce(t, "full", 0, 3, value)
	c.Produce(t, "full", 1, 3, value)
	f := newStream(t, c, fetch.Config{MaxWait: 50 * time.Millisecond})
	var entries []offsets.FetchEntry
	for p := int32(0); p < 2; p++ {
		pos, _ := offsets.NewPosition(0, 1, 1)
		entries = append(entries, offsets.FetchEntry{Partition: offsetstore.TopicPartition{Topic: "full", Partition: p}, Position: pos, LeaderEpoch: -1})
	}
	// MaxBytes 1: the broker sends the first batch it finds and stops.
	res := f.Fetch(context.Background(), offsets.NewFetchRequest(0, 0, 1, 1, entries))
	p0, p1 := res.Partitions[0], res.Partitions[1]
	if p0.Outcome != fetch.OK || p0.Batch == nil || p0.Next == 0 {
		t.Fatalf("partition 0: %v %v next %d, want records", p0.Outcome, p0.Err, p0.Next)
	}
	if p1.Outcome != fetch.OK || p1.Err != nil || p1.Batch != nil || p1.Next != 0 {
		t.Fatalf("partition 1 (left out): %v %v batch %v next %d, want ok with nothing at 0", p1.Outcome, p1.Err, p1.Batch != nil, p1.Next)
	}
}

func waitHW(t *testing.T, c *kafkatest.Cluster, topic string, p int32, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, hw := c.Bounds(t, topic, p); hw == want {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%s/%d high watermark %d, want %d", topic, p, hw, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFetchReadCommitted: with read_committed, records of an aborted
// transaction are skipped (and passed), committed ones are kept.
func TestFetchReadCommitted(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "rc", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.TransactionalID("rc-producer"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	txn := func(values string, commit kgo.TransactionEndTry) {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			cl.Produce(ctx, &kgo.Record{Topic: "rc", Partition: 0, Value: []byte{byte(v)}}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	txn("ab", kgo.TryCommit) // offsets 0,1 + marker 2
	txn("xyz", kgo.TryAbort) // offsets 3,4,5 + marker 6
	txn("c", kgo.TryCommit)  // offset 7 + marker 8
	waitHW(t, c, "rc", 0, 9)
	for _, committed := range []bool{true, false} {
		f := newStream(t, c, fetch.Config{MaxWait: 50 * time.Millisecond, ReadCommitted: committed})
		pos, _ := offsets.NewPosition(0, 1, 1)
		pr := f.Fetch(ctx, offsets.NewFetchRequest(0, 0, 1, 1<<20,
			[]offsets.FetchEntry{{Partition: offsetstore.TopicPartition{Topic: "rc", Partition: 0}, Position: pos, LeaderEpoch: -1}})).Partitions[0]
		var got string
		for _, r := range pr.Batch.Records() {
			got += string(r.Value)
		}
		want := "abxyzc"
		if committed {
			want = "abc"
		}
		if got != want || pr.Next != 9 {
			t.Fatalf("read_committed=%v: values %q next %d, want %q and 9", committed, got, pr.Next, want)
		}
	}
}

// TestFetchDeliversGoodBatchesBeforeCorrupt: a partition whose response
// holds good batches and then a corrupt one answers Corrupt with the good
// records in its Batch and Next at the corrupt batch, naming the
// partition and the batch's offset; the other partition of the response
// is not affected.
func TestFetchDeliversGoodBatchesBeforeCorrupt(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "bad", 2)
	corrupt := kafkatest.RecordBatch(3, []byte("d"), []byte("e"))
	corrupt[len(corrupt)-1] ^= 0xff
	good := append(kafkatest.RecordBatch(0, []byte("a"), []byte("b")), kafkatest.RecordBatch(2, []byte("c"))...)
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.HighWatermark, sp.LastStableOffset = rp.Partition, 5, 5
				sp.RecordBatches = append(append([]byte(nil), good...), corrupt...)
				if rp.Partition == 1 {
					sp.RecordBatches = good
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	f := newStream(t, c, fetch.Config{MaxWait: 50 * time.Millisecond})
	var entries []offsets.FetchEntry
	for p := int32(0); p < 2; p++ {
		pos, _ := offsets.NewPosition(0, 1, 1)
		entries = append(entries, offsets.FetchEntry{Partition: offsetstore.TopicPartition{Topic: "bad", Partition: p}, Position: pos})
	}
	res := f.Fetch(context.Background(), offsets.NewFetchRequest(0, 0, 1, 1<<20, entries))
	p0, p1 := res.Partitions[0], res.Partitions[1]
	if p0.Outcome != fetch.Corrupt || !errors.Is(p0.Err, fetch.ErrCorrupt) || !strings.Contains(p0.Err.Error(), "bad/0") ||
		!strings.Contains(p0.Err.Error(), "batch at offset 3") {
		t.Fatalf("partition 0: %v %v, want corrupt naming bad/0 and the batch at offset 3", p0.Outcome, p0.Err)
	}
	if p0.Batch == nil || len(p0.Batch.Records()) != 3 || p0.Next != 3 || p0.Bytes != p0.Batch.Bytes() {
		t.Fatalf("partition 0: batch %v next %d: want the 3 good records, next 3", p0.Batch, p0.Next)
	}
	if p1.Outcome != fetch.OK || p1.Batch == nil || len(p1.Batch.Records()) != 3 || p1.Next != 3 {
		t.Fatalf("partition 1: %v %v next %d, want its 3 records", p1.Outcome, p1.Err, p1.Next)
	}
}

// TestFetchAsksWireBytesForTheMemory: a request's MaxBytes counts wire
// bytes, the room counts memory, and small records take more decoded
// (their Record) than on the wire. The first fetch, knowing nothing, asks for
// the room in wire bytes (and drops what does not fit); the next ones
// ask for what fills the room, so they keep as many records as the
// first while reading fewer bytes.
func TestFetchAsksWireBytesForTheMemory(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "w", 1)
	// values (and keys: the same) of 100 random bytes
	rng := rand.New(rand.NewPCG(1, 2))
	if err := c.ProduceE("w", 0, 5000, 10, func(int) []byte {
		v := make([]byte, 100)
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		return v
	}); err != nil {
		t.Fatal(err)
	}
	waitHW(t, c, "w", 0, 5000)
	var mu sync.Mutex
	var asked []int32
	c.Intercept(t, kmsg.Fetch, func(_ int32, req kmsg.Request) kafkatest.Action {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req.(*kmsg.FetchRequest).MaxBytes)
		return kafkatest.Action{}
	})
	f := newStream(t, c, fetch.Config{MaxWait: 50 * time.Millisecond})
	tp := offsetstore.TopicPartition{Topic: "w", Partition: 0}
	const room = 256 << 10 // about 80 batches of 10 records
	var kept []int
	next := int64(0)
	for range 4 {
		pos, _ := offsets.NewPosition(next, 1, 1)
		pr := f.Fetch(context.Background(), offsets.NewFetchRequest(0, 0, 1, room, []offsets.FetchEntry{{Partition: tp, Position: pos, LeaderEpoch: -1}})).Partitions[0]
		if pr.Outcome != fetch.OK || pr.Batch == nil {
			t.Fatalf("fetch from %d: %v %v", next, pr.Outcome, pr.Err)
		}
		if pr.Bytes > room {
			t.Fatalf("fetch from %d kept %d bytes of records, room %d", next, pr.Bytes, room)
		}
		kept = append(kept, len(pr.Batch.Records()))
		next = pr.Next
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 4 || asked[0] != room {
		t.Fatalf("asked for %v bytes, want 4 fetches, the first for the room (%d)", asked, room)
	}
	for i := 1; i < 4; i++ {
		// key and value of 100 bytes: 328 bytes in memory; on the wire
		// about 210, or half that where the producer's compression
		// finds that the key repeats the value
		if asked[i] > room*3/4 || asked[i] < room/5 {
			t.Fatalf("fetch %d asked for %d bytes (all: %v), want the room's records' wire size (the room is %d)", i, asked[i], asked, room)
		}
		if kept[i] < kept[0]*3/4 {
			t.Fatalf("fetch %d kept %d records (all: %v), want about as many as the first", i, kept[i], kept)
		}
	}
}
