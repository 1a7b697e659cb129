package produce

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/internal/partitioner"
	"github.com/fencepost-dev/fencepost/stages"
)

// newWire returns a client with its own transport (a short metadata TTL,
// so leader moves are seen quickly), closed when the test ends.
func newWire(t testing.TB, addrs []string) *kafkawire.Client {
	tr := &kafka.Transport{MetadataTTL: 200 * time.Millisecond, ClientID: "produce-test"}
	t.Cleanup(tr.CloseIdleConnections)
	return kafkawire.New(tr, kafka.TCP(addrs...))
}

// consume reads n records of topic (every partition, from the start)
// with a kgo consumer at the isolation level given, failing the test if
// they do not arrive within 10s, and returns them with the records that
// arrived with them.
func consume(t testing.TB, addrs []string, topic string, n int, committed bool) []*kgo.Record {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records of %s, want %d", len(out), topic, n)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("consume %s: %v", topic, e.Err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// asRecords converts kgo's records for sameRecords.
func asRecords(in []*kgo.Record) []stages.Record {
	out := make([]stages.Record, len(in))
	for i, r := range in {
		out[i] = stages.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Partition: r.Partition, Offset: r.Offset}
		for _, h := range r.Headers {
			out[i].Headers = append(out[i].Headers, stages.Header{Key: h.Key, Value: h.Value})
		}
	}
	return out
}

func values(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	slices.Sort(out)
	return out
}

func numbered(prefix string, n int) []stages.Record {
	recs := make([]stages.Record, n)
	for i := range recs {
		recs[i] = stages.Record{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
	}
	return recs
}

func wantValues(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	slices.Sort(out)
	return out
}

// TestProduceRoundTripWithKgo: records written by our producer read back
// with franz-go's consumer unchanged: key, value, headers, timestamp,
// null and empty kept apart; with every codec.
func TestProduceRoundTripWithKgo(t *testing.T) {
	c := kafkatest.New(t, 1)
	t0 := time.UnixMilli(1_700_000_000_000)
	recs := []stages.Record{
		{Key: []byte("k"), Value: []byte("v"), Timestamp: t0, Headers: []stages.Header{{Key: "h", Value: []byte("1")}, {Key: "n", Value: nil}, {Key: "e", Value: []byte{}}}},
		{Key: []byte{}, Value: nil, Timestamp: t0.Add(time.Second)},
		{Key: []byte("k2"), Value: []byte{}, Timestamp: t0.Add(-time.Minute)},
		{Key: []byte("big"), Value: bytes.Repeat([]byte("compressible "), 1000), Timestamp: t0},
	}
	ctx := context.Background()
	for _, codec := range []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			topic := "rt-" + codec.String()
			c.CreateTopic(t, topic, 1)
			p := New(newWire(t, c.Addrs), Config{Compression: codec})
			if err := p.ForTopic(topic).Produce(ctx, recs); err != nil {
				t.Fatal(err)
			}
			got := consume(t, c.Addrs, topic, len(recs), false)
			sameRecords(t, asRecords(got), recs)
			// a zero timestamp is the time of the call
			before := time.Now().Truncate(time.Millisecond)
			if err := p.ForTopic(topic).Produce(ctx, []stages.Record{{Value: []byte("now")}}); err != nil {
				t.Fatal(err)
			}
			got = consume(t, c.Addrs, topic, len(recs)+1, false)
			if ts := got[len(recs)].Timestamp; ts.Before(before) || ts.After(time.Now()) {
				t.Fatalf("zero timestamp written as %v, want the time of the call (%v)", ts, before)
			}
		})
	}
}

