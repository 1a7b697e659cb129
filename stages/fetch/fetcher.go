package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	kfetch "github.com/segmentio/kafka-go/protocol/fetch"

	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// Config configures a Fetcher. The zero value of each field but Client is
// a useful default.
type Config struct {
	// Client sends the requests; required. Its transport's metadata
	// cache routes each request to the leader of its partitions.
	Client *kafkawire.Client
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

// Fetcher turns FetchBatches into Results. It holds no per-request state
// and is safe for concurrent use; the pipeline runs one goroutine per
// broker, each with at most one request in flight.
type Fetcher struct {
	cfg Config
}

// NewFetcher returns a Fetcher.
func NewFetcher(cfg Config) (*Fetcher, error) {
	if cfg.Client == nil {
		return nil, errors.New("fetch: Config.Client is required")
	}
	cfg.defaults()
	return &Fetcher{cfg: cfg}, nil
}

// Fetch sends one Fetch request for every entry of b and returns one
// result per entry, in order. It never fails as a whole: a request error
// becomes every entry's outcome.
func (f *Fetcher) Fetch(ctx context.Context, b offsetstore.FetchBatch) *Result {
	res := &Result{Request: b, Partitions: make([]PartitionResult, b.Len())}
	req := f.request(b)
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	m, err := f.cfg.Client.RoundTrip(ctx, req)
	if err == nil && m == nil {
		err = errors.New("empty fetch response")
	}
	var resp *kfetch.Response
	if err == nil {
		var ok bool
		if resp, ok = m.(*kfetch.Response); !ok {
			err = fmt.Errorf("unexpected fetch response type %T", m)
		} else if resp.ErrorCode != 0 {
			err = kafka.Error(resp.ErrorCode)
		}
	}
	if err != nil {
		outcome := classifyRequestError(err)
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			outcome = Retriable
		}
		for i := range res.Partitions {
			res.Partitions[i] = PartitionResult{Outcome: outcome, Err: fmt.Errorf("fetch from broker %d: %w", b.Broker(), err),
				LogStart: -1, HighWatermark: -1, Next: b.At(i).Position.Offset()}
		}
		return res
	}
	answered := make([]bool, b.Len())
	// The records kept are capped at the request's MaxBytes of payload:
	// the broker counts wire bytes, and compressed batches can hold far
	// more, so the cap is what bounds memory. Records past it are left
	// for the next fetch.
	room := &room{left: int64(b.MaxBytes())}
	k := 0 // partitions seen: responses usually follow request order
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			i := find(b, t.Topic, p.Partition, k)
			k++
			if i < 0 || answered[i] {
				closeRecords(p.RecordSet.Records)
				continue
			}
			answered[i] = true
			res.Partitions[i] = decode(b, i, p, room)
		}
	}
	for i, ok := range answered {
		if !ok {
			res.Partitions[i] = PartitionResult{Outcome: Retriable, Err: errors.New("partition missing from the fetch response"),
				LogStart: -1, HighWatermark: -1, Next: b.At(i).Position.Offset()}
		}
	}
	return res
}

// request builds the wire request: a full fetch (no fetch session) of
// every entry.
func (f *Fetcher) request(b offsetstore.FetchBatch) *kfetch.Request {
	req := &kfetch.Request{
		ReplicaID:    -1,
		MaxWaitTime:  int32(f.cfg.MaxWait / time.Millisecond),
		MinBytes:     f.cfg.MinBytes,
		MaxBytes:     b.MaxBytes(),
		SessionID:    0,
		SessionEpoch: -1, // no fetch session
	}
	if f.cfg.ReadCommitted {
		req.IsolationLevel = 1
	}
	for i := 0; i < b.Len(); i++ {
		e := b.At(i)
		n := len(req.Topics)
		if n == 0 || req.Topics[n-1].Topic != e.Partition.Topic {
			req.Topics = append(req.Topics, kfetch.RequestTopic{Topic: e.Partition.Topic})
			n++
		}
		req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, kfetch.RequestPartition{
			Partition:          e.Partition.Partition,
			CurrentLeaderEpoch: -1,
			FetchOffset:        e.Position.Offset(),
			LogStartOffset:     -1,
			PartitionMaxBytes:  f.cfg.PartitionMaxBytes,
		})
	}
	return req
}

