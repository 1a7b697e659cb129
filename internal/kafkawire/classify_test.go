package kafkawire

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"testing"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestClassifyCode: the one table the fetch and resolve steps share.
func TestClassifyCode(t *testing.T) {
	for _, tt := range []struct {
		err  *kerr.Error
		want Class
	}{
		{kerr.OffsetOutOfRange, OutOfRange},
		{kerr.NotLeaderForPartition, StaleMetadata},
		{kerr.UnknownTopicOrPartition, StaleMetadata},
		{kerr.LeaderNotAvailable, StaleMetadata},
		{kerr.ReplicaNotAvailable, StaleMetadata},
		{kerr.KafkaStorageError, StaleMetadata},
		{kerr.PreferredLeaderNotAvailable, StaleMetadata},
		{kerr.FencedLeaderEpoch, StaleMetadata}, // our epoch is older: refresh metadata
		{kerr.UnknownLeaderEpoch, Retriable},    // the broker is behind us: retry
		{kerr.OffsetNotAvailable, Retriable},
		{kerr.RequestTimedOut, Retriable},
		{kerr.NotEnoughReplicas, Retriable},
		{kerr.CorruptMessage, Fatal},
		{kerr.TopicAuthorizationFailed, Fatal},
		{kerr.ClusterAuthorizationFailed, Fatal},
		{kerr.UnsupportedVersion, Fatal},
		{kerr.UnsupportedCompressionType, Fatal},
		{kerr.SaslAuthenticationFailed, Fatal},
		{kerr.UnsupportedSaslMechanism, Fatal},
		{kerr.IllegalSaslState, Fatal},
	} {
		if got := ClassifyCode(tt.err.Code); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.err.Message, got, tt.want)
		}
		// the same answer for the error itself, franz-go's or kafka-go's, wrapped
		if got := Classify(fmt.Errorf("fetch: %w", tt.err)); got != tt.want {
			t.Errorf("%s wrapped: %v, want %v", tt.err.Message, got, tt.want)
		}
		if got := Classify(fmt.Errorf("ListOffsets: %w", kafka.Error(tt.err.Code))); got != tt.want {
			t.Errorf("kafka-go's %s: %v, want %v", tt.err.Message, got, tt.want)
		}
	}
	if ClassifyCode(0) != OK || Classify(nil) != OK || CodeError(0) != nil {
		t.Error("code 0 is not OK")
	}
	if ClassifyCode(32000) != Retriable {
		t.Error("an unknown code is not retried")
	}
	if !errors.Is(CodeError(kerr.FencedLeaderEpoch.Code), kerr.FencedLeaderEpoch) {
		t.Error("CodeError is not kerr's error")
	}
}

// TestClassifyTransport: errors without a code.
func TestClassifyTransport(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want Class
	}{
		{"network", &net.OpError{Op: "read", Err: errors.New("connection reset")}, Retriable},
		{"deadline", fmt.Errorf("fetch: %w", context.DeadlineExceeded), Retriable},
		{"canceled", context.Canceled, Retriable},
		{"unknown authority", fmt.Errorf("dial: %w", x509.UnknownAuthorityError{}), Fatal},
		{"hostname", x509.HostnameError{Host: "b"}, Fatal},
		{"routing", errors.New("no leader for partition"), StaleMetadata},
	} {
		if got := Classify(tt.err); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