// TestProduceRoutesKeysAndSpreadsUnkeyed: on a 3-broker cluster, keyed
// records land on the partition murmur2 gives them, as with the Java
// producer (in order within it), and the
// unkeyed records of one call land together on one partition, the next
// call's on the next.
func TestProduceRoutesKeysAndSpreadsUnkeyed(t *testing.T) {
	c := kafkatest.New(t, 3)
	c.CreateTopic(t, "route", 6)
	p := New(newWire(t, c.Addrs), Config{}).ForTopic("route")
	ctx := context.Background()
	recs := numbered("keyed", 300)
	if err := p.Produce(ctx, recs); err != nil {
		t.Fatal(err)
	}
	for call := range 3 {
		unkeyed := make([]stages.Record, 10)
		for i := range unkeyed {
			unkeyed[i] = stages.Record{Value: fmt.Appendf(nil, "unkeyed-%d-%d", call, i)}
		}
		if err := p.Produce(ctx, unkeyed); err != nil {
			t.Fatal(err)
		}
	}
	got := consume(t, c.Addrs, "route", 330, false)
	last := map[int32]int{}
	unkeyedAt := map[string]int32{}
	for _, r := range got {
		if r.Key == nil {
			var call, i int
			if _, err := fmt.Sscanf(string(r.Value), "unkeyed-%d-%d", &call, &i); err != nil {
				t.Fatal(err)
			}
			k := strconv.Itoa(call)
			if at, ok := unkeyedAt[k]; ok && at != r.Partition {
				t.Fatalf("unkeyed records of call %d on partitions %d and %d", call, at, r.Partition)
			}
			unkeyedAt[k] = r.Partition
			continue
		}
		if want := partitioner.Murmur2(r.Key, 6); r.Partition != want {
			t.Fatalf("key %s on partition %d, want %d", r.Key, r.Partition, want)
		}
		i, _ := strconv.Atoi(string(r.Key))
		if prev, ok := last[r.Partition]; ok && i < prev {
			t.Fatalf("partition %d: record %d after %d", r.Partition, i, prev)
		}
		last[r.Partition] = i
	}
	if len(unkeyedAt) != 3 || unkeyedAt["0"] == unkeyedAt["1"] || unkeyedAt["1"] == unkeyedAt["2"] {
		t.Fatalf("unkeyed calls landed on %v, want a different partition per call", unkeyedAt)
	}
}

// TestProduceByPlacesKeys: ProduceBy puts each keyed record where the
// placement it is given says (nil: Murmur2), and spreads the unkeyed
// ones as Produce does.
func TestProduceByPlacesKeys(t *testing.T) {
	c := kafkatest.New(t, 1)
	p := New(newWire(t, c.Addrs), Config{})
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		by   partitioner.Func
		want partitioner.Func
	}{{"default", nil, partitioner.Murmur2}, {"fnv1a", partitioner.FNV1a, partitioner.FNV1a}, {"crc32", partitioner.CRC32, partitioner.CRC32}} {
		topic := "by-" + tt.name
		c.CreateTopic(t, topic, 7)
		recs := numbered(tt.name, 200)
		recs = append(recs, stages.Record{Key: []byte{}, Value: []byte("empty key")}, stages.Record{Value: []byte("no key")})
		if err := p.ProduceBy(ctx, topic, tt.by, recs); err != nil {
			t.Fatal(err)
		}
		for _, r := range consume(t, c.Addrs, topic, len(recs), false) {
			if r.Key == nil {
				continue // spread, not placed
			}
			if want := tt.want(r.Key, 7); r.Partition != want {
				t.Errorf("%s: key %q on partition %d, want %d", tt.name, r.Key, r.Partition, want)
			}
		}
	}
}

