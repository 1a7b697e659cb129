package pipeline

import (
	"context"
	"fmt"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/fencepost-dev/fencepost/stages"
)

// kafkaSink writes dead letters to a topic with acks=all.
type kafkaSink struct {
	w *kafka.Writer
}

func newKafkaSink(conn *connection, topic string, metadataTTL time.Duration) *kafkaSink {
	return &kafkaSink{w: &kafka.Writer{
		Addr:                   conn.addr(),
		Topic:                  topic,
		Balancer:               &kafka.Hash{},
		RequiredAcks:           kafka.RequireAll,
		BatchTimeout:           5 * time.Millisecond,
		Transport:              conn.transport(metadataTTL, nil),
		AllowAutoTopicCreation: false,
	}}
}

// Send implements process.DeadLetterSink.
func (s *kafkaSink) Send(ctx context.Context, records []stages.Record) error {
	msgs := make([]kafka.Message, len(records))
	for i, r := range records {
		msgs[i] = toMessage(r)
	}
	if err := s.w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("dead-letter topic %q: %w", s.w.Topic, err)
	}
	return nil
}

func (s *kafkaSink) Close() error { return s.w.Close() }

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
