package produce

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestActionFor: what a produce does with each code of the shared table
// (kafkawire), idempotent and transactional; the codes where the two
// differ, or where a produce decides differently within a class, are
// named in actionFor's comment.
func TestActionFor(t *testing.T) {
	for _, tt := range []struct {
		err        *kerr.Error
		idempotent action
		txn        action // 0 (actWritten) with a non-OK code: as idempotent
	}{
		{kerr.DuplicateSequenceNumber, actWritten, actWritten},
		{kerr.OutOfOrderSequenceNumber, actRenew, actAbortable},
		{kerr.UnknownProducerID, actRenew, actAbortable},
		{kerr.InvalidProducerIDMapping, actRenew, actAbortable},
		{kerr.InvalidProducerEpoch, actRenew, actAbortable},
		{kerr.ProducerFenced, actRenew, actFenced},
		{kerr.TransactionCoordinatorFenced, actRenew, actFenced},

		{kerr.MessageTooLarge, actRefused, 0},
		{kerr.RecordListTooLarge, actRefused, 0},
		{kerr.InvalidRecord, actRefused, 0},
		{kerr.InvalidTimestamp, actRefused, 0},
		{kerr.PolicyViolation, actRefused, 0},
		{kerr.UnsupportedForMessageFormat, actRefused, 0},
		{kerr.CorruptMessage, actRefused, 0}, // was retried: the same bytes get the same answer

		{kerr.UnknownTopicOrPartition, actUnknownTopic, 0},
		{kerr.NotLeaderForPartition, actTransient, 0},
		{kerr.LeaderNotAvailable, actTransient, 0},
		{kerr.KafkaStorageError, actTransient, 0},
		{kerr.FencedLeaderEpoch, actTransient, 0},
		{kerr.RequestTimedOut, actTransient, 0},
		{kerr.NetworkException, actTransient, 0},
		{kerr.NotEnoughReplicas, actTransient, 0},
		{kerr.NotEnoughReplicasAfterAppend, actTransient, 0},
		{kerr.BrokerNotAvailable, actTransient, 0}, // was given up unmarked: Kafka marks it retriable
		{kerr.NotController, actTransient, 0},      // not named: Kafka marks it retriable

		{kerr.TopicAuthorizationFailed, actSink, 0},
		{kerr.InvalidTopicException, actSink, 0},
		{kerr.ClusterAuthorizationFailed, actFatal, 0},
		{kerr.TransactionalIDAuthorizationFailed, actFatal, 0},
		{kerr.UnsupportedVersion, actFatal, 0},         // was given up unmarked
		{kerr.UnsupportedCompressionType, actFatal, 0}, // was given up unmarked

		{kerr.OffsetOutOfRange, actFail, 0},
		{kerr.RebalanceInProgress, actFail, 0},
		{kerr.InvalidRequiredAcks, actFail, 0},
		{kerr.InvalidTxnState, actFail, 0},
		{kerr.UnknownServerError, actFail, 0},
	} {
		want := tt.txn
		if want == actWritten && tt.err != kerr.DuplicateSequenceNumber {
			want = tt.idempotent
		}
		if got := actionFor(tt.err.Code, false); got != tt.idempotent {
			t.Errorf("%s, idempotent: action %d, want %d", tt.err.Message, got, tt.idempotent)
		}
		if got := actionFor(tt.err.Code, true); got != want {
			t.Errorf("%s, transactional: action %d, want %d", tt.err.Message, got, want)
		}
	}
	if actionFor(0, false) != actWritten || actionFor(0, true) != actWritten {
		t.Error("code 0 is not written")
	}
}

