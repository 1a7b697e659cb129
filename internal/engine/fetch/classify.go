package fetch

import (
	"context"
	"crypto/x509"
	"errors"
	"net"

	kafka "github.com/segmentio/kafka-go"
)

// classify maps a broker error code to an Outcome.
func classify(code int16) Outcome {
	if code == 0 {
		return OK
	}
	switch kafka.Error(code) {
	case kafka.OffsetOutOfRange:
		return OffsetOutOfRange
	case kafka.NotLeaderForPartition, kafka.UnknownTopicOrPartition, kafka.LeaderNotAvailable,
		kafka.FencedLeaderEpoch, kafka.UnknownLeaderEpoch, kafka.ReplicaNotAvailable,
		kafka.KafkaStorageError, kafka.PreferredLeaderNotAvailable:
		return NotLeader
	case kafka.TopicAuthorizationFailed, kafka.ClusterAuthorizationFailed, kafka.InvalidMessage,
		kafka.UnsupportedVersion, kafka.UnsupportedCompressionType, kafka.SASLAuthenticationFailed,
		kafka.UnsupportedSASLMechanism, kafka.IllegalSASLState:
		return Fatal
	}
	return Retriable
}

// classifyRequestError maps an error of a whole request (transport,
// routing) to an Outcome for every partition in it.
func classifyRequestError(err error) Outcome {
	var ke kafka.Error
	if errors.As(err, &ke) {
		return classify(int16(ke))
	}
	var (
		ne       net.Error
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
	)
	switch {
	case errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &hostname):
		return Fatal // TLS trust: the configuration must change
	case errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded):
		return Retriable
	}
	// Routing errors from the transport's metadata (no leader, unknown
	// topic, leaders that moved between two partitions of one request)
	// are fixed by a metadata refresh.
	return NotLeader
}
