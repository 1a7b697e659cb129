package pipeline

import (
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/resolve"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// TestDecideStart is the reset decision on its own: where a partition
// starts for each kind of start request, log bounds and reset policy.
func TestDecideStart(t *testing.T) {
	bounds := func(ls, hw int64) *resolve.PartitionResult {
		return &resolve.PartitionResult{LogStart: ls, HighWatermark: hw, TimeOffset: -1, LeaderEpochEndOffset: -1}
	}
	withLeaderEpochEnd := func(pr *resolve.PartitionResult, end int64) *resolve.PartitionResult {
		pr.LeaderEpochEndOffset = end
		return pr
	}
	withTime := func(pr *resolve.PartitionResult, at int64) *resolve.PartitionResult {
		pr.TimeOffset = at
		return pr
	}
	tests := []struct {
		name                string
		req                 offsetstore.StartRequest
		seek, recr          bool
		validateLeaderEpoch int32
		pr                  *resolve.PartitionResult
		policy              offsetstore.ResetPolicy
		want                startDecision
	}{
		{name: "committed inside the log is valid", req: offsetstore.Committed(50), validateLeaderEpoch: -1, pr: bounds(10, 100),
			want: startDecision{to: 50}},
		{name: "committed below the log start", req: offsetstore.Committed(5), validateLeaderEpoch: -1, pr: bounds(10, 100),
			want: startDecision{to: 10, reason: offsetstore.ReasonBelowLogStart}},
		{name: "committed above the high watermark, policy latest", req: offsetstore.Committed(150), validateLeaderEpoch: -1, pr: bounds(10, 100),
			policy: offsetstore.ResetLatest, want: startDecision{to: 100, reason: offsetstore.ReasonAboveHighWatermark, dataLoss: true}},
		{name: "committed above the high watermark, policy none", req: offsetstore.Committed(150), validateLeaderEpoch: -1, pr: bounds(10, 100),
			policy: offsetstore.ResetNone, want: startDecision{reason: offsetstore.ReasonAboveHighWatermark, dataLoss: true, stop: true}},
		{name: "diverged below the position", req: offsetstore.Committed(80), validateLeaderEpoch: 3, pr: withLeaderEpochEnd(bounds(10, 100), 60),
			want: startDecision{to: 60, reason: offsetstore.ReasonLogTruncation, dataLoss: true, truncated: true}},
		{name: "epoch holds past the position, high watermark behind", req: offsetstore.Committed(120), validateLeaderEpoch: 3,
			pr: withLeaderEpochEnd(bounds(10, 100), 130), want: startDecision{to: 120}},
		{name: "a sought offset is clamped to the log", req: offsetstore.Committed(500), seek: true, validateLeaderEpoch: -1, pr: bounds(10, 100),
			want: startDecision{to: 100, reason: offsetstore.ReasonSeek}},
		{name: "earliest", req: offsetstore.Earliest(), pr: bounds(10, 100), want: startDecision{to: 10, reason: offsetstore.ReasonSeek}},
		{name: "latest", req: offsetstore.Latest(), pr: bounds(10, 100), want: startDecision{to: 100, reason: offsetstore.ReasonSeek}},
		{name: "a time before the log start", req: offsetstore.AtTime(time.Unix(1, 0)), pr: withTime(bounds(10, 100), 3),
			want: startDecision{to: 10, reason: offsetstore.ReasonSeek}},
		{name: "a time after every record", req: offsetstore.AtTime(time.Unix(1, 0)), pr: bounds(10, 100),
			want: startDecision{to: 100, reason: offsetstore.ReasonSeek}},
		{name: "no committed offset, policy earliest", req: offsetstore.ByPolicy(), pr: bounds(10, 100),
			want: startDecision{to: 10, reason: offsetstore.ReasonNoCommittedOffset}},
		{name: "a recreated topic, policy latest", req: offsetstore.ByPolicy(), recr: true, pr: bounds(0, 7), policy: offsetstore.ResetLatest,
			want: startDecision{to: 7, reason: offsetstore.ReasonTopicRecreated}},
		{name: "no committed offset, policy none", req: offsetstore.ByPolicy(), pr: bounds(10, 100), policy: offsetstore.ResetNone,
			want: startDecision{reason: offsetstore.ReasonNoCommittedOffset, stop: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideStart(tc.req, tc.seek, tc.recr, tc.validateLeaderEpoch, tc.pr, tc.policy); got != tc.want {
				t.Fatalf("decideStart = %+v, want %+v", got, tc.want)
			}
		})
	}
}