// TestCoordinatorCallClasses: what a transaction request retries, and
// what it returns at once, by class.
func TestCoordinatorCallClasses(t *testing.T) {
	for _, tt := range []struct {
		err     *kerr.Error
		retried bool
		fenced  bool
	}{
		{kerr.NotCoordinator, true, false},
		{kerr.CoordinatorNotAvailable, true, false},
		{kerr.CoordinatorLoadInProgress, true, false},
		{kerr.RequestTimedOut, true, false},
		{kerr.NetworkException, true, false},
		{kerr.UnstableOffsetCommit, true, false},
		{kerr.NotEnoughReplicas, true, false},
		{kerr.ProducerFenced, false, true},
		{kerr.TransactionCoordinatorFenced, false, true},
		{kerr.InvalidProducerEpoch, false, false}, // KIP-588: Abort tells
		{kerr.FencedInstanceID, false, false},     // the member's: SendOffsets
		{kerr.UnknownMemberID, false, false},
		{kerr.TransactionalIDAuthorizationFailed, false, false},
		{kerr.UnknownTopicOrPartition, false, false},
		{kerr.InvalidTxnState, false, false},
	} {
		p := New(nil, Config{TransactionalID: "t", MaxAttempts: 3, RetryBackoff: time.Microsecond})
		sent := 0
		err := p.coordinatorCall(context.Background(), "Op", func(context.Context) (int16, error) {
			sent++
			return tt.err.Code, nil
		})
		if retried := sent > 1; retried != tt.retried {
			t.Errorf("%s: sent %d times, retried %v, want %v", tt.err.Message, sent, retried, tt.retried)
		}
		if errors.Is(err, ErrProducerFenced) != tt.fenced {
			t.Errorf("%s: %v, fenced %v, want %v", tt.err.Message, err, !tt.fenced, tt.fenced)
		}
		if !errors.Is(err, kafka.Error(tt.err.Code)) {
			t.Errorf("%s: %v does not wrap the code", tt.err.Message, err)
		}
	}
	// CONCURRENT_TRANSACTIONS is waited out, beyond MaxAttempts
	p := New(nil, Config{TransactionalID: "t", MaxAttempts: 2, RetryBackoff: time.Microsecond})
	sent := 0
	err := p.coordinatorCall(context.Background(), "Op", func(context.Context) (int16, error) {
		if sent++; sent < 5 {
			return kerr.ConcurrentTransactions.Code, nil
		}
		return 0, nil
	})
	if err != nil || sent != 5 {
		t.Errorf("CONCURRENT_TRANSACTIONS: %v after %d, want success after 5", err, sent)
	}
}

// TestStaleMember: the TxnOffsetCommit answers that make SendOffsets's
// error wrap ErrStaleMember.
func TestStaleMember(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("TxnOffsetCommit: %w", kafka.UnknownMemberId), true},
		{fmt.Errorf("TxnOffsetCommit: %w", kafka.IllegalGeneration), true},
		{fmt.Errorf("TxnOffsetCommit: %w", kafka.FencedInstanceID), true},
		{fmt.Errorf("TxnOffsetCommit: %w", kafka.Error(kerr.StaleMemberEpoch.Code)), true},
		{fmt.Errorf("TxnOffsetCommit: %w", kafka.RebalanceInProgress), true},
		{fmt.Errorf("TxnOffsetCommit: %w (%w)", ErrProducerFenced, kafka.ProducerFenced), false},
		{fmt.Errorf("TxnOffsetCommit: %w", kafka.InvalidProducerEpoch), false},
		{fmt.Errorf("TxnOffsetCommit: %w (after 3 attempts)", kafka.RequestTimedOut), false},
		{errors.New("no code"), false},
	} {
		if got := staleMember(tt.err); got != tt.want {
			t.Errorf("%v: stale %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestTxnErrorClasses: a Fatal code of a transaction request ends the
// producer, unless it is an authorization of a topic or of the group.
func TestTxnErrorClasses(t *testing.T) {
	for _, tt := range []struct {
		topic       string
		code        kafka.Error
		fatal, sink bool
	}{
		{"out", kafka.TopicAuthorizationFailed, false, true},
		{"out", kafka.InvalidTopic, false, true},
		{"", kafka.TopicAuthorizationFailed, false, false},
		{"", kafka.GroupAuthorizationFailed, false, false},
		{"", kafka.TransactionalIDAuthorizationFailed, true, false},
		{"", kafka.ClusterAuthorizationFailed, true, false},
		{"", kafka.InvalidTransactionTimeout, true, false},
		{"", kafka.UnsupportedVersion, true, false},
		{"out", kafka.UnknownTopicOrPartition, false, false},
		{"", kafka.Error(kerr.InvalidTxnState.Code), false, false},
	} {
		p := New(nil, Config{TransactionalID: "t"})
		err := p.txnError(context.Background(), tt.topic, fmt.Errorf("Op: %w", tt.code))
		var fatal *FatalError
		var sink *SinkError
		if errors.As(err, &fatal) != tt.fatal || errors.As(err, &sink) != tt.sink {
			t.Errorf("%v (topic %q): %v: fatal %v, sink %v; want %v, %v", tt.code, tt.topic, err, !tt.fatal, !tt.sink, tt.fatal, tt.sink)
		}
	}
}
