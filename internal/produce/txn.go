package produce

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/addoffsetstotxn"
	"github.com/segmentio/kafka-go/protocol/addpartitionstotxn"
	"github.com/segmentio/kafka-go/protocol/endtxn"
	"github.com/segmentio/kafka-go/protocol/txnoffsetcommit"

	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/stages"
)

// The life of a transactional producer:
//
//	uninit --Begin--> open --Commit--> ending --> ready --Begin--> open ...
//	                   |  --Abort---> ending --> ready
//	                   +-- a failure --> abortable --Abort--> ready
//	any --fenced or fatal--> failed (for good)
const (
	txnUninit = iota
	txnReady
	txnOpen
	txnEnding // Commit or Abort under way: no new Produce
	txnAbortable
	txnFailed
)

// txnState is a transactional producer's state, guarded by Producer.mu.
type txnState struct {
	state    int
	err      error // the abortable or fatal error
	inflight int   // Produce and SendOffsets calls under way
	drained  chan struct{}
	added    map[partitionKey]bool // partitions registered with the coordinator
	groups   map[string]bool       // groups whose offsets are in the transaction
	// notes are the failures Config.OnTxnFailed has still to be told,
	// in order; notifying is set while a goroutine tells it (see notify).
	notes     []error
	notifying bool
}

// enter admits a Produce or SendOffsets call: for a transactional
// producer, only inside an open transaction.
func (p *Producer) enter() error {
	if !p.Transactional() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.txn.state {
	case txnFailed, txnAbortable:
		return p.txn.err
	case txnOpen:
		p.txn.inflight++
		return nil
	}
	return ErrNotInTransaction
}

// leave ends a call enter admitted. A call that failed after it may
// have written something (wrote) fails the transaction: its outputs may
// be partly written, so the transaction must not commit. One that
// failed before (nothing of it reached a broker) leaves the transaction
// open, unless its error ends the producer (fenced, fatal) or is
// abortable in itself. It reports whether the call's error failed the
// transaction.
func (p *Producer) leave(err error, wrote bool) (failed bool) {
	if !p.Transactional() {
		return false
	}
	defer p.notify()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.txn.inflight--
	if err != nil && (wrote || endsTxn(err)) {
		p.failLocked(err)
		failed = true
	}
	if p.txn.inflight == 0 && p.txn.drained != nil {
		close(p.txn.drained)
		p.txn.drained = nil
	}
	return failed
}

// endsTxn reports whether err ends the transaction by itself, whatever
// was written: abortable, fenced, fatal, or no transaction open.
func endsTxn(err error) bool {
	var ab *AbortableError
	var fatal *FatalError
	return errors.As(err, &ab) || errors.As(err, &fatal) || errors.Is(err, ErrProducerFenced) || errors.Is(err, ErrNotInTransaction)
}

// txnOver is the error a transactional Produce returns when its
// transaction is over: err, as an *AbortableError unless it is one or
// ends the producer, marked stages.Unavailable.
func txnOver(err error) error {
	if !endsTxn(err) {
		err = &AbortableError{Err: err}
	}
	return stages.Unavailable(err)
}

// failLocked records err: fenced and fatal errors end the producer, any
// other error makes the transaction abortable. Each change of state is
// noted for Config.OnTxnFailed (the caller calls notify once it has
// unlocked p.mu).
func (p *Producer) failLocked(err error) {
	var fatal *FatalError
	switch {
	case p.txn.state == txnFailed:
		return
	case errors.Is(err, ErrProducerFenced):
		p.txn.state, p.txn.err = txnFailed, err
	case errors.As(err, &fatal):
		p.txn.state, p.txn.err = txnFailed, err
	case p.txn.state == txnOpen || p.txn.state == txnEnding:
		var ab *AbortableError
		if !errors.As(err, &ab) {
			err = &AbortableError{Err: err}
		}
		p.txn.state, p.txn.err = txnAbortable, err
	default: // abortable already, or no transaction
		return
	}
	if p.cfg.OnTxnFailed != nil {
		p.txn.notes = append(p.txn.notes, p.txn.err)
	}
}

