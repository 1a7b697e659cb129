package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fencepost-dev/fencepost/stages"
)

// TestClassifyProduceError: a produce error is the records' (permanent:
// dead-letter them), the topic's for every record (unavailable: hold the
// partition and retry), or neither (retry a few times).
func TestClassifyProduceError(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want string // "permanent", "unavailable" or "other"
	}{
		{"message too large", live, kafka.MessageSizeTooLarge, "permanent"},
		{"invalid record", live, kafka.InvalidRecord, "permanent"},
		{"corrupt batch", live, kafka.InvalidMessage, "permanent"}, // CORRUPT_MESSAGE: was unavailable (retried)
		{"franz-go's code", live, kerr.RecordListTooLarge, "permanent"},
		{"unknown topic (deleted)", live, kafka.UnknownTopicOrPartition, "unavailable"},
		{"not authorized", live, kafka.TopicAuthorizationFailed, "unavailable"},
		{"no leader", live, kafka.LeaderNotAvailable, "unavailable"},
		{"not leader", live, kafka.NotLeaderForPartition, "unavailable"},
		{"not enough replicas", live, kafka.NotEnoughReplicas, "unavailable"},
		{"broker not available", live, kafka.BrokerNotAvailable, "unavailable"},
		{"compression not supported", live, kafka.Error(kerr.UnsupportedCompressionType.Code), "unavailable"}, // was other
		{"a broker's answer, ctx ended", ended, kafka.LeaderNotAvailable, "unavailable"},
		{"producer fenced", live, kafka.ProducerFenced, "other"},
		{"an unexpected code", live, kafka.InvalidRequiredAcks, "other"},
		{"broker refuses connections", live, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, "unavailable"},
		{"connection reset", live, fmt.Errorf("write: %w", syscall.ECONNRESET), "unavailable"},
		{"connection closed", live, io.ErrUnexpectedEOF, "unavailable"},
		{"the producer's own timeout", live, context.DeadlineExceeded, "unavailable"},
		{"the caller's context ended", ended, context.Canceled, "other"},
		{"the caller's deadline", ended, fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Err: context.DeadlineExceeded}), "other"},
		{"something else", live, errors.New("unexpected"), "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := classifyProduceError(tt.ctx, fmt.Errorf("produce to %q: %w", "out", tt.err))
			got := "other"
			switch {
			case stages.IsPermanent(err) && stages.IsUnavailable(err):
				t.Fatalf("%v is marked both permanent and unavailable", err)
			case stages.IsPermanent(err):
				got = "permanent"
			case stages.IsUnavailable(err):
				got = "unavailable"
			}
			if got != tt.want {
				t.Fatalf("%v classified %s, want %s", tt.err, got, tt.want)
			}
			if !strings.Contains(err.Error(), tt.err.Error()) {
				t.Fatalf("the classified error %v no longer says %v", err, tt.err)
			}
		})
	}
}
