package fetch

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
)

// fetchVersion is the Fetch request version sent: v11 names topics
// (v13 and later use topic ids) and is served by every Kafka from 2.3
// on, 4.x included (whose oldest is v4).
const fetchVersion = 11

// Config configures a Fetcher. The zero value of each field but Dialer
// and Brokers is a useful default.
type Config struct {
	// Dialer connects to brokers (TLS, SASL, client id); required.
	Dialer *kafkawire.Dialer
	// Brokers says where each broker listens; required. The metadata
	// refresher (Metadata) keeps it current.
	Brokers *Brokers
	// MaxWait is how long the broker may hold a fetch waiting for
	// MinBytes. Default 500ms.
	MaxWait time.Duration
	// MinBytes the broker waits for before answering. Default 1.
	MinBytes int32
	// PartitionMaxBytes caps one partition's share of a response.
	// Default 1 MiB. A batch larger than this is still returned whole.
	PartitionMaxBytes int32
	// Timeout bounds one request, MaxWait included. Default MaxWait+10s.
	Timeout time.Duration
	// ReadCommitted fetches only committed transactional records.
	ReadCommitted bool
}

func (c *Config) defaults() {
	if c.MaxWait <= 0 {
		c.MaxWait = 500 * time.Millisecond
	}
	if c.MinBytes <= 0 {
		c.MinBytes = 1
	}
	if c.PartitionMaxBytes <= 0 {
		c.PartitionMaxBytes = 1 << 20
	}
	if c.Timeout <= 0 {
		c.Timeout = c.MaxWait + 10*time.Second
	}
}

// Brokers is where each broker of the cluster listens (host:port by
// node id), as the last metadata said. It is safe for concurrent use.
type Brokers struct {
	m atomic.Pointer[map[int32]string]
}

// Addr returns the address of broker id.
func (b *Brokers) Addr(id int32) (string, bool) {
	m := b.m.Load()
	if m == nil {
		return "", false
	}
	a, ok := (*m)[id]
	return a, ok
}

// Set replaces the addresses.
func (b *Brokers) Set(addrs map[int32]string) { b.m.Store(&addrs) }

// Fetcher turns FetchRequests into Results over connections of its own,
// decoding record batches itself. The Fetcher is shared; each broker's
// fetch goroutine uses a Stream of its own.
type Fetcher struct {
	cfg    Config
	codecs *codecs
}

// NewFetcher returns a Fetcher. Close it when done.
func NewFetcher(cfg Config) (*Fetcher, error) {
	if cfg.Dialer == nil || cfg.Brokers == nil {
		return nil, errors.New("fetch: Config.Dialer and Config.Brokers are required")
	}
	cfg.defaults()
	return &Fetcher{cfg: cfg, codecs: newCodecs()}, nil
}

// Close releases what the Fetcher holds (after every Stream is closed).
func (f *Fetcher) Close() { f.codecs.close() }

// Stream returns a stream of fetches to one broker: one connection (made
// when first needed, and again after an error), one request at a time.
// It is not safe for concurrent use: one goroutine owns it and closes it.
func (f *Fetcher) Stream(broker int32) *Stream { return &Stream{f: f, broker: broker} }

// Stream fetches from one broker; see Fetcher.Stream.
type Stream struct {
	f      *Fetcher
	broker int32
	conn   *kafkawire.Conn
	// perWire is what the records fetched take in memory per byte of
	// the response they came from, averaged over recent fetches; 0
	// until a fetch kept records.
	perWire float64
}

// wireMaxBytes is the response size to ask for so that its records fill
// memory bytes of memory: a request's MaxBytes counts wire bytes, the
// budget counts memory, and small records take about twice their wire
// size once decoded. Asking for memory bytes of wire would bring records
// that do not fit: they are read, allocated and dropped, to be fetched
// again. It asks a tenth less than the estimate: a broker returns whole
// batches up to MaxBytes, and a batch the room cuts short is read again
// whole by the next fetch. It never asks for more wire bytes than memory
// (what the stream asks before it has learned anything), so an estimate
// off in either direction costs a smaller fetch or a dropped tail, never
// memory.
func (s *Stream) wireMaxBytes(memory int32) int32 {
	if s.perWire <= 1 {
		return memory
	}
	return max(1, int32(0.9*float64(memory)/s.perWire))
}

