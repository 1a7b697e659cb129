// Package wait has the one way the processor waits out a backoff: for a
// time, or until a context ends.
package wait

import (
	"context"
	"time"
)

// For waits d, or less if ctx ends first; it reports whether d passed.
func For(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
