package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	kafka "github.com/segmentio/kafka-go"

	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/internal/partitioner"
	"github.com/fencepost-dev/fencepost/internal/produce"
	"github.com/fencepost-dev/fencepost/stages"
)

// Producer writes records to one topic with acks=all, as an idempotent
// producer (a producer id, a sequence number per partition: a request
// retried after a lost answer is not written twice). It implements
// stages.Producer and a dead-letter sink (WithDeadLetterSink). A record
// with a key goes to the partition KafkaConfig.Partitioner gives it
// (murmur2 by default: where the Java producer, Kafka Streams and
// franz-go put the same key; the exactly_once producer places it the
// same way); the records without a key of one call go to one partition,
// the next call's to the next.
// Records are encoded into the request straight from the slice Produce
// is given; concurrent calls to different partitions are sent in
// parallel, and a partition has one batch in flight at a time.
//
// Its errors are classified for the pipeline:
//
//   - stages.Permanent: the broker will never take these records (too
//     large, invalid, corrupt, refused by policy); the pipeline
//     dead-letters the record (or stops the partition) without retrying.
//   - stages.Unavailable: the topic cannot be written now, whatever the
//     record (unknown or deleted topic, not authorized, no leader, not
//     enough replicas, a timeout, brokers unreachable, a compression or
//     version the brokers do not support); the pipeline
//     holds the partition and retries until it can write, dead-lettering
//     nothing.
//   - anything else is retried a few times, then handled like a
//     permanent error.
//
// Writing idempotently needs permission to (Kafka before 2.8: the
// IDEMPOTENT_WRITE operation on the cluster; later: WRITE on a topic);
// without it every Produce fails stages.Unavailable, saying so.
type Producer struct {
	p         *produce.Producer
	topic     string
	place     partitioner.Func // where keyed records go
	transport *kafka.Transport
}

// NewProducer returns a producer to topic on the cluster cfg describes.
// It connects lazily, on the first Produce. Close it when done.
func NewProducer(cfg KafkaConfig, topic string) (*Producer, error) {
	if topic == "" {
		return nil, fmt.Errorf("producer: empty topic name")
	}
	c := Config{Kafka: cfg}.withDefaults().Kafka
	conn, err := newConnection(c)
	if err != nil {
		return nil, err
	}
	return newProducer(conn, topic, c.MetadataMaxAge, c.MaxBatchBytes), nil
}

func newProducer(conn *connection, topic string, metadataTTL time.Duration, maxBatch ByteSize) *Producer {
	t := conn.transport(metadataTTL, []string{topic})
	return &Producer{
		p:         produce.New(kafkawire.New(t, conn.addr()), produce.Config{MaxBatchBytes: int(maxBatch)}),
		topic:     topic,
		place:     conn.place,
		transport: t,
	}
}

// Produce writes records and returns once every one is acknowledged. It
// does not keep records (nor their keys, values or headers) after it
// returns.
func (p *Producer) Produce(ctx context.Context, records []stages.Record) error {
	if len(records) == 0 {
		return nil
	}
	if err := p.p.ProduceBy(ctx, p.topic, p.place, records); err != nil {
		return classifyProduceError(ctx, fmt.Errorf("produce to %q: %w", p.topic, err))
	}
	return nil
}

// classifyProduceError marks err, a produce error under ctx, as
// stages.Permanent or stages.Unavailable (see Producer), or leaves it.
// internal/produce marks most of its errors itself (those are kept as
// they are); the rest are classified here: a broker's error code by the
// table every caller shares (kafkawire), network errors and ctx.
func classifyProduceError(ctx context.Context, err error) error {
	switch {
	case stages.IsPermanent(err) || stages.IsUnavailable(err):
		return err // classified by the producer already
	case unavailableProduceError(ctx, err):
		return stages.Unavailable(err)
	case permanentProduceError(err):
		return stages.Permanent(err)
	}
	return err
}

// permanentProduceError reports whether err (a produce error) is one
// retrying cannot fix: a broker's answer about the records themselves
// (kafkawire.Permanent: too large, invalid, corrupt, refused by policy).
func permanentProduceError(err error) bool {
	code, ok := kafkawire.Code(err)
	return ok && kafkawire.ClassifyCode(code) == kafkawire.Permanent
}

// unavailableProduceError reports whether err (a produce error under
// ctx) says the topic takes no record now, whatever the record: a
// broker's answer that is transient (kafkawire.StaleMetadata,
// NotCoordinator, Retriable: no leader, not enough replicas, a time-out)
// or that only an operator fixes (Fatal: not authorized, an invalid
// topic, an unsupported version), or the brokers could not be reached or
// did not answer in time (while ctx was still live).
func unavailableProduceError(ctx context.Context, err error) bool {
	if code, ok := kafkawire.Code(err); ok {
		switch kafkawire.ClassifyCode(code) {
		case kafkawire.StaleMetadata, kafkawire.NotCoordinator, kafkawire.Retriable, kafkawire.Fatal:
			return true
		}
		return false
	}
	if ctx.Err() != nil {
		return false // the caller's deadline or cancellation, not the sink's
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Close releases the producer's connections. Call it once no Produce
// runs (a Produce that returned left nothing in flight).
func (p *Producer) Close() error {
	p.transport.CloseIdleConnections()
	return nil
}
