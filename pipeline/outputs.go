package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/fencepost-dev/fencepost/internal/partitioner"
	"github.com/fencepost-dev/fencepost/internal/produce"
	"github.com/fencepost-dev/fencepost/stages"
)

// Outputs hands a pipeline's stages their producers (stages.Env.Producer)
// and writes the pipeline's dead letters. Build the stages with its
// Producer, then give it to New with WithOutputs:
//
//	out, _ := pipeline.NewOutputs(cfg)
//	st, _ := spec.Build(stages.Env{Producer: out.Producer})
//	p, _ := pipeline.New(cfg, pipeline.WithOutputs(out), pipeline.WithStage("write", st))
//
// With guarantee at_least_once each topic gets a Producer of its own
// (acks=all), as NewProducer gives. With exactly_once every topic is
// written through one transactional producer that the pipeline's Run
// opens and commits with the consumed offsets: a stage may only produce
// while Run runs, and one Outputs serves one Pipeline.
//
// Close it after Run returned.
type Outputs struct {
	cfg   Config
	place partitioner.Func // where keyed records go (kafka.partitioner)

	mu     sync.Mutex
	topics []string
	byTop  map[string]*Producer // at_least_once
	// txn is the exactly_once producer while a Run runs (read on every
	// write without the lock)
	txn atomic.Pointer[produce.Producer]
}

// NewOutputs returns the outputs of a pipeline configured by cfg (its
// Kafka, Consumer.Group, Consumer.GroupInstanceID, Guarantee and
// TransactionTimeout). Nothing connects before the first write.
func NewOutputs(cfg Config) (*Outputs, error) {
	cfg = cfg.withDefaults()
	if len(cfg.Kafka.Brokers) == 0 {
		return nil, errors.New("outputs: kafka.brokers is empty")
	}
	if err := cfg.Kafka.Partitioner.Validate(); err != nil {
		return nil, fmt.Errorf("outputs: kafka.partitioner: %w", err)
	}
	return &Outputs{cfg: cfg, place: cfg.Kafka.Partitioner.place(), byTop: map[string]*Producer{}}, nil
}

// Producer returns the producer to topic (the same one for every call
// with the same topic). It implements stages.Env.Producer. Its keyed
// records go where the configuration's kafka.partitioner puts them.
func (o *Outputs) Producer(topic string) (stages.Producer, error) {
	if topic == "" {
		return nil, fmt.Errorf("producer: empty topic name")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !slices.Contains(o.topics, topic) {
		o.topics = append(o.topics, topic)
	}
	if o.cfg.Guarantee == ExactlyOnce {
		return &txnOutput{o: o, topic: topic}, nil
	}
	if p, ok := o.byTop[topic]; ok {
		return p, nil
	}
	p, err := NewProducer(o.cfg.Kafka, topic)
	if err != nil {
		return nil, err
	}
	o.byTop[topic] = p
	return p, nil
}

// Topics returns the topics Producer was asked for, in order.
func (o *Outputs) Topics() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.topics)
}

// Close releases the producers' connections. Call it after Run returned.
func (o *Outputs) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var errs []error
	for _, p := range o.byTop {
		errs = append(errs, p.Close())
	}
	clear(o.byTop)
	return errors.Join(errs...)
}

// attach gives the outputs the transactional producer of a Run; detach
// takes it back. An Outputs serves one Run at a time.
func (o *Outputs) attach(p *produce.Producer) error {
	if !o.txn.CompareAndSwap(nil, p) {
		return errors.New("outputs: already used by a running pipeline (one Outputs serves one Pipeline)")
	}
	return nil
}

func (o *Outputs) detach() { o.txn.Store(nil) }

// errNotRunning is what an exactly_once output returns outside Run.
var errNotRunning = errors.New("exactly_once output written outside the pipeline's Run (its transactions exist only while Run runs)")

// txnOutput is a topic's producer under exactly_once: it writes in the
// Run's current transaction.
type txnOutput struct {
	o     *Outputs
	topic string
}

// Produce implements stages.Producer.
func (t *txnOutput) Produce(ctx context.Context, records []stages.Record) error {
	p := t.o.txn.Load()
	if p == nil {
		return errNotRunning
	}
	return p.ProduceBy(ctx, t.topic, t.o.place, records)
}

// transactionalID is the id of this instance's transactional producer:
// stable across restarts for an instance with an identity (see
// instanceIdentity), so that a restarted instance's InitProducerID fences
// its crashed predecessor and aborts the transaction it left open at once
// (read_committed readers wait no transaction_timeout for it); else unique
// per process start (KIP-447: the group's generation fences zombies then,
// and a crashed instance's open transaction lasts until the broker aborts
// it at transaction_timeout).
func transactionalID(c ConsumerConfig, processID string) string {
	if id := instanceIdentity(c, processID); id != "" {
		return c.Group + "-" + id
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return c.Group + "-" + hex.EncodeToString(b)
}

// instanceIdentity names this instance the same across its restarts, or
// is "" when it has none: the static membership's group_instance_id,
// else the process id kept in the state directory of a pipeline with
// stateful stages on disk (processID, "" without one). The transactional
// id follows it, so an instance restarted on the same disk fences its
// predecessor's open transaction at once. Whatever it returns must be
// unique among the group's live instances: two processes with the same
// identity fence each other (see fencingRule); the state directory's
// lock keeps its process id to one process.
func instanceIdentity(c ConsumerConfig, processID string) string {
	if c.GroupInstanceID != "" {
		return c.GroupInstanceID
	}
	return processID
}
