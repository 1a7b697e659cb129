package kafkawire

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
)

// classified is every code the table names, with its class: the table
// again, written out by hand so that a row changed by mistake fails here.
var classified = []struct {
	err  *kerr.Error
	want Class
}{
	{kerr.OffsetOutOfRange, OutOfRange},

	{kerr.UnknownTopicOrPartition, StaleMetadata},
	{kerr.LeaderNotAvailable, StaleMetadata},
	{kerr.NotLeaderForPartition, StaleMetadata},
	{kerr.ReplicaNotAvailable, StaleMetadata},
	{kerr.KafkaStorageError, StaleMetadata},
	{kerr.PreferredLeaderNotAvailable, StaleMetadata},
	{kerr.FencedLeaderEpoch, StaleMetadata}, // our leader epoch is older: refresh metadata

	{kerr.NotCoordinator, NotCoordinator},
	{kerr.CoordinatorNotAvailable, NotCoordinator},
	{kerr.CoordinatorLoadInProgress, NotCoordinator},

	{kerr.RequestTimedOut, Retriable},
	{kerr.BrokerNotAvailable, Retriable},
	{kerr.NetworkException, Retriable},
	{kerr.NotEnoughReplicas, Retriable},
	{kerr.NotEnoughReplicasAfterAppend, Retriable},
	{kerr.UnknownLeaderEpoch, Retriable}, // the broker is behind us: retry
	{kerr.OffsetNotAvailable, Retriable},
	{kerr.UnstableOffsetCommit, Retriable},
	{kerr.ConcurrentTransactions, Retriable},
	{kerr.UnreleasedInstanceID, Retriable},
	{kerr.ThrottlingQuotaExceeded, Retriable},

	{kerr.MessageTooLarge, Permanent},
	{kerr.RecordListTooLarge, Permanent},
	{kerr.InvalidRecord, Permanent},
	{kerr.InvalidTimestamp, Permanent},
	{kerr.PolicyViolation, Permanent},
	{kerr.UnsupportedForMessageFormat, Permanent},
	{kerr.CorruptMessage, Permanent},

	{kerr.ProducerFenced, Fencing},
	{kerr.TransactionCoordinatorFenced, Fencing},
	{kerr.InvalidProducerEpoch, Fencing},
	{kerr.FencedInstanceID, Fencing},

	{kerr.UnknownMemberID, StaleMember},
	{kerr.IllegalGeneration, StaleMember},
	{kerr.FencedMemberEpoch, StaleMember},
	{kerr.StaleMemberEpoch, StaleMember},
	{kerr.RebalanceInProgress, StaleMember},

	{kerr.OutOfOrderSequenceNumber, ProducerState},
	{kerr.UnknownProducerID, ProducerState},
	{kerr.InvalidProducerIDMapping, ProducerState},
	{kerr.DuplicateSequenceNumber, ProducerState},

	{kerr.TopicAuthorizationFailed, Fatal},
	{kerr.GroupAuthorizationFailed, Fatal},
	{kerr.ClusterAuthorizationFailed, Fatal},
	{kerr.TransactionalIDAuthorizationFailed, Fatal},
	{kerr.SaslAuthenticationFailed, Fatal},
	{kerr.UnsupportedSaslMechanism, Fatal},
	{kerr.IllegalSaslState, Fatal},
	{kerr.UnsupportedVersion, Fatal},
	{kerr.UnsupportedCompressionType, Fatal},
	{kerr.InvalidTopicException, Fatal},
	{kerr.InvalidTransactionTimeout, Fatal},
	{kerr.InconsistentGroupProtocol, Fatal},
	{kerr.InvalidSessionTimeout, Fatal},
	{kerr.GroupMaxSizeReached, Fatal},
	{kerr.UnsupportedAssignor, Fatal},
}

// TestClassifyCode: the one table, code by code, and the same answer for
// the error itself, franz-go's or kafka-go's, bare or wrapped.
func TestClassifyCode(t *testing.T) {
	if len(classified) != len(codes) {
		t.Errorf("the test names %d codes, the table %d: keep them the same", len(classified), len(codes))
	}
	for _, tt := range classified {
		t.Run(tt.err.Message, func(t *testing.T) {
			if got := ClassifyCode(tt.err.Code); got != tt.want {
				t.Errorf("ClassifyCode: %v, want %v", got, tt.want)
			}
			for _, err := range []error{
				tt.err,
				fmt.Errorf("fetch: %w", tt.err),
				kafka.Error(tt.err.Code),
				fmt.Errorf("ListOffsets: %w", kafka.Error(tt.err.Code)),
				fmt.Errorf("commit: %w", errors.Join(errors.New("first"), fmt.Errorf("p0: %w", tt.err))),
			} {
				if got := Classify(err); got != tt.want {
					t.Errorf("Classify(%v): %v, want %v", err, got, tt.want)
				}
				if code, ok := Code(err); !ok || code != tt.err.Code {
					t.Errorf("Code(%v): %d, %v", err, code, ok)
				}
			}
		})
	}
}

// TestClassifyUnnamedCodes: a code the table does not name is Retriable
// if Kafka marks it so, and Unexpected otherwise (an unknown code too).
func TestClassifyUnnamedCodes(t *testing.T) {
	for _, tt := range []struct {
		code int16
		want Class
	}{
		{0, OK},
		{kerr.NotController.Code, Retriable},
		{kerr.FetchSessionIDNotFound.Code, Retriable},
		{kerr.UnknownTopicID.Code, Retriable},
		{kerr.UnknownServerError.Code, Unexpected},
		{kerr.InvalidRequest.Code, Unexpected},
		{kerr.InvalidRequiredAcks.Code, Unexpected},
		{kerr.InvalidTxnState.Code, Unexpected},
		{kerr.GroupIDNotFound.Code, Unexpected}, // what it means depends on the request: its callers decide
		{32000, Unexpected},                     // newer than this table
	} {
		if got := ClassifyCode(tt.code); got != tt.want {
			t.Errorf("code %d (%v): %v, want %v", tt.code, kerr.ErrorForCode(tt.code), got, tt.want)
		}
	}
	if Classify(nil) != OK || CodeError(0) != nil {
		t.Error("no error is not OK")
	}
	if !errors.Is(CodeError(kerr.FencedLeaderEpoch.Code), kerr.FencedLeaderEpoch) {
		t.Error("CodeError is not kerr's error")
	}
	for c := Class(0); c <= Unexpected; c++ {
		if c.String() == "Class(?)" {
			t.Errorf("class %d has no name", c)
		}
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
		{"refused", fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), Retriable},
		{"deadline", fmt.Errorf("fetch: %w", context.DeadlineExceeded), Retriable},
		{"canceled", context.Canceled, Retriable},
		{"unknown authority", fmt.Errorf("dial: %w", x509.UnknownAuthorityError{}), Fatal},
		{"invalid certificate", x509.CertificateInvalidError{Reason: x509.Expired}, Fatal},
		{"hostname", x509.HostnameError{Host: "b"}, Fatal},
		{"routing", errors.New("no leader for partition"), StaleMetadata},
		{"connection closed", io.EOF, StaleMetadata},
	} {
		if got := Classify(tt.err); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
		if _, ok := Code(tt.err); ok {
			t.Errorf("%s: Code finds a code", tt.name)
		}
	}
}