func (p *Producer) fail(err error) error {
	defer p.notify()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failLocked(err)
	return err
}

// notify tells Config.OnTxnFailed the failures noted, in order, without
// holding p.mu. One goroutine at a time does: another that finds it at
// work leaves its note to it, so the hook is never called concurrently
// with itself, and a hook that calls the producer (which may fail and
// note again) cannot deadlock.
func (p *Producer) notify() {
	if p.cfg.OnTxnFailed == nil {
		return
	}
	p.mu.Lock()
	if p.txn.notifying || len(p.txn.notes) == 0 {
		p.mu.Unlock()
		return
	}
	p.txn.notifying = true
	defer func() { // also if the hook panics
		p.txn.notifying = false
		p.mu.Unlock()
	}()
	for len(p.txn.notes) > 0 {
		err := p.txn.notes[0]
		p.txn.notes[0] = nil
		p.txn.notes = p.txn.notes[1:]
		p.mu.Unlock()
		p.cfg.OnTxnFailed(err)
		p.mu.Lock()
	}
}

// drain waits until no Produce or SendOffsets call is under way.
func (p *Producer) drain(ctx context.Context) error {
	p.mu.Lock()
	if p.txn.inflight == 0 {
		p.mu.Unlock()
		return nil
	}
	if p.txn.drained == nil {
		p.txn.drained = make(chan struct{})
	}
	ch := p.txn.drained
	p.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Begin opens a transaction. The first Begin initializes the producer
// (InitProducerID with the transactional id), which fences every older
// producer with the same id and completes or aborts whatever
// transaction it left open. Begin fails with ErrTransactionInProgress
// while a transaction is open, and with the stored error once the
// producer is fenced or failed.
func (p *Producer) Begin(ctx context.Context) error {
	if !p.Transactional() {
		return ErrNotTransactional
	}
	p.mu.Lock()
	state, err := p.txn.state, p.txn.err
	p.mu.Unlock()
	switch state {
	case txnFailed:
		return err
	case txnOpen, txnEnding, txnAbortable:
		return ErrTransactionInProgress
	case txnUninit:
		if err := p.initTxn(ctx); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.txn.state = txnOpen
	p.txn.err = nil
	p.txn.added = map[partitionKey]bool{}
	p.txn.groups = map[string]bool{}
	return nil
}

// Recover tries to take back a producer fenced (ErrProducerFenced) by a
// producer epoch bump (KIP-360, KIP-588): it asks the transaction
// coordinator for a new producer epoch, naming the producer's current id
// and producer epoch. The coordinator grants it when it bumped the
// producer epoch itself, aborting a transaction that outlived its
// timeout: the producer is then ready for Begin, and that transaction's
// records and offsets are gone. It refuses, and Recover returns
// ErrProducerFenced, when another producer initialized the same
// transactional id since: this producer's work belongs to that one. A
// producer that is not fenced is left as it is (Recover returns its fatal
// error, or nil). Call it with no Produce or SendOffsets under way.
func (p *Producer) Recover(ctx context.Context) error {
	if !p.Transactional() {
		return ErrNotTransactional
	}
	p.mu.Lock()
	state, err := p.txn.state, p.txn.err
	p.mu.Unlock()
	switch {
	case state != txnFailed:
		return nil
	case !errors.Is(err, ErrProducerFenced):
		return err
	}
	p.mu.Lock()
	left := maps.Clone(p.txn.added)
	p.mu.Unlock()
	if err := p.initProducerID(ctx); err != nil {
		return err
	}
	p.markAborted(ctx, left)
	p.ready()
	return nil
}

// markAborted writes an abort marker of this producer into each of parts,
// the partitions of a transaction that ended without our EndTxn (the
// broker aborted it: it outlived its timeout, or the broker restarted),
// by registering them in an empty transaction and aborting it. Call it
// once the producer has its new producer epoch.
//
// Apache Kafka writes those markers itself when it aborts a transaction.
// The embedded broker (kfake) does not when it aborts the transactions
// open at a crash: it only notes them as aborted, and a read_committed
// reader then skips every later record of this producer in those
// partitions, committed or not, until it meets an abort marker of the
// producer (in a kill loop that hid thousands of committed records). An
// extra marker costs two requests on this rare path and changes nothing
// for a reader of Apache Kafka.
//
// It is best effort: if a request fails, the coordinator keeps the empty
// transaction open and the next one (Begin, writes, Commit or Abort) ends
// it with the rest.
func (p *Producer) markAborted(ctx context.Context, parts map[partitionKey]bool) {
	if len(parts) == 0 {
		return
	}
	byTopic := map[string][]int32{}
	for k := range parts {
		byTopic[k.topic] = append(byTopic[k.topic], k.partition)
	}
	p.mu.Lock()
	pid, producerEpoch := p.pid, p.producerEpoch
	p.mu.Unlock()
	add := &addpartitionstotxn.Request{TransactionalID: p.cfg.TransactionalID, ProducerID: pid, ProducerEpoch: producerEpoch}
	for _, t := range slices.Sorted(maps.Keys(byTopic)) {
		slices.Sort(byTopic[t])
		add.Topics = append(add.Topics, addpartitionstotxn.RequestTopic{Name: t, Partitions: byTopic[t]})
	}
	if err := p.sendAddPartitions(ctx, add); err != nil {
		return
	}
	_ = p.sendEndTxn(ctx, &endtxn.Request{TransactionalID: p.cfg.TransactionalID, ProducerID: pid, ProducerEpoch: producerEpoch, Committed: false})
}

// sendAddPartitions sends AddPartitionsToTxn (with coordinatorCall's
// retries); its error is the first partition's that explains the failure.
func (p *Producer) sendAddPartitions(ctx context.Context, req *addpartitionstotxn.Request) error {
	return p.coordinatorCall(ctx, "AddPartitionsToTxn", func(ctx context.Context) (int16, error) {
		m, err := p.client.RoundTrip(ctx, req)
		if err != nil {
			return 0, err
		}
		var codes []int16
		for _, t := range m.(*addpartitionstotxn.Response).Results {
			for _, r := range t.Results {
				codes = append(codes, r.ErrorCode)
			}
		}
		return firstError(codes), nil
	})
}

// sendEndTxn sends EndTxn (with coordinatorCall's retries).
func (p *Producer) sendEndTxn(ctx context.Context, req *endtxn.Request) error {
	return p.coordinatorCall(ctx, "EndTxn", func(ctx context.Context) (int16, error) {
		m, err := p.client.RoundTrip(ctx, req)
		if err != nil {
			return 0, err
		}
		return m.(*endtxn.Response).ErrorCode, nil
	})
}

// ProducerEpochJumps reports how many times a re-initialization of this
// transactional producer (Abort, Recover) found that its producer epoch
// had been bumped by someone else since its last one: the transaction
// coordinator, aborting a transaction that outlived its timeout
// (KIP-588), or another producer that initialized the same transactional
// id. The wire does not tell the two apart (both answer PRODUCER_FENCED
// or INVALID_PRODUCER_EPOCH to the next request, and both leave the
// producer epoch one higher); how often it happens does: see the
// pipeline's fencing rule.
func (p *Producer) ProducerEpochJumps() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producerEpochJumps
}

// ready marks the transaction over: the producer may Begin again.
func (p *Producer) ready() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.txn.state, p.txn.err = txnReady, nil
	p.txn.added, p.txn.groups = nil, nil
}

