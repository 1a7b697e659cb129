package produce

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/initproducerid"
	meta "github.com/segmentio/kafka-go/protocol/metadata"
	produceapi "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"

	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/internal/partitioner"
	"github.com/fencepost-dev/fencepost/stages"
)

// Config configures a Producer. The zero value is an idempotent producer
// with the defaults below.
type Config struct {
	// TransactionalID, if set, makes the producer transactional (see
	// Begin): records are written only inside transactions, and
	// initializing fences every older producer with the same id. It must
	// be stable across restarts of the same instance.
	TransactionalID string
	// TransactionTimeout is how long the transaction coordinator lets a
	// transaction stay open before aborting it (and bumping the producer
	// epoch, which fences this producer). Default 10s; the broker caps it
	// (transaction.max.timeout.ms).
	TransactionTimeout time.Duration
	// MaxBatchBytes bounds one partition's record batch in a request.
	// A single record larger than this fails its whole Produce call,
	// before anything is sent, with a RecordTooLargeError. Default (0):
	// each topic's max.message.bytes, the largest batch the broker
	// accepts for it, read with DescribeConfigs on the topic's first
	// call and kept; DefaultMaxBatchBytes (Kafka's default) when it
	// cannot be read, asked again a minute later.
	MaxBatchBytes int
	// MaxAttempts is how often one batch is sent before a transient
	// error (no leader, timeout, network) is returned. Default 10.
	MaxAttempts int
	// RetryBackoff is the first pause between attempts; it doubles up to
	// 1s. Default 100ms.
	RetryBackoff time.Duration
	// RequestTimeout is the time the broker may take to replicate a
	// batch (the Produce request's timeout). Default 30s.
	RequestTimeout time.Duration
	// Compression is the codec of every batch; default none.
	// MaxBatchBytes bounds a batch before compression.
	Compression Compression
	// OnTxnFailed, if set, is called with the error each time a
	// transactional producer's transaction becomes abortable (the
	// *AbortableError Commit would return), and when the producer fails
	// for good (its ErrProducerFenced or *FatalError): once per change,
	// not for every call that meets the failure afterwards. It is
	// called without the producer's lock held, from the goroutine of a
	// call of the producer (not always the one that failed), never
	// concurrently with itself and in the order of the changes; a change
	// is told before the call that made it returns unless another
	// goroutine is in the hook then, which tells it as soon as the hook
	// returns. The hook may call the producer, but should return quickly
	// (send on a channel): the call that runs it waits for it.
	OnTxnFailed func(err error)
}