// TestIdempotentRetryDoesNotDuplicate: the broker writes a batch but
// answers REQUEST_TIMED_OUT (kfake's fault injection does the work and
// fails the answer); the retry carries the same sequence and is not
// written again. kafka-go's Writer, not idempotent, writes the same
// records twice under the same fault (which shows the fault does write).
func TestIdempotentRetryDoesNotDuplicate(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "idem", 2)
	c.CreateTopic(t, "kafkago", 2)
	ctx := context.Background()

	h := c.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "idem", Err: kerr.RequestTimedOut, Count: 2})
	p := New(newWire(t, c.Addrs), Config{RetryBackoff: 10 * time.Millisecond})
	if err := p.ForTopic("idem").Produce(ctx, numbered("idem", 100)); err != nil {
		t.Fatal(err)
	}
	if h.Hits() != 2 {
		t.Fatalf("the fault answered %d requests, want 2 (written, answered REQUEST_TIMED_OUT)", h.Hits())
	}
	h.Remove()
	// one more call after the retries: its sequence follows on
	if err := p.ForTopic("idem").Produce(ctx, numbered("more", 10)); err != nil {
		t.Fatal(err)
	}
	got := values(consume(t, c.Addrs, "idem", 110, false))
	want := slices.Concat(wantValues("idem", 100), wantValues("more", 10))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read %d records, want each of %d once: %v", len(got), len(want), got)
	}
	if n := records(t, c, "idem", 2); n != 110 {
		t.Fatalf("the log holds %d records, want 110", n)
	}

	h = c.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "kafkago", Err: kerr.RequestTimedOut, Count: 1})
	defer h.Remove()
	tr := &kafka.Transport{MetadataTTL: 200 * time.Millisecond}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs...), Topic: "kafkago", Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		Transport: tr, BatchTimeout: time.Millisecond, WriteBackoffMin: 10 * time.Millisecond}
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("0"), Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if n := records(t, c, "kafkago", 2); n != 2 {
		t.Fatalf("kafka-go wrote %d copies under the fault, expected 2 (the fault no longer writes?)", n)
	}
}

// records is the sum of topic's high watermarks (its records, when no
// transaction markers were written).
func records(t testing.TB, c *kafkatest.Cluster, topic string, partitions int32) int64 {
	t.Helper()
	var n int64
	for p := range partitions {
		_, hw := c.Bounds(t, topic, p)
		n += hw
	}
	return n
}

// TestIdempotentOutOfOrderRenewsIdentity: OUT_OF_ORDER_SEQUENCE_NUMBER
// (the broker lost the producer's state) makes the producer take a new
// producer id and send the refused batch again from sequence 0: every
// record is written once and later calls keep working.
func TestIdempotentOutOfOrderRenewsIdentity(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "ooo", 1)
	ctx := context.Background()
	p := New(newWire(t, c.Addrs), Config{RetryBackoff: 10 * time.Millisecond})
	if err := p.ForTopic("ooo").Produce(ctx, numbered("a", 5)); err != nil {
		t.Fatal(err)
	}
	pid1, _, _ := p.identity()
	h := c.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "ooo", Err: kerr.OutOfOrderSequenceNumber, Count: 1})
	defer h.Remove()
	if err := p.ForTopic("ooo").Produce(ctx, numbered("b", 5)); err != nil {
		t.Fatal(err)
	}
	if h.Hits() != 1 {
		t.Fatalf("the fault answered %d requests, want 1", h.Hits())
	}
	if err := p.ForTopic("ooo").Produce(ctx, numbered("c", 5)); err != nil {
		t.Fatal(err)
	}
	if pid2, _, _ := p.identity(); pid2 == pid1 {
		t.Fatalf("producer id %d kept after OUT_OF_ORDER_SEQUENCE_NUMBER", pid1)
	}
	got := values(consume(t, c.Addrs, "ooo", 15, false))
	want := slices.Concat(wantValues("a", 5), wantValues("b", 5), wantValues("c", 5))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