// initTxn (re)initializes a transactional producer: a new producer epoch,
// every sequence back to 0.
func (p *Producer) initTxn(ctx context.Context) error {
	if err := p.initProducerID(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		if !errors.Is(err, ErrProducerFenced) {
			err = &FatalError{Err: err}
		}
		return p.fail(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.txn.state = txnReady
	return nil
}

// addPartitions registers the partitions of topic the transaction has
// not written yet with the transaction coordinator (AddPartitionsToTxn).
// sent reports whether a request went out.
func (p *Producer) addPartitions(ctx context.Context, topic string, parts []int32) (sent bool, err error) {
	select {
	case p.addToken <- struct{}{}:
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
	defer func() { <-p.addToken }()
	p.mu.Lock()
	var missing []int32
	for _, part := range parts {
		if !p.txn.added[partitionKey{topic, part}] {
			missing = append(missing, part)
		}
	}
	pid, producerEpoch := p.pid, p.producerEpoch
	p.mu.Unlock()
	if len(missing) == 0 {
		return false, nil
	}
	req := &addpartitionstotxn.Request{
		TransactionalID: p.cfg.TransactionalID, ProducerID: pid, ProducerEpoch: producerEpoch,
		Topics: []addpartitionstotxn.RequestTopic{{Name: topic, Partitions: missing}},
	}
	if err := p.sendAddPartitions(ctx, req); err != nil {
		return true, p.txnError(ctx, topic, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, part := range missing {
		p.txn.added[partitionKey{topic, part}] = true
	}
	return true, nil
}

// operationNotAttempted is the code of partitions a request skipped
// because another of its partitions failed.
const operationNotAttempted = 55

// firstError is the code that explains a request's failure: the first
// non-zero one that is not "not attempted".
func firstError(codes []int16) int16 {
	var out int16
	for _, c := range codes {
		switch {
		case c == 0:
		case c == operationNotAttempted:
			if out == 0 {
				out = c
			}
		case out == 0 || out == operationNotAttempted:
			out = c
		}
	}
	return out
}

// txnError classifies the error of a transaction request (after
// coordinatorCall's retries) and records it. A Fatal code (kafkawire)
// ends the producer, except an authorization of a topic or of the group:
// those concern the resource, not the producer, which stays usable (a
// *SinkError for the topic written to, which holds its records; for the
// transaction's offsets, the transaction aborts and is tried again).
func (p *Producer) txnError(ctx context.Context, topic string, err error) error {
	if ctx.Err() != nil {
		return p.fail(err)
	}
	if code, ok := kafkawire.Code(err); ok && kafkawire.ClassifyCode(code) == kafkawire.Fatal {
		switch {
		case topicRefused(code) && topic != "":
			return p.fail(&SinkError{Topic: topic, Err: err})
		case code == int16(kafka.TopicAuthorizationFailed), code == int16(kafka.GroupAuthorizationFailed):
		default:
			return p.fail(&FatalError{Err: err})
		}
	}
	return p.fail(err)
}

// GroupMember is the consumer group member whose offsets a transaction
// commits (KIP-447): the group coordinator refuses them once the member's
// generation has moved on, which fences a zombie after a rebalance.
type GroupMember struct {
	Group      string
	Generation int32
	MemberID   string
	InstanceID string // empty for a dynamic member
}

// Offset is a consumer position committed in a transaction: the next
// offset to read, with the leader epoch of the last record read (-1 if
// unknown).
type Offset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// SendOffsets adds the member's consumer offsets to the open
// transaction (AddOffsetsToTxn, then TxnOffsetCommit v3 to the group
// coordinator): they commit, or are discarded, with the transaction's
// records. A stale member fails with an AbortableError wrapping
// ErrStaleMember.
func (p *Producer) SendOffsets(ctx context.Context, member GroupMember, offsets []Offset) (err error) {
	if !p.Transactional() {
		return ErrNotTransactional
	}
	if len(offsets) == 0 {
		return nil
	}
	if err := p.enter(); err != nil {
		return err
	}
	defer func() { p.leave(err, true) }()
	p.mu.Lock()
	pid, producerEpoch, known := p.pid, p.producerEpoch, p.txn.groups[member.Group]
	p.mu.Unlock()
	if !known {
		req := &addoffsetstotxn.Request{TransactionalID: p.cfg.TransactionalID, ProducerID: pid, ProducerEpoch: producerEpoch, GroupID: member.Group}
		err := p.coordinatorCall(ctx, "AddOffsetsToTxn", func(ctx context.Context) (int16, error) {
			m, err := p.client.RoundTrip(ctx, req)
			if err != nil {
				return 0, err
			}
			return m.(*addoffsetstotxn.Response).ErrorCode, nil
		})
		if err != nil {
			return p.txnError(ctx, "", err)
		}
		p.mu.Lock()
		p.txn.groups[member.Group] = true
		p.mu.Unlock()
	}
	req := &txnoffsetcommit.Request{
		TransactionalID: p.cfg.TransactionalID, GroupID: member.Group, ProducerID: pid, ProducerEpoch: producerEpoch,
		GenerationID: member.Generation, MemberID: member.MemberID, GroupInstanceID: member.InstanceID,
	}
	offsets = slices.Clone(offsets)
	slices.SortStableFunc(offsets, func(a, b Offset) int { return strings.Compare(a.Topic, b.Topic) })
	for _, o := range offsets {
		i := len(req.Topics) - 1
		if i < 0 || req.Topics[i].Name != o.Topic {
			req.Topics = append(req.Topics, txnoffsetcommit.RequestTopic{Name: o.Topic})
			i++
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, txnoffsetcommit.RequestPartition{
			Partition: o.Partition, CommittedOffset: o.Offset, CommittedLeaderEpoch: o.LeaderEpoch, CommittedMetadata: o.Metadata,
		})
	}
	err = p.coordinatorCall(ctx, "TxnOffsetCommit", func(ctx context.Context) (int16, error) {
		m, err := p.client.RoundTrip(ctx, req)
		if err != nil {
			return 0, err
		}
		var codes []int16
		for _, t := range m.(*txnoffsetcommit.Response).Topics {
			for _, r := range t.Partitions {
				codes = append(codes, r.ErrorCode)
			}
		}
		return firstError(codes), nil
	})
	if staleMember(err) {
		err = &AbortableError{Err: fmt.Errorf("%w: %w", ErrStaleMember, err)}
	}
	if err != nil {
		return p.txnError(ctx, "", err)
	}
	return nil
}

// staleMember reports whether err, a TxnOffsetCommit's, says the
// member's generation is over (kafkawire.StaleMember) or another member
// holds its group.instance.id (FENCED_INSTANCE_ID, of the Fencing codes
// the only one about the member rather than the producer).
func staleMember(err error) bool {
	code, ok := kafkawire.Code(err)
	if !ok {
		return false
	}
	c := kafkawire.ClassifyCode(code)
	return c == kafkawire.StaleMember || c == kafkawire.Fencing && code == int16(kafka.FencedInstanceID)
}

// Commit commits the open transaction (EndTxn): its records become
// visible to read_committed consumers and its offsets commit, atomically.
// It waits for Produce and SendOffsets calls under way and refuses new
// ones. If a call of the transaction failed, Commit returns that
// AbortableError and the caller must Abort. If ctx ends first, Commit
// may be called again (or Abort). ErrProducerFenced and FatalError end
// the producer.
func (p *Producer) Commit(ctx context.Context) error {
	return p.end(ctx, true)
}

// Abort aborts the open (or failed) transaction (EndTxn): none of its
// records becomes visible and none of its offsets commits. It then
// re-initializes the producer (a new producer epoch, sequences from 0),
// so a batch whose outcome was unknown cannot meet the next
// transaction's. It is a no-op without a transaction; if ctx ends first,
// call it again.
func (p *Producer) Abort(ctx context.Context) error {
	return p.end(ctx, false)
}

func (p *Producer) end(ctx context.Context, commit bool) error {
	if !p.Transactional() {
		return ErrNotTransactional
	}
	p.mu.Lock()
	state, err := p.txn.state, p.txn.err
	switch {
	case state == txnFailed:
		p.mu.Unlock()
		return err
	case commit && state == txnAbortable:
		p.mu.Unlock()
		return err
	case state == txnUninit || state == txnReady:
		p.mu.Unlock()
		if commit {
			return ErrNotInTransaction
		}
		return nil
	}
	if commit || state != txnAbortable {
		p.txn.state = txnEnding
	}
	p.mu.Unlock()
	if err := p.drain(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	state, err = p.txn.state, p.txn.err
	pid, producerEpoch := p.pid, p.producerEpoch
	registered := len(p.txn.added) > 0 || len(p.txn.groups) > 0
	added := p.txn.added
	p.mu.Unlock()
	endFailed := false
	if commit && state != txnEnding {
		return err // a call failed while the commit waited for it
	}
	if registered {
		err := p.sendEndTxn(ctx, &endtxn.Request{TransactionalID: p.cfg.TransactionalID, ProducerID: pid, ProducerEpoch: producerEpoch, Committed: commit})
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return err // the outcome is unknown: Commit or Abort again
		case !commit && !errors.Is(err, ErrProducerFenced):
			// re-initializing below aborts whatever is still open
			endFailed = true
		default:
			return p.txnError(ctx, "", err)
		}
	}
	if !commit {
		if err := p.initTxn(ctx); err != nil {
			return err
		}
		if endFailed {
			// the broker may have aborted the transaction on its own
			p.markAborted(ctx, added)
		}
	}
	p.ready()
	return nil
}

// coordinatorCall sends a request to a coordinator (send returns the
// answer's error code) and retries what the protocol says to retry
// (kafkawire's classes): coordinator moves and loads (NotCoordinator: the
// transport finds the coordinator again on every request), time-outs,
// network errors and other Retriable codes up to MaxAttempts,
// CONCURRENT_TRANSACTIONS (a previous transaction is still completing)
// with a short backoff until ctx ends. A Fencing code of the producer is
// ErrProducerFenced; any other code is returned as a kafka.Error.
func (p *Producer) coordinatorCall(ctx context.Context, op string, send func(context.Context) (int16, error)) error {
	backoff := p.cfg.RetryBackoff
	attempts := 0
	for {
		rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
		code, err := send(rctx)
		cancel()
		if err == nil && code == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", op, context.Cause(ctx))
		}
		wait := backoff
		if err == nil {
			ke := kafka.Error(code)
			switch c := kafkawire.ClassifyCode(code); {
			case ke == kafka.ConcurrentTransactions:
				wait = 20 * time.Millisecond
				attempts-- // not a failure: wait as long as ctx allows
			case c == kafkawire.NotCoordinator, c == kafkawire.Retriable:
			case c == kafkawire.Fencing && ke != kafka.InvalidProducerEpoch && ke != kafka.FencedInstanceID:
				// (INVALID_PRODUCER_EPOCH is not fencing since KIP-588:
				// a producer epoch the coordinator bumped after a
				// transaction timeout, which Abort recovers from;
				// FENCED_INSTANCE_ID fences the group member, not the
				// producer: see SendOffsets)
				return fmt.Errorf("%s: %w (%w)", op, ErrProducerFenced, ke)
			default:
				return fmt.Errorf("%s: %w", op, ke)
			}
			err = ke
		}
		attempts++
		if attempts >= p.cfg.MaxAttempts {
			return fmt.Errorf("%s: %w (after %d attempts)", op, err, attempts)
		}
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if wait == backoff {
			backoff = min(2*backoff, time.Second)
		}
	}
}
