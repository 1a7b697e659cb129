package run

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// TestStopCause: every kind of stop gets its own label.
func TestStopCause(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{err: fmt.Errorf("records of t/0 from offset 3: %w: CRC mismatch in the batch at offset 3", fetch.ErrCorrupt), want: "corrupt_records"},
		{err: &offsetstore.ResetError{}, want: "no_valid_offset"},
		{err: errors.New("something else"), want: "other"},
	} {
		if got := stopCause(tt.err); got != tt.want {
			t.Errorf("stopCause(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
