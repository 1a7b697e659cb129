package kafkawire

import (
	"context"
	"crypto/x509"
	"errors"
	"net"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Class is what an error from a broker or the wire means to the request
// that got it: the one classification the fetch and resolve steps, the
// producer, the group member and the command-line tools share. Each
// caller maps a class to its own action (the fetch step to an Outcome,
// the producer to stages.Permanent or stages.Unavailable, the group
// member to a rejoin or a stop); where one needs a finer decision for a
// code of a class, it says so next to its mapping.
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
	// NotCoordinator: the group or transaction coordinator moved, is not
	// available or is still loading (NOT_COORDINATOR,
	// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS): find the
	// coordinator again and retry. StaleMetadata's counterpart for
	// requests to a coordinator rather than to a partition's leader.
	NotCoordinator
	// Retriable: a transient error (network, timeout, a broker busy or
	// behind our metadata, UNKNOWN_LEADER_EPOCH, not enough replicas): back
	// off and retry the same request.
	Retriable
	// Permanent: the broker refuses the records themselves (too large,
	// invalid, corrupt, refused by the topic's policy): sending the same
	// records again gets the same answer. A produce gives them up
	// (dead-letters them); a fetch, which only a corrupt record can
	// answer so, treats it as Fatal.
	Permanent
	// Fencing: another instance holds this one's identity: a producer
	// with the same transactional id initialized after ours
	// (PRODUCER_FENCED, TRANSACTION_COORDINATOR_FENCED), our producer
	// epoch is stale (INVALID_PRODUCER_EPOCH: a newer producer, or the
	// coordinator bumped the producer epoch after a transaction time-out),
	// or another member joined with our group.instance.id
	// (FENCED_INSTANCE_ID). The work belongs to the other instance.
	// FENCED_MEMBER_EPOCH is not here: the group coordinator, not
	// another instance, ended that member's membership (StaleMember).
	Fencing
	// StaleMember: the group member's membership or generation is no
	// longer current (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
	// FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH, REBALANCE_IN_PROGRESS): its
	// commits are refused; it joins again.
	StaleMember
	// ProducerState: the broker's state of this producer id does not
	// match the batch's sequence number (OUT_OF_ORDER_SEQUENCE_NUMBER,
	// UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING; and
	// DUPLICATE_SEQUENCE_NUMBER, a batch written before, which the
	// producer takes as written).
	ProducerState
	// Fatal: an error that retrying will not fix until an operator acts
	// (authorization, an unsupported version or compression, an invalid
	// topic name or group setting, TLS trust, SASL).
	Fatal
	// Unexpected: a code the table does not name and Kafka does not
	// mark retriable (UNKNOWN_SERVER_ERROR, INVALID_REQUEST, a code newer
	// than this table). The fetch and resolve steps retry it with backoff
	// (and log it) rather than stop a partition; the producer gives the
	// batch up without marking the error.
	Unexpected
)

func (c Class) String() string {
	switch c {
	case OK:
		return "ok"
	case OutOfRange:
		return "offset_out_of_range"
	case StaleMetadata:
		return "stale_metadata"
	case NotCoordinator:
		return "not_coordinator"
	case Retriable:
		return "retriable"
	case Permanent:
		return "permanent"
	case Fencing:
		return "fencing"
	case StaleMember:
		return "stale_member"
	case ProducerState:
		return "producer_state"
	case Fatal:
		return "fatal"
	case Unexpected:
		return "unexpected"
	}
	return "Class(?)"
}