// TestProduceErrorClassification: what the caller can tell apart.
func TestProduceErrorClassification(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "errs", 1)
	ctx := context.Background()
	p := New(newWire(t, c.Addrs), Config{RetryBackoff: 5 * time.Millisecond, MaxAttempts: 3, MaxBatchBytes: 4096})
	tests := []struct {
		name      string
		topic     string
		fault     *kerr.Error
		ctxDone   bool
		records   []stages.Record
		permanent bool
		sink      bool
		fatal     bool
		// unavailable: the destination's failure, not the records'
		unavailable bool
	}{
		{name: "record too large for a batch", topic: "errs", records: []stages.Record{{Value: make([]byte, 5000)}}, permanent: true},
		{name: "broker says MESSAGE_TOO_LARGE", topic: "errs", fault: kerr.MessageTooLarge, records: numbered("x", 3), permanent: true},
		{name: "broker says INVALID_RECORD", topic: "errs", fault: kerr.InvalidRecord, records: numbered("x", 3), permanent: true},
		{name: "no permission for the topic", topic: "errs", fault: kerr.TopicAuthorizationFailed, records: numbered("x", 3), sink: true, unavailable: true},
		{name: "topic does not exist", topic: "missing", records: numbered("x", 3), sink: true, unavailable: true},
		{name: "no permission to write idempotently", topic: "errs", fault: kerr.ClusterAuthorizationFailed, records: numbered("x", 3), fatal: true, unavailable: true},
		{name: "not enough replicas, every attempt", topic: "errs", fault: kerr.NotEnoughReplicas, records: numbered("x", 3), unavailable: true},
		{name: "broker not available, every attempt", topic: "errs", fault: kerr.BrokerNotAvailable, records: numbered("x", 3), unavailable: true},
		{name: "broker says CORRUPT_MESSAGE", topic: "errs", fault: kerr.CorruptMessage, records: numbered("x", 3), permanent: true},
		{name: "compression the broker does not support", topic: "errs", fault: kerr.UnsupportedCompressionType, records: numbered("x", 3), fatal: true, unavailable: true},
		{name: "an unexpected code", topic: "errs", fault: kerr.InvalidRequiredAcks, records: numbered("x", 3)},
		{name: "ctx ended", topic: "errs", ctxDone: true, records: numbered("x", 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fault != nil {
				h := c.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: tt.topic, Err: tt.fault, Count: -1})
				defer h.Remove()
			}
			cctx := ctx
			if tt.ctxDone {
				var cancel context.CancelFunc
				cctx, cancel = context.WithCancel(ctx)
				cancel()
			}
			err := p.ForTopic(tt.topic).Produce(cctx, tt.records)
			if err == nil {
				t.Fatal("no error")
			}
			if stages.IsUnavailable(err) != tt.unavailable {
				t.Fatalf("error %v: unavailable %v, want %v", err, stages.IsUnavailable(err), tt.unavailable)
			}
			var sink *SinkError
			var fatal *FatalError
			if stages.IsPermanent(err) != tt.permanent || errors.As(err, &sink) != tt.sink || errors.As(err, &fatal) != tt.fatal {
				t.Fatalf("error %v: permanent %v sink %v fatal %v, want %v %v %v", err, stages.IsPermanent(err), errors.As(err, &sink),
					errors.As(err, &fatal), tt.permanent, tt.sink, tt.fatal)
			}
			if tt.fault != nil && !errors.Is(err, kafka.Error(tt.fault.Code)) {
				t.Fatalf("error %v does not wrap %v", err, tt.fault)
			}
		})
	}
	// and the producer still works
	if err := p.ForTopic("errs").Produce(ctx, numbered("ok", 3)); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentProduce: calls from many goroutines to the same
