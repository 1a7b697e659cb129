package kafkawire

import (
	"context"
	"crypto/x509"
	"errors"
	"net"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Class is what a partition's step does about an error from the broker
// or the wire: the one classification the fetch and resolve steps share.
type Class uint8

const (
	// OK: no error.
	OK Class = iota
	// OutOfRange: the offset asked for is outside the partition's log
	// (OFFSET_OUT_OF_RANGE): check it against fresh log bounds.
	OutOfRange
	// StaleMetadata: the request went to a broker that does not lead the
	// partition (now), or our leader epoch is older than the broker's
	// (FENCED_LEADER_EPOCH), or the topic is unknown to it: refresh the
	// metadata and route the partition again.
	StaleMetadata
	// Retriable: a transient error (network, timeout, a broker busy or
	// behind our metadata, UNKNOWN_LEADER_EPOCH): back off and retry the
	// same request.
	Retriable
	// Fatal: an error that retrying will not fix until an operator acts
	// (authorization, a corrupt record, an unsupported version, TLS
	// trust, SASL).
	Fatal
)

func (c Class) String() string {
	switch c {
	case OK:
		return "ok"
	case OutOfRange:
		return "offset_out_of_range"
	case StaleMetadata:
		return "stale_metadata"
	case Retriable:
		return "retriable"
	case Fatal:
		return "fatal"
	}
	return "Class(?)"
}

// staleMetadata are the codes a metadata refresh fixes. The leader moved
// (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, REPLICA_NOT_AVAILABLE,
// PREFERRED_LEADER_NOT_AVAILABLE), its log directory failed over
// (KAFKA_STORAGE_ERROR), our leader epoch is older than the broker's
// (FENCED_LEADER_EPOCH), or the broker does not know the topic yet
// (UNKNOWN_TOPIC_OR_PARTITION: a new topic reaches the brokers one by
// one). UNKNOWN_LEADER_EPOCH is not here: it says the broker is behind
// our metadata, so the same request is retried (KIP-320).
var staleMetadata = map[int16]bool{
	kerr.UnknownTopicOrPartition.Code:     true,
	kerr.LeaderNotAvailable.Code:          true,
	kerr.NotLeaderForPartition.Code:       true,
	kerr.ReplicaNotAvailable.Code:         true,
	kerr.KafkaStorageError.Code:           true,
	kerr.PreferredLeaderNotAvailable.Code: true,
	kerr.FencedLeaderEpoch.Code:           true,
}

// fatal are the codes no retry fixes.
var fatal = map[int16]bool{
	kerr.CorruptMessage.Code:             true,
	kerr.TopicAuthorizationFailed.Code:   true,
	kerr.ClusterAuthorizationFailed.Code: true,
	kerr.UnsupportedVersion.Code:         true,
	kerr.UnsupportedCompressionType.Code: true,
	kerr.SaslAuthenticationFailed.Code:   true,
	kerr.UnsupportedSaslMechanism.Code:   true,
	kerr.IllegalSaslState.Code:           true,
}

// ClassifyCode classifies a Kafka error code (0 is OK). A code not named
// above is Retriable: Kafka adds codes, and an unknown one is retried
// with backoff (and logged) rather than stopping a partition.
func ClassifyCode(code int16) Class {
	switch {
	case code == 0:
		return OK
	case code == kerr.OffsetOutOfRange.Code:
		return OutOfRange
	case staleMetadata[code]:
		return StaleMetadata
	case fatal[code]:
		return Fatal
	}
	return Retriable
}

// Classify classifies an error of a request: a broker error (franz-go's
// *kerr.Error or kafka-go's kafka.Error, by code), a network error or
// time-out (Retriable), a TLS trust error (Fatal). Any other error comes
// from routing (kafka-go's transport found no leader, or leaders that
// moved between two partitions of one request) and is StaleMetadata. nil
// is OK.
func Classify(err error) Class {
	if err == nil {
		return OK
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ClassifyCode(ke.Code)
	}
	var ge kafka.Error
	if errors.As(err, &ge) {
		return ClassifyCode(int16(ge))
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
	case errors.As(err, &ne), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return Retriable
	}
	return StaleMetadata
}

// CodeError is the error of a non-zero Kafka error code: franz-go's
// *kerr.Error (test with errors.Is against kerr's values), nil for 0.
func CodeError(code int16) error { return kerr.ErrorForCode(code) }