func (c Config) withDefaults() Config {
	if c.TransactionTimeout <= 0 {
		c.TransactionTimeout = 10 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 10
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	return c
}

// Producer writes records with acks=all as an idempotent producer (a
// producer id from InitProducerID, a sequence number per partition, so a
// retried request is never written twice) and, with a transactional id,
// inside transactions (KIP-98, KIP-447).
//
// Ordering and concurrency: Produce may be called from many goroutines.
// Each partition has at most one batch in flight, held by the call that
// sends it (a per-partition token taken in partition order), so sequence
// numbers stay in order and a retried batch keeps its sequence; calls
// writing to disjoint partitions run in parallel. The producer identity
// and the transaction state are guarded by one mutex that is never held
// across a request. The Producer starts no goroutine that outlives a
// call and owns no connection: the kafkawire.Client's transport does.
type Producer struct {
	client *kafkawire.Client
	cfg    Config

	idToken  chan struct{} // held while the producer identity is (re)initialized
	addToken chan struct{} // held while partitions are added to the transaction

	mu            sync.Mutex
	pid           int64
	producerEpoch int16
	gen           uint64 // identity generation: sequence numbers restart when it changes
	needsReset    bool   // idempotent: a batch's outcome is unknown; renew the identity
	// producerEpochJumps counts re-initializations (transactional) that
	// found the producer epoch moved on by someone else: see
	// ProducerEpochJumps.
	producerEpochJumps int64
	parts              map[partitionKey]*partition
	rr                 uint32
	txn                txnState               // transactional producers only, see txn.go
	limits             map[string]cachedLimit // batch limits by topic, see limit.go
}

// partitionKey names a partition.
type partitionKey struct {
	topic     string
	partition int32
}

// partition is one partition's producer state; its token is held by the
// call that has a batch of the partition in flight, and only that call
// reads or writes seq and gen.
type partition struct {
	token chan struct{}
	seq   int32  // next base sequence
	gen   uint64 // the identity generation seq counts in
}

// New returns a producer sending through client. A transactional
// producer initializes on its first Begin, an idempotent one on its first
// Produce.
func New(client *kafkawire.Client, cfg Config) *Producer {
	return &Producer{
		client:        client,
		cfg:           cfg.withDefaults(),
		idToken:       make(chan struct{}, 1),
		addToken:      make(chan struct{}, 1),
		pid:           -1,
		producerEpoch: -1,
		parts:         map[partitionKey]*partition{},
	}
}

// Transactional reports whether the producer has a transactional id.
func (p *Producer) Transactional() bool { return p.cfg.TransactionalID != "" }

// TransactionalID is the producer's transactional id ("" if it has none).
func (p *Producer) TransactionalID() string { return p.cfg.TransactionalID }

// TopicProducer writes to one topic through a Producer. It implements
// stages.Producer.
type TopicProducer struct {
	p     *Producer
	topic string
}

var _ stages.Producer = (*TopicProducer)(nil)

// ForTopic returns a stages.Producer writing to topic (every record's
// Topic field is ignored, as stages.Producer's contract has it).
func (p *Producer) ForTopic(topic string) *TopicProducer {
	return &TopicProducer{p: p, topic: topic}
}

// Produce writes records to the topic and returns once every one is
// acknowledged by all in-sync replicas (see Producer.Produce).
func (t *TopicProducer) Produce(ctx context.Context, records []stages.Record) error {
	return t.p.Produce(ctx, t.topic, records)
}

// Produce writes records to topic with acks=all and returns nil once
// every one is acknowledged. Records with a key go to the partition
// partitioner.Murmur2 gives the key (where the Java producer, Kafka
// Streams and franz-go put it; ProduceBy places them otherwise); the
// records without a key of one call all go to one partition, the next
// call's to the next (sticky round-robin, for fuller batches). Records
// of one partition keep their order. A zero Timestamp is the time of
// the call.
//
// Errors are classified by the shared table (kafkawire.Class; actionFor
// has the produce's own decisions): a record or batch the broker will
// never accept (too large, invalid, corrupt) is wrapped with
// stages.Permanent. The failures of the destination rather than of the
// records are marked stages.Unavailable (the process chain then holds
// the partition and retries the call instead of dead-lettering its
// records), unless ctx ended: a topic that does not exist or may not be
// written (a *SinkError), transient errors that outlasted MaxAttempts
// (no leader, not enough replicas, time-outs, the network), an error no
// retry fixes (no permission to write idempotently, a version or
// compression the broker does not support: a *FatalError). Anything
// else (ctx ending, an unexpected answer) is returned as is and the
// caller may retry the call. Records of partitions that succeeded
// are written even when the call fails: a retry of the call is
// at-least-once. A record larger than MaxBatchBytes fails the whole call
// before anything is sent (a Permanent *RecordTooLargeError): none of
// the call's records is written.
//
// A transactional producer must be inside a transaction (Begin). A
// failure of a call that may have written something (a request of it
// reached a broker, and not every batch of it was refused outright)
// makes the transaction abortable: the call's records may be partly
// written, and a retry within the transaction would commit duplicates.
// A failure before anything of the call was sent (a record too large,
// the topic's metadata, ctx ended first), or a broker's refusal of every
// batch of the call (a permanent error such as MESSAGE_TOO_LARGE, or no
// permission for the topic), leaves the transaction open: nothing of
// the call was written, the error is returned as the idempotent
// producer's would be, and the transaction may still commit (the caller
// may dead-letter the records inside it). Every error that means the
// transaction is over (the *AbortableError this call or an earlier one
// caused, ErrNotInTransaction, ErrProducerFenced, a *FatalError) is
// returned marked stages.Unavailable, so that the process chain holds
// the records rather than dead-letter them, until the caller aborts;
// errors.Is and errors.As still find the error and its cause (which may
// be marked Permanent, say a refused batch: the Unavailable mark comes
// first, the record is not at fault).
func (p *Producer) Produce(ctx context.Context, topic string, records []stages.Record) error {
	return p.ProduceBy(ctx, topic, nil, records)
}

// ProduceBy is Produce with the records that have a key placed by by
// (nil: partitioner.Murmur2). The records without a key are spread as
// Produce spreads them, whatever by.
func (p *Producer) ProduceBy(ctx context.Context, topic string, by partitioner.Func, records []stages.Record) error {
	if len(records) == 0 {
		return nil
	}
	if err := p.enter(); err != nil {
		if p.Transactional() {
			return txnOver(err)
		}
		return err
	}
	if by == nil {
		by = partitioner.Murmur2
	}
	wrote, _, err := p.produce(ctx, topic, by, -1, records)
	if p.leave(err, wrote) {
		return txnOver(err)
	}
	return err
}

// produce is one Produce call enter admitted; wrote reports whether
// something of it may have been written (see Produce).
func (p *Producer) produce(ctx context.Context, topic string, by partitioner.Func, fixed int32, records []stages.Record) (wrote bool, next int64, err error) {
	c := callPool.Get().(*call)
	defer c.release()
	c.p, c.topic, c.by, c.fixed = p, topic, by, fixed
	if err := c.route(ctx, records); err != nil {
		return false, -1, destinationError(ctx, err)
	}
	c.limit = p.limitFor(ctx, topic)
	if err := c.checkSizes(records); err != nil {
		return false, -1, err
	}
	if err := c.acquire(ctx); err != nil {
		return false, -1, err
	}
	// Nothing of a call goes out once its context has ended (acquire's
	// select takes a free token as readily as it sees ctx done): the
	// requests below would be refused unsent, yet count as maybe written
	// (addPartitions, mayHaveWritten) and fail the transaction.
	if err := context.Cause(ctx); err != nil {
		return false, -1, err
	}
	if err := p.ensureIdentity(ctx); err != nil {
		return false, -1, destinationError(ctx, err)
	}
	if p.Transactional() {
		if sent, err := p.addPartitions(ctx, topic, c.touched); err != nil {
			return sent, -1, err
		}
	}
	err = c.send(ctx, records)
	next = -1
	for i := range c.chunks {
		next = max(next, c.chunks[i].next)
	}
	return err != nil && c.mayHaveWritten(), next, err
}

// call is the working state of one Produce call, pooled.
type call struct {
	p       *Producer
	topic   string
	by      partitioner.Func // places the keyed records
	limit   batchLimit       // the topic's batch limit
	now     int64
	assign  []int32 // partition of each record
	order   []int32 // record indices grouped by partition, stable
	counts  []int32 // records per partition (index: partition)
	touched []int32 // partitions with records, ascending
	held    []*partition
	chunks  []chunk
	// fixed is the partition every record goes to (ProduceTo), -1 to
	// place records by key.
	fixed int32
}

// chunk is one partition's batch in flight.
type chunk struct {
	part      int32
	st        *partition
	recs      []int32 // indices (into the call's records) still to send
	enc       *batchEncoder
	n         int    // records in the encoded batch
	pending   bool   // enc holds a batch not yet acknowledged
	sent      bool   // that batch went out at least once
	gen       uint64 // identity generation the batch is stamped with
	acked     bool   // a batch of the chunk was acknowledged
	refused   bool   // the batch was refused outright on its only attempt: not written
	attempts  int
	err       error
	errCode   int16
	retryable bool
	// base is the offset the broker gave the batch last acknowledged,
	// -1 when it did not say; next the offset after it.
	base, next int64
}

var callPool = sync.Pool{New: func() any { return new(call) }}

var encoderPool = sync.Pool{New: func() any { return new(batchEncoder) }}

func (c *call) release() {
	for i := range c.held {
		<-c.held[i].token
	}
	for i := range c.chunks {
		if c.chunks[i].enc != nil {
			if cap(c.chunks[i].enc.buf) <= 4<<20 {
				encoderPool.Put(c.chunks[i].enc)
			}
		}
		c.chunks[i] = chunk{}
	}
	c.p, c.by = nil, nil
	c.held = c.held[:0]
	c.chunks = c.chunks[:0]
	callPool.Put(c)
}

// route assigns every record its partition.
func (c *call) route(ctx context.Context, records []stages.Record) error {
	c.now = time.Now().UnixMilli()
	n, err := c.p.partitionCount(ctx, c.topic)
	if err != nil {
		return err
	}
	c.assign = slices.Grow(c.assign[:0], len(records))[:len(records)]
	c.counts = slices.Grow(c.counts[:0], n)[:n]
	clear(c.counts)
	var sticky int32 = -1
	for i := range records {
		var part int32
		if c.fixed >= 0 {
			if c.fixed >= int32(n) {
				return &SinkError{Topic: c.topic, Err: fmt.Errorf("partition %d does not exist (the topic has %d)", c.fixed, n)}
			}
			part = c.fixed
		} else if records[i].Key == nil {
			if sticky < 0 {
				c.p.mu.Lock()
				sticky = int32(c.p.rr % uint32(n))
				c.p.rr++
				c.p.mu.Unlock()
			}
			part = sticky
		} else {
			part = c.by(records[i].Key, n)
		}
		c.assign[i] = part
		c.counts[part]++
	}
	c.touched = c.touched[:0]
	for part, k := range c.counts {
		if k > 0 {
			c.touched = append(c.touched, int32(part))
		}
	}
	// stable counting sort: order holds the records of touched[0], then
	// of touched[1], ...
	c.order = slices.Grow(c.order[:0], len(records))[:len(records)]
	start := int32(0)
	for _, part := range c.touched {
		k := c.counts[part]
		c.counts[part] = start
		start += k
	}
	for i, part := range c.assign {
		c.order[c.counts[part]] = int32(i)
		c.counts[part]++
	}
	return nil
}

// checkSizes fails the call, before anything is sent, if a record does
// not fit in a batch of MaxBatchBytes on its own (as encode measures it:
// the first record of a batch).
func (c *call) checkSizes(records []stages.Record) error {
	limit := c.limit.bytes
	for i := range records {
		r := &records[i]
		ts := c.now
		if !r.Timestamp.IsZero() {
			ts = r.Timestamp.UnixMilli()
		}
		if size := batchHeaderSize + encodedSize(r, ts, ts, 0); size > limit {
			return stages.Permanent(&RecordTooLargeError{Topic: c.topic, Size: size, Limit: limit, from: c.limit.from, lookupErr: c.limit.err})
		}
	}
	return nil
}

// mayHaveWritten reports whether some batch of the call may have been
// written: acknowledged, or sent with an outcome not known to be a
// refusal.
func (c *call) mayHaveWritten() bool {
	for i := range c.chunks {
		ch := &c.chunks[i]
		if ch.acked || (ch.sent && !ch.refused) {
			return true
		}
	}
	return false
}

// acquire takes the tokens of the touched partitions, in ascending order
// (so two calls never wait on each other in a cycle), and sets up one
// chunk per partition.
func (c *call) acquire(ctx context.Context) error {
	start := 0
	for _, part := range c.touched {
		st := c.p.partitionState(c.topic, part)
		select {
		case st.token <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		c.held = append(c.held, st)
		end := start
		for end < len(c.order) && c.assign[c.order[end]] == part {
			end++
		}
		c.chunks = append(c.chunks, chunk{part: part, st: st, recs: c.order[start:end], base: -1, next: -1})
		start = end
	}
	return nil
}

func (p *Producer) partitionState(topic string, part int32) *partition {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := partitionKey{topic, part}
	st := p.parts[k]
	if st == nil {
		st = &partition{token: make(chan struct{}, 1)}
		p.parts[k] = st
	}
	return st
}

// identity returns the producer id, producer epoch and identity
// generation.
func (p *Producer) identity() (int64, int16, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid, p.producerEpoch, p.gen
}

// encode fills the chunk's batch with its next records, up to
// MaxBatchBytes, stamped with the current identity and the partition's
// next sequence.
func (c *call) encode(ch *chunk, records []stages.Record, txn bool) error {
	if ch.enc == nil {
		ch.enc = encoderPool.Get().(*batchEncoder)
	}
	e := ch.enc
	e.reset(txn)
	e.compressWith(c.p.cfg.Compression)
	limit := c.limit.bytes
	n := 0
	for _, i := range ch.recs {
		r := &records[i]
		ts := c.now
		if !r.Timestamp.IsZero() {
			ts = r.Timestamp.UnixMilli()
		}
		first := ts
		if n > 0 {
			first = e.firstTS
		}
		body := recordSize(r.Key, r.Value, r.Headers, ts-first, int32(n))
		size := varintLen(int64(body)) + body
		if e.len()+size > limit {
			if n == 0 {
				return stages.Permanent(&RecordTooLargeError{Topic: c.topic, Size: batchHeaderSize + size, Limit: limit})
			}
			break
		}
		e.appendSized(r.Key, r.Value, r.Headers, ts, body)
		n++
	}
	ch.n = n
	ch.pending = true
	ch.sent = false
	ch.attempts = 0
	return c.stamp(ch)
}

// stamp (re)writes the chunk's producer fields for the current identity;
// a partition whose sequence belongs to an older identity restarts at 0.
func (c *call) stamp(ch *chunk) error {
	pid, producerEpoch, gen := c.p.identity()
	if ch.st.gen != gen {
		ch.st.gen, ch.st.seq = gen, 0
	}
	ch.gen = gen
	if ch.enc.finished { // only the producer fields change
		stamp(ch.enc.batch(), pid, producerEpoch, ch.st.seq)
		return nil
	}
	_, err := ch.enc.finish(pid, producerEpoch, ch.st.seq)
	return err
}

// send writes every chunk, retrying transient failures with the same
// batch and sequence, and classifies what failed for good.
func (c *call) send(ctx context.Context, records []stages.Record) error {
	txn := c.p.Transactional()
	for i := range c.chunks {
		if err := c.encode(&c.chunks[i], records, txn); err != nil {
			c.chunks[i].err = err
			c.chunks[i].pending = false
		}
	}
	backoff := c.p.cfg.RetryBackoff
	for {
		active := c.active()
		if len(active) == 0 {
			break
		}
		if err := c.p.ensureIdentity(ctx); err != nil { // renewed after a reset
			c.failAll(active, err)
			break
		}
		leaders, err := c.p.leaders(ctx, c.topic)
		if err != nil {
			c.failAll(active, err)
			break
		}
		retry := c.round(ctx, active, leaders)
		if ctx.Err() != nil {
			c.failAll(c.active(), context.Cause(ctx))
			break
		}
		// acknowledged chunks move on to their next records
		for _, ch := range active {
			if ch.pending || ch.err != nil {
				continue
			}
			ch.recs = ch.recs[ch.n:]
			if len(ch.recs) > 0 {
				if err := c.encode(ch, records, txn); err != nil {
					ch.err = err
					ch.pending = false
				}
			}
		}
		if retry {
			if err := sleep(ctx, backoff); err != nil {
				c.failAll(c.active(), err)
				break
			}
			backoff = min(2*backoff, time.Second)
		} else {
			backoff = c.p.cfg.RetryBackoff
		}
	}
	return c.result(ctx)
}

// active returns the chunks with a batch to send.
func (c *call) active() []*chunk {
	var out []*chunk
	for i := range c.chunks {
		ch := &c.chunks[i]
		if ch.err == nil && ch.pending {
			out = append(out, ch)
		}
	}
	return out
}

func (c *call) failAll(chunks []*chunk, err error) {
	for _, ch := range chunks {
		ch.err = err
		ch.retryable = true
		c.p.abandon(ch)
		ch.pending = false
	}
}

// abandon notes that a chunk's batch is given up on: if it was sent, it
// may have been written, so its sequence number cannot be reused with
// other records. An idempotent producer renews its identity before the
// next batch; a transactional one must abort (see leave).
func (p *Producer) abandon(ch *chunk) {
	if !ch.sent {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen == ch.gen {
		p.needsReset = true
	}
}

// round sends one request per leader for the active chunks and applies
// the answers. It reports whether some chunk should be retried.
func (c *call) round(ctx context.Context, active []*chunk, leaders map[int32]int32) bool {
	leaderOf := func(ch *chunk) int32 {
		if leader, ok := leaders[ch.part]; ok {
			return leader
		}
		return -1
	}
	first := leaderOf(active[0])
	if !slices.ContainsFunc(active[1:], func(ch *chunk) bool { return leaderOf(ch) != first }) {
		// one broker leads them all (a one-broker cluster, or a call
		// of one partition): one request, from this goroutine
		c.request(ctx, active)
	} else {
		byLeader := map[int32][]*chunk{}
		for _, ch := range active {
			byLeader[leaderOf(ch)] = append(byLeader[leaderOf(ch)], ch)
		}
		var wg sync.WaitGroup
		for _, chunks := range byLeader {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.request(ctx, chunks)
			}()
		}
		wg.Wait()
	}
	retry := false
	for _, ch := range active {
		if ch.pending && ch.err == nil {
			retry = true
		}
	}
	return retry
}

// request sends the chunks (all led by one broker) in one Produce
// request and applies the answer to each.
func (c *call) request(ctx context.Context, chunks []*chunk) {
	req := &rawproduce.Request{
		TransactionalID: c.p.cfg.TransactionalID,
		Acks:            -1,
		Timeout:         int32(c.p.cfg.RequestTimeout / time.Millisecond),
		Topics:          []rawproduce.RequestTopic{{Topic: c.topic, Partitions: make([]rawproduce.RequestPartition, len(chunks))}},
	}
	for i, ch := range chunks {
		if !ch.sent && ch.gen != c.currentGen() {
			// never sent under its identity (or refused): restamp. A
			// batch that went out keeps its identity and sequence
			// until it is acknowledged or given up.
			_ = c.stamp(ch) // finished already: restamping cannot fail
		}
		req.Topics[0].Partitions[i] = rawproduce.RequestPartition{
			Partition: ch.part,
			RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(ch.enc.recordSet())},
		}
		ch.sent = true
		ch.attempts++
	}
	rctx, cancel := context.WithTimeout(ctx, c.p.cfg.RequestTimeout+10*time.Second)
	defer cancel()
	m, err := c.p.client.RoundTrip(rctx, req)
	if err != nil {
		for _, ch := range chunks {
			c.transient(ch, fmt.Errorf("produce to %s/%d: %w", c.topic, ch.part, err), int16(kafka.NetworkException))
		}
		return
	}
	resp, ok := m.(*produceapi.Response)
	if !ok {
		for _, ch := range chunks {
			c.transient(ch, fmt.Errorf("produce to %s/%d: unexpected response %T", c.topic, ch.part, m), int16(kafka.NetworkException))
		}
		return
	}
	for _, ch := range chunks {
		code, found := int16(kafka.NetworkException), false
		for _, t := range resp.Topics {
			if t.Topic != c.topic {
				continue
			}
			for _, pr := range t.Partitions {
				if pr.Partition == ch.part {
					code, found = pr.ErrorCode, true
					ch.base = pr.BaseOffset
				}
			}
		}
		if !found {
			c.transient(ch, fmt.Errorf("produce to %s/%d: the broker's answer lacks the partition", c.topic, ch.part), code)
			continue
		}
		c.apply(ch, code)
	}
}

func (c *call) currentGen() uint64 {
	_, _, gen := c.p.identity()
	return gen
}

// apply handles a partition's error code.
func (c *call) apply(ch *chunk, code int16) {
	act := actionFor(code, c.p.Transactional())
	if act == actWritten {
		ch.st.seq = nextSequence(ch.st.seq, ch.n)
		if ch.base >= 0 && code == 0 { // (a duplicate's base offset is not the batch's)
			ch.next = ch.base + int64(ch.n)
		}
		ch.pending = false
		ch.err = nil
		ch.acked = true
		return
	}
	kerr := kafka.Error(code)
	where := fmt.Sprintf("produce to %s/%d", c.topic, ch.part) // errors only: no formatting per acknowledged batch
	switch act {
	case actRenew:
		c.renewAndRetry(ch, fmt.Errorf("%s: %w", where, kerr), code)
	case actAbortable:
		c.fail(ch, &AbortableError{Err: fmt.Errorf("%s: %w", where, kerr)}, code)
	case actFenced:
		c.fail(ch, fmt.Errorf("%s: %w (%w)", where, ErrProducerFenced, kerr), code)
	case actRefused:
		c.refuse(ch)
		c.fail(ch, stages.Permanent(fmt.Errorf("%s: %w", where, kerr)), code)
	case actSink:
		c.refuse(ch)
		c.fail(ch, &SinkError{Topic: c.topic, Err: kerr}, code)
	case actUnknownTopic:
		if ch.attempts >= c.p.cfg.MaxAttempts {
			c.fail(ch, &SinkError{Topic: c.topic, Err: kerr}, code)
			return
		}
		c.transient(ch, fmt.Errorf("%s: %w", where, kerr), code)
	case actTransient:
		c.transient(ch, fmt.Errorf("%s: %w", where, kerr), code)
	case actFatal:
		err := fmt.Errorf("%s: %w", where, kerr)
		if code == int16(kafka.ClusterAuthorizationFailed) || code == int16(kafka.TransactionalIDAuthorizationFailed) {
			// no permission to write idempotently or with this
			// transactional id
			err = fmt.Errorf("%w (check the client's permissions: IDEMPOTENT_WRITE on the cluster, or WRITE on the transactional id)", err)
		}
		c.fail(ch, &FatalError{Err: err}, code)
	default:
		c.fail(ch, fmt.Errorf("%s: %w", where, kerr), code)
	}
}

// action is what apply does with a partition's error code.
type action uint8

const (
	actWritten      action = iota // the batch is written
	actTransient                  // send the same batch again, up to MaxAttempts
	actRenew                      // renew the producer id and send the batch again
	actAbortable                  // the transaction must abort (*AbortableError)
	actFenced                     // ErrProducerFenced
	actRefused                    // the records are refused for good: stages.Permanent
	actSink                       // the topic refuses this client: *SinkError
	actUnknownTopic               // actTransient, then a *SinkError once MaxAttempts are spent
	actFatal                      // no retry fixes it: *FatalError
	actFail                       // give the batch up, the error unmarked
)

// actionFor decides, from the shared classification (kafkawire), what a
// produce does with a partition's error code. The decisions a produce
// makes differently within a class, and why:
//   - DUPLICATE_SEQUENCE_NUMBER (ProducerState): an earlier attempt of
//     this very batch was written; Kafka's clients take it as success.
//     The other ProducerState codes mean the broker's state of this
//     producer is not what the sequence assumes (it lost it, or an
//     earlier batch's outcome was unknown): the batch was not written.
//   - INVALID_PRODUCER_EPOCH (Fencing) does not fence a transactional
//     producer by itself: the coordinator also bumps the producer epoch
//     after a transaction time-out (KIP-588); Abort tells them apart.
//     Outside a transaction every stale producer epoch renews the id.
//   - UNKNOWN_TOPIC_OR_PARTITION (StaleMetadata) is retried like a
//     moved leader, but a topic that stays unknown is the destination's
//     failure.
//   - TOPIC_AUTHORIZATION_FAILED and INVALID_TOPIC_EXCEPTION (Fatal)
//     concern one topic, not the producer: another topic may be written.
func actionFor(code int16, transactional bool) action {
	switch kafkawire.ClassifyCode(code) {
	case kafkawire.OK:
		return actWritten
	case kafkawire.ProducerState:
		switch {
		case code == int16(kafka.DuplicateSequenceNumber):
			return actWritten
		case transactional:
			return actAbortable
		}
		return actRenew
	case kafkawire.Fencing:
		switch {
		case transactional && code == int16(kafka.InvalidProducerEpoch):
			return actAbortable
		case transactional:
			return actFenced
		}
		return actRenew
	case kafkawire.Permanent:
		return actRefused
	case kafkawire.StaleMetadata, kafkawire.NotCoordinator, kafkawire.Retriable:
		if code == int16(kafka.UnknownTopicOrPartition) {
			return actUnknownTopic
		}
		return actTransient
	case kafkawire.Fatal:
		if topicRefused(code) {
			return actSink
		}
		return actFatal
	}
	// Unexpected, and the classes no produce is answered (OutOfRange,
	// StaleMember)
	return actFail
}

// topicRefused reports the codes that say the topic refuses this client
// (not authorized, an invalid name): a *SinkError.
func topicRefused(code int16) bool {
	return code == int16(kafka.TopicAuthorizationFailed) || code == int16(kafka.InvalidTopic)
}

// refuse notes that the broker refused the chunk's batch for good. On
// the batch's first attempt that means it was not written; after earlier
// attempts whose outcome is unknown, it may have been (the refusal may
// be of a retry), so it is not noted then.
func (c *call) refuse(ch *chunk) {
	if ch.attempts == 1 {
		ch.refused = true
	}
}

// renewAndRetry handles a batch the broker refused because of the
// producer's identity (its sequence state was lost, or its producer
// epoch is stale, outside a transaction): the batch was not written, so
// it is sent again, under a new producer id.
func (c *call) renewAndRetry(ch *chunk, err error, code int16) {
	c.p.resetIdentity(ch.gen)
	ch.sent = false // refused, not written
	c.transient(ch, err, code)
}

// transient keeps the chunk for another attempt (same batch, same
// sequence), unless it has had MaxAttempts.
func (c *call) transient(ch *chunk, err error, code int16) {
	if ch.attempts >= c.p.cfg.MaxAttempts {
		ch.retryable = true
		c.fail(ch, err, code)
		return
	}
	ch.err = nil
	ch.errCode = code
}

// fail gives up on the chunk.
func (c *call) fail(ch *chunk, err error, code int16) {
	c.p.abandon(ch)
	ch.err = err
	ch.errCode = code
	ch.pending = false
}

// result is the call's error: the failed chunks' errors joined, those
// of the destination (see Produce) marked stages.Unavailable; the whole
// is Permanent only if every failed chunk's error is (otherwise the
// chunks' own marks are taken off: stages.IsPermanent looks into every
// error joined).
func (c *call) result(ctx context.Context) error {
	var errs []error
	permanent := true
	for i := range c.chunks {
		ch := &c.chunks[i]
		if err := ch.err; err != nil {
			var sink *SinkError
			var fatal *FatalError
			if ch.retryable || errors.As(err, &sink) || errors.As(err, &fatal) {
				err = destinationError(ctx, err)
			}
			errs = append(errs, err)
			permanent = permanent && stages.IsPermanent(err)
		}
	}
	switch {
	case len(errs) == 0:
		return nil
	case len(errs) == 1:
		return errs[0]
	case permanent:
		return stages.Permanent(errors.Join(errs...))
	}
	for i, err := range errs {
		// a chunk's error is marked at its top (see apply)
		if inner := errors.Unwrap(err); stages.IsPermanent(err) && inner != nil && !stages.IsPermanent(inner) {
			errs[i] = inner
		}
	}
	return errors.Join(errs...)
}

// destinationError marks err, a failure of the destination rather than
// of the records, stages.Unavailable, unless ctx ended (the caller is
// stopping: nothing to hold) or err is marked already.
func destinationError(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || stages.IsPermanent(err) || stages.IsUnavailable(err) {
		return err
	}
	return stages.Unavailable(err)
}

// nextSequence is the sequence after n records from seq: sequences wrap
// from the largest int32 to 0, as Kafka's do.
func nextSequence(seq int32, n int) int32 {
	return int32((int64(seq) + int64(n)) % (1 << 31))
}

// resetIdentity makes the next batch renew an idempotent producer's id,
// unless the identity already changed since generation gen.
func (p *Producer) resetIdentity(gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen == gen {
		p.needsReset = true
	}
}

// ensureIdentity initializes an idempotent producer's id on first use
// and renews it after a reset. (A transactional producer initializes in
// Begin and Abort.)
func (p *Producer) ensureIdentity(ctx context.Context) error {
	if p.Transactional() {
		return nil
	}
	select {
	case p.idToken <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { <-p.idToken }()
	p.mu.Lock()
	ok := p.pid >= 0 && !p.needsReset
	p.mu.Unlock()
	if ok {
		return nil
	}
	err := p.initProducerID(ctx)
	if errors.Is(err, kafka.ClusterAuthorizationFailed) {
		return &FatalError{Err: fmt.Errorf("%w (an idempotent producer needs the IDEMPOTENT_WRITE permission on the cluster "+
			"from brokers before Kafka 2.8, WRITE on a topic from 2.8: check the client's ACLs)", err)}
	}
	return err
}

// initProducerID gets a producer id and producer epoch (for a
// transactional id: the next producer epoch, fencing older producers; an
// idempotent producer gets a new id) and starts a new identity
// generation, so every partition's sequence restarts at 0.
func (p *Producer) initProducerID(ctx context.Context) error {
	req := &initproducerid.Request{
		TransactionalID:      p.cfg.TransactionalID,
		TransactionTimeoutMs: int32(p.cfg.TransactionTimeout / time.Millisecond),
		ProducerID:           -1,
		ProducerEpoch:        -1,
	}
	if p.Transactional() {
		// Re-initializing (after an abort) names the current id and
		// producer epoch (KIP-360): the coordinator bumps it only if
		// they are still current, so a producer that was fenced
		// meanwhile cannot take the transactional id back.
		p.mu.Lock()
		req.ProducerID, req.ProducerEpoch = p.pid, p.producerEpoch
		p.mu.Unlock()
	}
	var resp *initproducerid.Response
	err := p.coordinatorCall(ctx, "InitProducerID", func(ctx context.Context) (int16, error) {
		m, err := p.client.RoundTrip(ctx, req)
		if err != nil {
			return 0, err
		}
		resp = m.(*initproducerid.Response)
		return resp.ErrorCode, nil
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Transactional() && req.ProducerID >= 0 && resp.ProducerID == req.ProducerID && resp.ProducerEpoch > req.ProducerEpoch+1 {
		// our re-initialization bumps the producer epoch by one: more
		// means it was bumped meanwhile by the coordinator (a transaction
		// timeout) or by another producer's InitProducerID
		p.producerEpochJumps++
	}
	p.pid, p.producerEpoch = resp.ProducerID, resp.ProducerEpoch
	p.gen++
	p.needsReset = false
	return nil
}

// partitionCount returns how many partitions topic has (from the
// transport's metadata cache), retrying while the topic is unknown.
func (p *Producer) partitionCount(ctx context.Context, topic string) (int, error) {
	t, err := p.topicMetadata(ctx, topic)
	if err != nil {
		return 0, err
	}
	return len(t.Partitions), nil
}

// leaders returns the leader of each partition of topic.
func (p *Producer) leaders(ctx context.Context, topic string) (map[int32]int32, error) {
	t, err := p.topicMetadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int32, len(t.Partitions))
	for _, part := range t.Partitions {
		out[part.PartitionIndex] = part.LeaderID
	}
	return out, nil
}

func (p *Producer) topicMetadata(ctx context.Context, topic string) (meta.ResponseTopic, error) {
	backoff := p.cfg.RetryBackoff
	var last error
	for attempt := 1; ; attempt++ {
		m, err := p.client.RoundTrip(ctx, &meta.Request{TopicNames: []string{topic}})
		if err == nil {
			resp := m.(*meta.Response)
			for _, t := range resp.Topics {
				if t.Name != topic {
					continue
				}
				switch {
				case t.ErrorCode == 0 && len(t.Partitions) > 0:
					return t, nil
				case topicRefused(t.ErrorCode):
					return t, &SinkError{Topic: topic, Err: kafka.Error(t.ErrorCode)}
				case t.ErrorCode != 0:
					err = kafka.Error(t.ErrorCode)
				default:
					err = kafka.UnknownTopicOrPartition
				}
			}
			if err == nil {
				err = kafka.UnknownTopicOrPartition
			}
			last = err
		} else {
			last = fmt.Errorf("metadata for topic %q: %w", topic, err)
		}
		if ctx.Err() != nil {
			return meta.ResponseTopic{}, context.Cause(ctx)
		}
		if attempt >= p.cfg.MaxAttempts {
			if errors.Is(last, kafka.UnknownTopicOrPartition) {
				return meta.ResponseTopic{}, &SinkError{Topic: topic, Err: last}
			}
			return meta.ResponseTopic{}, last
		}
		if err := sleep(ctx, backoff); err != nil {
			return meta.ResponseTopic{}, err
		}
		backoff = min(2*backoff, time.Second)
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