// find returns the index of the entry for topic/partition; guess, the
// index in request order, is tried first.
func find(b offsetstore.FetchBatch, topic string, partition int32, guess int) int {
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
// most *room bytes of records (at least one record if nothing was kept
// yet, so a record larger than the room still gets through).
func decode(b offsetstore.FetchBatch, i int, p *kfetch.ResponsePartition, room *room) PartitionResult {
	e := b.At(i)
	at := e.Position.Offset()
	pr := PartitionResult{Outcome: classify(p.ErrorCode), LogStart: p.LogStartOffset, HighWatermark: p.HighWatermark, Next: at}
	if pr.Outcome != OK {
		pr.Err = kafka.Error(p.ErrorCode)
		closeRecords(p.RecordSet.Records)
		return pr
	}
	recs, next, bytes, err := readRecords(e.Partition, p.RecordSet.Records, at, room, newAborts(p.AbortedTransactions))
	if err != nil {
		pr.Outcome, pr.Err = Retriable, fmt.Errorf("decoding records of %s at %d: %w", e.Partition, at, err)
		return pr
	}
	pr.Next = next
	if len(recs) > 0 {
		pr.Batch = NewBatch(e.Partition, b.Generation(), e.Position.Epoch(), offsetstore.Span{Start: at, End: next}, recs, bytes)
		pr.Bytes = bytes
	}
	return pr
}

func closeRecords(r protocol.RecordReader) {
	if r == nil {
		return
	}
	for {
		rec, err := r.ReadRecord()
		if err != nil {
			return
		}
		closeBytes(rec.Key)
		closeBytes(rec.Value)
	}
}

func closeBytes(b protocol.Bytes) {
	if b != nil {
		b.Close()
	}
}

// readRecords copies the records at or after `at` out of the response
// (brokers return whole batches, which may start before the requested
// offset) and returns them with the next offset to fetch and their payload
// size. Control batches (transaction markers) are skipped but move next
// past them. It stops once *room is used up (a record that does not fit
// is kept only when nothing else was, so one huge record cannot stall
// the partition); room is decreased by what was kept.
//
// With read_committed, aborts lists the aborted transactions of the
// response: records of those transactions are skipped too (the broker
// returns them; the client filters), and move next past them like
// markers.
func readRecords(tp offsetstore.TopicPartition, r protocol.RecordReader, at int64, room *room, aborts *aborts) (recs []stages.Record, next, bytes int64, err error) {
	next = at
	if r == nil {
		return nil, next, 0, nil
	}
	var readers []protocol.RecordReader
	if s, ok := r.(*protocol.RecordStream); ok {
		readers = s.Records
	} else {
		readers = []protocol.RecordReader{r}
	}
	var arena []byte
	take := func(src protocol.Bytes) ([]byte, error) {
		if src == nil {
			return nil, nil
		}
		n := src.Len()
		if n > cap(arena)-len(arena) {
			arena = make([]byte, 0, max(n, 64<<10))
		}
		dst := arena[len(arena) : len(arena)+n : len(arena)+n]
		arena = arena[:len(arena)+n]
		_, err := io.ReadFull(src, dst)
		src.Close()
		return dst, err
	}
	full := false
	for _, rr := range readers {
		if full {
			closeRecords(rr)
			continue
		}
		if cb, ok := rr.(*protocol.ControlBatch); ok {
			aborts.reach(cb.BaseOffset)
			for {
				cr, err := cb.ReadControlRecord()
				if err != nil {
					break
				}
				if cr.Offset >= next {
					next = cr.Offset + 1
				}
				if cr.Type == controlAbort {
					aborts.end(cb.ProducerID)
				}
			}
			continue
		}
		if rb, ok := rr.(*protocol.RecordBatch); ok && aborts.skip(rb) {
			for {
				rec, err := rb.ReadRecord()
				if err != nil {
					break
				}
				if rec.Offset >= next {
					next = rec.Offset + 1
				}
				closeBytes(rec.Key)
				closeBytes(rec.Value)
			}
			continue
		}
		for {
			rec, rerr := rr.ReadRecord()
			if rerr != nil {
				if !errors.Is(rerr, io.EOF) {
					return nil, at, 0, rerr
				}
				break
			}
			if rec.Offset < next {
				closeBytes(rec.Key)
				closeBytes(rec.Value)
				continue
			}
			size := recordSize(rec)
			if size > room.left && room.kept {
				closeBytes(rec.Key)
				closeBytes(rec.Value)
				closeRecords(rr)
				full = true
				break
			}
			out := stages.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: rec.Offset, Timestamp: rec.Time}
			if out.Key, err = take(rec.Key); err != nil {
				return nil, at, 0, err
			}
			if out.Value, err = take(rec.Value); err != nil {
				return nil, at, 0, err
			}
			if len(rec.Headers) > 0 {
				out.Headers = make([]stages.Header, len(rec.Headers))
				for h, hd := range rec.Headers {
					out.Headers[h] = stages.Header{Key: hd.Key, Value: hd.Value}
				}
			}
			bytes += size
			room.left -= size
			room.kept = true
			recs = append(recs, out)
			next = rec.Offset + 1
		}
	}
	return recs, next, bytes, nil
}

// recordSize is the payload size of a wire record, as stages.Record.Size
// counts it.
func recordSize(r *protocol.Record) int64 {
	var n int64
	if r.Key != nil {
		n += int64(r.Key.Len())
	}
	if r.Value != nil {
		n += int64(r.Value.Len())
	}
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// room is what is left of a response's record budget.
type room struct {
	left int64
	kept bool // some record of the response was kept
}

// controlAbort is the control record type of a transaction abort marker.
const controlAbort = 0

// aborts tracks the aborted transactions of one partition's response (read
// committed): a producer's transactional batches are skipped from its
// transaction's first offset until its abort marker.
type aborts struct {
	list   []kfetch.ResponseTransaction // sorted by first offset
	next   int
	active map[int64]bool // producer ids inside an aborted transaction
}

func newAborts(list []kfetch.ResponseTransaction) *aborts {
	if len(list) == 0 {
		return nil
	}
	l := append([]kfetch.ResponseTransaction(nil), list...)
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
func (a *aborts) skip(b *protocol.RecordBatch) bool {
	if a == nil || !b.Attributes.Transactional() {
		return false
	}
	a.reach(b.BaseOffset)
	return a.active[b.ProducerID]
}

// end closes a producer's aborted transaction at its abort marker.
func (a *aborts) end(producerID int64) {
	if a != nil {
		delete(a.active, producerID)
	}
}