// learn notes that a response's kept records took memory bytes and came
// from wire bytes of it.
func (s *Stream) learn(memory, wire int64) {
	if memory <= 0 || wire <= 0 {
		return
	}
	sample := float64(memory) / float64(wire)
	if s.perWire == 0 {
		s.perWire = sample
		return
	}
	s.perWire = (s.perWire + sample) / 2 // records change: recent fetches weigh most
}

// Close closes the stream's connection.
func (s *Stream) Close() {
	if s.conn != nil {
		_ = s.conn.Close()
		s.conn = nil
	}
}

// connect returns a live connection to the stream's broker.
func (s *Stream) connect(ctx context.Context) (*kafkawire.Conn, error) {
	addr, ok := s.f.cfg.Brokers.Addr(s.broker)
	if !ok {
		return nil, fmt.Errorf("%w: broker %d is not in the cluster's metadata", errUnknownBroker, s.broker)
	}
	if s.conn != nil && s.conn.Addr() == addr {
		return s.conn, nil
	}
	s.Close()
	c, err := s.f.cfg.Dialer.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	s.conn = c
	return c, nil
}

// errUnknownBroker: the metadata does not name the broker (yet): refresh
// it and route the partitions again.
var errUnknownBroker = errors.New("unknown broker")

// Fetch sends one Fetch request for every entry of b and returns one
// result per entry, in order. It never fails as a whole: a request error
// becomes every entry's outcome.
func (s *Stream) Fetch(ctx context.Context, b offsets.FetchRequest) *Result {
	res := &Result{Request: b, Partitions: make([]PartitionResult, b.Len())}
	ctx, cancel := context.WithTimeout(ctx, s.f.cfg.Timeout)
	defer cancel()
	resp := kmsg.NewPtrFetchResponse()
	conn, err := s.connect(ctx)
	if err == nil {
		if err = conn.Request(ctx, s.f.request(b, s.wireMaxBytes(b.MaxBytes())), resp); err != nil {
			s.Close()
		}
	}
	if err == nil && resp.ErrorCode != 0 {
		err = kafkawire.CodeError(resp.ErrorCode)
	}
	if err != nil {
		outcome := classifyRequestError(err)
		switch {
		case errors.Is(err, errUnknownBroker):
			outcome = NotLeader
		case ctx.Err() != nil:
			outcome = Retriable
		}
		for i := range res.Partitions {
			res.Partitions[i] = PartitionResult{Outcome: outcome, Err: fmt.Errorf("fetch from broker %d: %w", b.Broker(), err),
				LogStart: -1, HighWatermark: -1, Next: b.At(i).Position.Offset(), LastLeaderEpoch: -1}
		}
		return res
	}
	answered := make([]bool, b.Len())
	// The records kept are capped at the request's MaxBytes of memory
	// (each record's footprint, what the budget counts): the broker
	// counts wire bytes, and compressed batches can hold far more, so
	// the cap is what bounds memory. Records past it are left for the
	// next fetch.
	room := &room{left: int64(b.MaxBytes())}
	k := 0 // partitions seen: responses usually follow request order
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			i := find(b, t.Topic, p.Partition, k)
			k++
			if i < 0 || answered[i] {
				continue
			}
			answered[i] = true
			res.Partitions[i] = s.f.decode(b, i, p, room)
		}
	}
	// A broker may leave partitions out of a response that reached its
	// MaxBytes (kfake does; Kafka sends them empty): nothing arrived for
	// them this time, which is not an error. They are fetched again at
	// once, first in the next request (see the coordinator's planFetch).
	for i, ok := range answered {
		if !ok {
			res.Partitions[i] = PartitionResult{Outcome: OK, LogStart: -1, HighWatermark: -1, Next: b.At(i).Position.Offset(), LastLeaderEpoch: -1}
		}
	}
	s.learn(int64(b.MaxBytes())-room.left, room.wire)
	return res
}

// request builds the wire request: a full fetch (no fetch session) of
// every entry, each with the leader epoch the metadata gave its leader
// (KIP-320: a broker with another epoch answers FENCED_LEADER_EPOCH or
// UNKNOWN_LEADER_EPOCH instead of records), asking for at most maxBytes
// of response.
func (f *Fetcher) request(b offsets.FetchRequest, maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = fetchVersion
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(f.cfg.MaxWait / time.Millisecond)
	req.MinBytes = f.cfg.MinBytes
	req.MaxBytes = maxBytes
	req.SessionID = 0
	req.SessionEpoch = -1 // no fetch session
	if f.cfg.ReadCommitted {
		req.IsolationLevel = 1
	}
	for i := 0; i < b.Len(); i++ {
		e := b.At(i)
		n := len(req.Topics)
		if n == 0 || req.Topics[n-1].Topic != e.Partition.Topic {
			req.Topics = append(req.Topics, kmsg.FetchRequestTopic{Topic: e.Partition.Topic})
			n++
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = e.Partition.Partition
		p.FetchOffset = e.Position.Offset()
		p.CurrentLeaderEpoch = e.LeaderEpoch
		p.PartitionMaxBytes = f.cfg.PartitionMaxBytes
		req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, p)
	}
	return req
}

