package run

import (
	"math"
	"runtime/debug"
	"testing"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/pipeline"
)

func TestSetMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	tests := []struct {
		name      string
		embedded  bool
		gomemlim  string
		wantLimit int64 // 0: none set
	}{
		{name: "twice buffer_bytes plus headroom", wantLimit: int64(2*64*pipeline.MiB + memoryHeadroom)},
		{name: "the embedded broker's data lives in the process", embedded: true},
		{name: "GOMEMLIMIT wins", gomemlim: "1GiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			t.Setenv("GOMEMLIMIT", tt.gomemlim)
			got := setMemoryLimit(64*pipeline.MiB, tt.embedded, zap.NewNop())
			if got != tt.wantLimit {
				t.Fatalf("set %d, want %d", got, tt.wantLimit)
			}
			want := tt.wantLimit
			if want == 0 {
				want = math.MaxInt64
			}
			if now := debug.SetMemoryLimit(-1); now != want {
				t.Fatalf("runtime limit %d, want %d", now, want)
			}
		})
	}
}