// partitions each write every record once, and the records of one call
// keep their order within a partition.
func TestConcurrentProduce(t *testing.T) {
	c := kafkatest.New(t, 3)
	c.CreateTopic(t, "conc", 4)
	p := New(newWire(t, c.Addrs), Config{}).ForTopic("conc")
	ctx := context.Background()
	const workers, calls, per = 8, 10, 50
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			var err error
			for call := range calls {
				recs := make([]stages.Record, per)
				for i := range recs {
					recs[i] = stages.Record{Key: []byte(strconv.Itoa(i % 7)), Value: fmt.Appendf(nil, "%d-%d-%03d", w, call, i)}
				}
				if err = p.Produce(ctx, recs); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := consume(t, c.Addrs, "conc", workers*calls*per, false)
	if n := records(t, c, "conc", 4); n != workers*calls*per {
		t.Fatalf("the log holds %d records, want %d", n, workers*calls*per)
	}
	seen := map[string]bool{}
	last := map[string]string{} // worker-call and partition -> last value
	for _, r := range got {
		v := string(r.Value)
		if seen[v] {
			t.Fatalf("%s written twice", v)
		}
		seen[v] = true
		k := fmt.Sprintf("%s/%d", v[:strings.LastIndexByte(v, '-')], r.Partition)
		if prev, ok := last[k]; ok && prev > v {
			t.Fatalf("partition %d: %s after %s", r.Partition, v, prev)
		}
		last[k] = v
	}
}

// BenchmarkProduce compares writing batches of 500 records (a 10-byte
// key, a 200-byte value) to a 4-partition topic of an in-process kfake
// broker with our producer and with kafka-go's Writer as pipeline.Producer
// configured it before it wrote through our producer (the figures in
// docs/architecture.md). Both share the broker's cost, so compare the
// ratio.
func BenchmarkProduce(b *testing.B) {
	c := kafkatest.New(b, 1)
	c.CreateTopic(b, "bench-ours", 4)
	c.CreateTopic(b, "bench-kafkago", 4)
	value := bytes.Repeat([]byte("v"), 200)
	const per = 500
	recs := make([]stages.Record, per)
	msgs := make([]kafka.Message, per)
	for i := range recs {
		key := fmt.Appendf(nil, "user-%05d", i)
		recs[i] = stages.Record{Key: key, Value: value}
		msgs[i] = kafka.Message{Key: key, Value: value}
	}
	ctx := context.Background()
	b.Run("ours", func(b *testing.B) {
		p := New(newWire(b, c.Addrs), Config{}).ForTopic("bench-ours")
		b.ReportAllocs()
		for b.Loop() {
			if err := p.Produce(ctx, recs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*per), "ns/record")
	})
	b.Run("kafkago", func(b *testing.B) {
		tr := &kafka.Transport{MetadataTTL: time.Second}
		defer tr.CloseIdleConnections()
		w := &kafka.Writer{Addr: kafka.TCP(c.Addrs...), Topic: "bench-kafkago", Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
			Transport: tr, BatchTimeout: 100 * time.Microsecond, BatchSize: 500}
		defer w.Close()
		b.ReportAllocs()
		for b.Loop() {
			// what pipeline.Producer did per call: copy into messages
			m := make([]kafka.Message, per)
			copy(m, msgs)
			if err := w.WriteMessages(ctx, m...); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*per), "ns/record")
	})
}

// TestAbandonedBatchRenewsIdentity: a batch given up on (ctx ended while
// the broker still held it) may be written later; the next call must
// not reuse its sequence number, or the broker would take the next
// batch for a duplicate and drop it. Both calls' records end up written.
func TestAbandonedBatchRenewsIdentity(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "abandon", 1)
	p := New(newWire(t, c.Addrs), Config{})
	ctx := context.Background()
	if err := p.ForTopic("abandon").Produce(ctx, numbered("first", 1)); err != nil {
		t.Fatal(err)
	}
	pid1, _, _ := p.identity()
	c.Intercept(t, kmsg.Produce, func(int32, kmsg.Request) kafkatest.Action {
		return kafkatest.Action{Delay: 300 * time.Millisecond}
	})
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err := p.ForTopic("abandon").Produce(short, numbered("late", 5))
	cancel()
	if err == nil {
		t.Fatal("produce with a 50ms deadline against a 300ms broker succeeded")
	}
	if err := p.ForTopic("abandon").Produce(ctx, numbered("next", 5)); err != nil {
		t.Fatal(err)
	}
	if pid2, _, _ := p.identity(); pid2 == pid1 {
		t.Fatal("producer id kept after abandoning a batch that was sent")
	}
	got := values(consume(t, c.Addrs, "abandon", 11, false))
	want := slices.Concat(wantValues("first", 1), wantValues("late", 5), wantValues("next", 5))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}