// find returns the index of the entry for topic/partition; guess, the
// index in request order, is tried first.
func find(b offsets.FetchRequest, topic string, partition int32, guess int) int {
	if guess < b.Len() {
		if e := b.At(guess); e.Partition.Topic == topic && e.Partition.Partition == partition {
			return guess
		}
	}
	for i := 0; i < b.Len(); i++ {
		if e := b.At(i); e.Partition.Topic == topic && e.Partition.Partition == partition {
			return i
		}
	}
	return -1
}

// decode turns one partition of a response into a result, keeping at
// most room's bytes of records (at least one record if nothing was kept
// yet, so a record larger than the room still gets through).
func (f *Fetcher) decode(b offsets.FetchRequest, i int, p *kmsg.FetchResponseTopicPartition, room *room) PartitionResult {
	e := b.At(i)
	at := e.Position.Offset()
	pr := PartitionResult{Outcome: classify(p.ErrorCode), LogStart: p.LogStartOffset, HighWatermark: p.HighWatermark,
		LastStable: p.LastStableOffset, Next: at, LastLeaderEpoch: -1}
	if pr.Outcome != OK {
		pr.Err = kafkawire.CodeError(p.ErrorCode)
		return pr
	}
	recs, next, payload, bytes, err := decodeRecords(e.Partition, p.RecordBatches, at, room, newAborts(p.AbortedTransactions), f.codecs)
	pr.Next = next
	if next > at {
		pr.LastLeaderEpoch = lastLeaderEpoch(p.RecordBatches, next)
	}
	if len(recs) > 0 {
		pr.Batch = NewBatch(e.Partition, b.Generation(), e.Position.Epoch(), offsets.Span{Start: at, End: next}, recs, bytes)
		pr.Bytes, pr.Payload = bytes, payload
	}
	if err != nil {
		// the good batches before the corrupt one are delivered
		pr.Outcome, pr.Err = Corrupt, fmt.Errorf("records of %s from offset %d: %w", e.Partition, next, err)
	}
	return pr
}

// room is what is left of a response's record budget.
type room struct {
	left int64
	kept bool // some record of the response was kept
	// wire is the response bytes the kept records came from: with what
	// they take in memory, the stream learns how many wire bytes to ask
	// for (see Stream.wireMaxBytes).
	wire int64
}

// controlAbort is the control record type of a transaction abort marker.
const controlAbort = 0

// aborts tracks the aborted transactions of one partition's response (read
// committed): a producer's transactional batches are skipped from its
// transaction's first offset until its abort marker.
type aborts struct {
	list   []kmsg.FetchResponseTopicPartitionAbortedTransaction // sorted by first offset
	next   int
	active map[int64]bool // producer ids inside an aborted transaction
}

func newAborts(list []kmsg.FetchResponseTopicPartitionAbortedTransaction) *aborts {
	if len(list) == 0 {
		return nil
	}
	l := append([]kmsg.FetchResponseTopicPartitionAbortedTransaction(nil), list...)
	sort.Slice(l, func(i, j int) bool { return l[i].FirstOffset < l[j].FirstOffset })
	return &aborts{list: l, active: map[int64]bool{}}
}

// reach activates the aborted transactions that started at or before
// offset.
func (a *aborts) reach(offset int64) {
	if a == nil {
		return
	}
	for a.next < len(a.list) && a.list[a.next].FirstOffset <= offset {
		a.active[a.list[a.next].ProducerID] = true
		a.next++
	}
}

// skip reports whether a batch belongs to an aborted transaction.
func (a *aborts) skip(h *batchHeader) bool {
	if a == nil || h.attributes&attrTransactional == 0 {
		return false
	}
	a.reach(h.baseOffset)
	return a.active[h.producerID]
}

// end closes a producer's aborted transaction at its abort marker.
func (a *aborts) end(producerID int64) {
	if a != nil {
		delete(a.active, producerID)
	}
}
