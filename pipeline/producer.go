package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"syscall"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/fencepost-dev/fencepost/stages"
)

// Producer writes records to one topic with acks=all, batching
// concurrent writes. It implements stages.Producer and
// a dead-letter sink (WithDeadLetterSink). Records go to the partition their key hashes to
// (records without a key are spread round-robin).
//
// Its errors are classified for the pipeline:
//
//   - stages.Permanent: the broker will never take these records (too
//     large, invalid, refused by policy); the pipeline dead-letters the
//     record (or stops the partition) without retrying.
//   - stages.Unavailable: the topic cannot be written now, whatever the
//     record (unknown or deleted topic, not authorized, no leader, not
//     enough replicas, a timeout, brokers unreachable); the pipeline
//     holds the partition and retries until it can write, dead-lettering
//     nothing.
//   - anything else is retried a few times, then handled like a
//     permanent error.
type Producer struct {
	w         *kafka.Writer
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
	return newProducer(conn, topic, c.MetadataMaxAge), nil
}

func newProducer(conn *connection, topic string, metadataTTL time.Duration) *Producer {
	t := conn.transport(metadataTTL, []string{topic})
	return &Producer{transport: t, w: &kafka.Writer{
		Addr:         conn.addr(),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		// A stage waits for its records' acknowledgement, so a batch is
		// sent as soon as the Produce calls of the moment have added to
		// it: kafka-go appends one call's records under a lock, so a
		// short timeout never splits a call, and only merges calls that
		// arrive together. (The 2ms that were here cost every batch 2ms,
		// and a partition waits for its batch before the next.) 500
		// records per request at most: kafka-go allocates room for a
		// full batch up front.
		BatchTimeout: 100 * time.Microsecond,
		BatchSize:    500,
		Transport:    t,
	}}
}

// Produce writes records and returns once every one is acknowledged.
func (p *Producer) Produce(ctx context.Context, records []stages.Record) error {
	if len(records) == 0 {
		return nil
	}
	msgs := make([]kafka.Message, len(records))
	for i, r := range records {
		msgs[i] = toMessage(r)
	}
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		return classifyProduceError(ctx, fmt.Errorf("produce to %q: %w", p.w.Topic, err))
	}
	return nil
}

// permanentProduceErrors are broker answers about the records
// themselves, that writing the same records again will not change.
var permanentProduceErrors = []kafka.Error{
	kafka.MessageSizeTooLarge, kafka.RecordListTooLarge, kafka.InvalidRecord, kafka.InvalidTimestamp,
	kafka.PolicyViolation, kafka.UnsupportedForMessageFormat,
}

// unavailableProduceErrors are broker answers that say the topic cannot
// take any record now, whatever the record. (Any other error a broker
// marks retriable counts too.)
var unavailableProduceErrors = []kafka.Error{
	kafka.UnknownTopicOrPartition, kafka.TopicAuthorizationFailed, kafka.ClusterAuthorizationFailed,
	kafka.LeaderNotAvailable, kafka.NotLeaderForPartition, kafka.InvalidTopic, kafka.BrokerNotAvailable,
	kafka.NotEnoughReplicas, kafka.NotEnoughReplicasAfterAppend, kafka.RequestTimedOut, kafka.NetworkException,
	kafka.KafkaStorageError, kafka.SASLAuthenticationFailed,
}

// classifyProduceError marks err, a WriteMessages error under ctx, as
// stages.Permanent or stages.Unavailable (see Producer), or leaves it.
func classifyProduceError(ctx context.Context, err error) error {
	switch {
	case unavailableProduceError(ctx, err):
		return stages.Unavailable(err)
	case permanentProduceError(err):
		return stages.Permanent(err)
	}
	return err
}

// permanentProduceError reports whether err (a WriteMessages error) is
// one retrying cannot fix: a record too large for the writer, or a
// permanent broker error for every record that failed.
func permanentProduceError(err error) bool {
	var tooLarge kafka.MessageTooLargeError
	if errors.As(err, &tooLarge) {
		return true
	}
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) {
		failed := 0
		for _, e := range werrs {
			if e == nil {
				continue
			}
			failed++
			if !permanentProduceError(e) {
				return false
			}
		}
		return failed > 0
	}
	var ke kafka.Error
	return errors.As(err, &ke) && slices.Contains(permanentProduceErrors, ke)
}

// unavailableProduceError reports whether err (a WriteMessages error
// under ctx) says the topic takes no record now: a sink-wide broker
// answer for any record that failed, or the brokers could not be reached
// or did not answer in time (while ctx was still live).
func unavailableProduceError(ctx context.Context, err error) bool {
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) {
		return slices.ContainsFunc(werrs, func(e error) bool { return e != nil && unavailableProduceError(ctx, e) })
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		return slices.Contains(unavailableProduceErrors, ke) || ke.Temporary()
	}
	if ctx.Err() != nil {
		return false // the caller's deadline or cancellation, not the sink's
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Close flushes and releases the producer's connections (kafka-go's
// Writer does not close a Transport it was given, so Close does).
func (p *Producer) Close() error {
	err := p.w.Close()
	p.transport.CloseIdleConnections()
	return err
}

func toMessage(r stages.Record) kafka.Message {
	m := kafka.Message{Key: r.Key, Value: r.Value, Time: r.Timestamp}
	if len(r.Headers) > 0 {
		m.Headers = make([]protocol.Header, len(r.Headers))
		for i, h := range r.Headers {
			m.Headers[i] = protocol.Header{Key: h.Key, Value: h.Value}
		}
	}
	return m
}
