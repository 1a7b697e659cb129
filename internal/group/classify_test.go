package group

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/kafkawire"
)

// TestGroupError: what the member does with a JoinGroup, SyncGroup or
// Heartbeat error code, by the shared table's class.
func TestGroupError(t *testing.T) {
	for _, tt := range []struct {
		err    *kerr.Error
		want   string // "rejoin", "lost", "fenced", "coordinator", "fatal" or "retry"
		detail string // what the error says besides the code
	}{
		{kerr.RebalanceInProgress, "rejoin", ""},
		{kerr.UnknownMemberID, "lost", ""},
		{kerr.IllegalGeneration, "lost", ""},
		{kerr.FencedMemberEpoch, "lost", ""},
		{kerr.FencedInstanceID, "fenced", ""},
		{kerr.NotCoordinator, "coordinator", ""},
		{kerr.CoordinatorNotAvailable, "coordinator", ""},
		{kerr.CoordinatorLoadInProgress, "coordinator", ""},
		{kerr.InconsistentGroupProtocol, "fatal", "share no assignor"},
		{kerr.InvalidSessionTimeout, "fatal", "group.min/max.session.timeout.ms"},
		{kerr.GroupAuthorizationFailed, "fatal", "group ACLs"},
		{kerr.GroupMaxSizeReached, "fatal", "group.max.size"},
		{kerr.UnsupportedVersion, "fatal", ""},
		{kerr.TopicAuthorizationFailed, "retry", ""}, // a topic's, not the group's
		{kerr.RequestTimedOut, "retry", ""},
		{kerr.UnknownServerError, "retry", ""},
	} {
		t.Run(tt.err.Message, func(t *testing.T) {
			s := &runState{cfg: Config{Group: "g", InstanceID: "i", Logger: zap.NewNop()}}
			err := s.groupError("JoinGroup", tt.err.Code)
			got := "retry"
			var fe fatalError
			switch {
			case errors.Is(err, ErrFencedInstance):
				got = "fenced"
			case errors.As(err, &fe):
				got = "fatal"
			case errors.Is(err, errLost):
				got = "lost"
			case s.rejoin:
				got = "rejoin"
			case isCoordinatorError(tt.err.Code):
				got = "coordinator"
			}
			if got != tt.want {
				t.Fatalf("%v: %s, want %s", err, got, tt.want)
			}
			if got == "fenced" && !errors.As(err, &fe) {
				t.Fatalf("%v: fenced but not fatal", err)
			}
			if code, _ := kafkawire.Code(err); code != tt.err.Code {
				t.Fatalf("%v does not wrap %s", err, tt.err.Message)
			}
			if tt.detail != "" && !strings.Contains(err.Error(), tt.detail) {
				t.Fatalf("%v does not say %q", err, tt.detail)
			}
		})
	}
	if (&runState{}).groupError("Heartbeat", 0) != nil {
		t.Fatal("code 0 is an error")
	}
}
