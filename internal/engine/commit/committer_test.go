package commit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"

	"github.com/fencepost-dev/fencepost/offsetstore"
)

type flakyStore struct {
	calls atomic.Int32
	fail  func(call int32) error
}

func (s *flakyStore) Commit(context.Context, offsets.CommitRequest) error {
	return s.fail(s.calls.Add(1))
}

func TestCommitter(t *testing.T) {
	b := offsets.NewCommitRequest(3, []offsets.CommitEntry{{Partition: offsetstore.TopicPartition{Topic: "t"}, Offset: 10}})
	transient := errors.New("coordinator load in progress")
	tests := []struct {
		name    string
		fail    func(int32) error
		calls   int32
		wantErr error
	}{
		{name: "succeeds", fail: func(int32) error { return nil }, calls: 1},
		{name: "retries transient errors", fail: func(n int32) error {
			if n < 3 {
				return transient
			}
			return nil
		}, calls: 3},
		{name: "fenced is not retried", fail: func(int32) error {
			return fmt.Errorf("REBALANCE_IN_PROGRESS: %w", offsets.ErrGenerationEnded)
		}, calls: 1, wantErr: offsets.ErrGenerationEnded},
		{name: "stale generation is not retried", fail: func(int32) error { return offsets.ErrStaleGeneration },
			calls: 1, wantErr: offsets.ErrStaleGeneration},
		{name: "gives up at the timeout", fail: func(int32) error { return transient }, wantErr: transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &flakyStore{fail: tt.fail}
			r := NewCommitter(time.Millisecond, 100*time.Millisecond).Commit(context.Background(), Job{Request: b, Store: s})
			if !errors.Is(r.Err, tt.wantErr) || (tt.wantErr == nil && r.Err != nil) {
				t.Fatalf("err %v, want %v", r.Err, tt.wantErr)
			}
			if tt.calls > 0 && s.calls.Load() != tt.calls {
				t.Fatalf("%d calls, want %d", s.calls.Load(), tt.calls)
			}
			if tt.calls == 0 && s.calls.Load() < 3 {
				t.Fatalf("only %d attempts before giving up", s.calls.Load())
			}
			if r.Request.ID() != b.ID() {
				t.Fatal("result for another batch")
			}
		})
	}
}