// codes is the one table: the class of every Kafka error code a request
// of this module acts on by name. A code not in it is Retriable if Kafka
// marks it retriable (kerr's Retriable, as Kafka's own clients), and
// Unexpected otherwise.
//
// Notes on the rows a reader may not expect:
//   - UNKNOWN_TOPIC_OR_PARTITION is StaleMetadata: a new topic reaches
//     the brokers one by one. The producer gives a topic that stays
//     unknown up after its attempts (the destination, not the records).
//   - KAFKA_STORAGE_ERROR is StaleMetadata: the partition's log directory
//     failed over, its leader moves.
//   - UNKNOWN_LEADER_EPOCH is Retriable, not StaleMetadata: the broker is
//     behind our metadata, so the same request is retried (KIP-320).
//   - CORRUPT_MESSAGE is Permanent: the batch itself is refused (a
//     checksum, a null key for a compacted topic); sending the same bytes
//     again gets the same answer.
//   - REBALANCE_IN_PROGRESS is StaleMember: a commit under the ending
//     generation is refused. The group member itself keeps its
//     partitions and joins the new generation (see internal/group).
//   - TOPIC_AUTHORIZATION_FAILED and INVALID_TOPIC_EXCEPTION are Fatal:
//     the producer, for which they concern one destination topic rather
//     than the client, holds the records and retries (a *SinkError).
var codes = map[int16]Class{
	kerr.OffsetOutOfRange.Code: OutOfRange,

	kerr.UnknownTopicOrPartition.Code:     StaleMetadata,
	kerr.LeaderNotAvailable.Code:          StaleMetadata,
	kerr.NotLeaderForPartition.Code:       StaleMetadata,
	kerr.ReplicaNotAvailable.Code:         StaleMetadata,
	kerr.KafkaStorageError.Code:           StaleMetadata,
	kerr.PreferredLeaderNotAvailable.Code: StaleMetadata,
	kerr.FencedLeaderEpoch.Code:           StaleMetadata,

	kerr.NotCoordinator.Code:            NotCoordinator,
	kerr.CoordinatorNotAvailable.Code:   NotCoordinator,
	kerr.CoordinatorLoadInProgress.Code: NotCoordinator,

	kerr.RequestTimedOut.Code:              Retriable,
	kerr.BrokerNotAvailable.Code:           Retriable,
	kerr.NetworkException.Code:             Retriable,
	kerr.NotEnoughReplicas.Code:            Retriable,
	kerr.NotEnoughReplicasAfterAppend.Code: Retriable,
	kerr.UnknownLeaderEpoch.Code:           Retriable,
	kerr.OffsetNotAvailable.Code:           Retriable,
	kerr.UnstableOffsetCommit.Code:         Retriable, // a transaction of the group's is still open
	kerr.ConcurrentTransactions.Code:       Retriable, // the previous transaction is still completing
	kerr.UnreleasedInstanceID.Code:         Retriable, // the member's previous incarnation has not left yet
	kerr.ThrottlingQuotaExceeded.Code:      Retriable,

	kerr.MessageTooLarge.Code:             Permanent,
	kerr.RecordListTooLarge.Code:          Permanent,
	kerr.InvalidRecord.Code:               Permanent,
	kerr.InvalidTimestamp.Code:            Permanent,
	kerr.PolicyViolation.Code:             Permanent,
	kerr.UnsupportedForMessageFormat.Code: Permanent,
	kerr.CorruptMessage.Code:              Permanent,

	kerr.ProducerFenced.Code:               Fencing,
	kerr.TransactionCoordinatorFenced.Code: Fencing,
	kerr.InvalidProducerEpoch.Code:         Fencing,
	kerr.FencedInstanceID.Code:             Fencing,

	kerr.UnknownMemberID.Code:     StaleMember,
	kerr.IllegalGeneration.Code:   StaleMember,
	kerr.FencedMemberEpoch.Code:   StaleMember,
	kerr.StaleMemberEpoch.Code:    StaleMember,
	kerr.RebalanceInProgress.Code: StaleMember,

	kerr.OutOfOrderSequenceNumber.Code: ProducerState,
	kerr.UnknownProducerID.Code:        ProducerState,
	kerr.InvalidProducerIDMapping.Code: ProducerState,
	kerr.DuplicateSequenceNumber.Code:  ProducerState,

	kerr.TopicAuthorizationFailed.Code:           Fatal,
	kerr.GroupAuthorizationFailed.Code:           Fatal,
	kerr.ClusterAuthorizationFailed.Code:         Fatal,
	kerr.TransactionalIDAuthorizationFailed.Code: Fatal,
	kerr.SaslAuthenticationFailed.Code:           Fatal,
	kerr.UnsupportedSaslMechanism.Code:           Fatal,
	kerr.IllegalSaslState.Code:                   Fatal,
	kerr.UnsupportedVersion.Code:                 Fatal,
	kerr.UnsupportedCompressionType.Code:         Fatal,
	kerr.InvalidTopicException.Code:              Fatal,
	kerr.InvalidTransactionTimeout.Code:          Fatal,
	kerr.InconsistentGroupProtocol.Code:          Fatal,
	kerr.InvalidSessionTimeout.Code:              Fatal,
	kerr.GroupMaxSizeReached.Code:                Fatal,
	kerr.UnsupportedAssignor.Code:                Fatal,
}

// ClassifyCode classifies a Kafka error code (0 is OK): by the table
// above, else Retriable if Kafka marks the code retriable, else
// Unexpected.
func ClassifyCode(code int16) Class {
	if code == 0 {
		return OK
	}
	if c, ok := codes[code]; ok {
		return c
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e.Code == code && e.Retriable {
		return Retriable
	}
	return Unexpected
}

// Code returns the Kafka error code err carries (franz-go's *kerr.Error
// or kafka-go's kafka.Error, wrapped or not), and whether it carries one.
func Code(err error) (int16, bool) {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code, true
	}
	var ge kafka.Error
	if errors.As(err, &ge) {
		return int16(ge), true
	}
	return 0, false
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
	if code, ok := Code(err); ok {
		return ClassifyCode(code)
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
