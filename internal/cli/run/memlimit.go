package run

import (
	"os"
	"runtime/debug"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// memoryHeadroom is what the Go runtime may use beyond
// consumer.buffer_bytes: fetch responses in flight, the stages' working
// memory (parsed JSON, producer batches) and the runtime's own. The
// resident set is larger than what the runtime counts by the binary's
// code and data (about 15 MiB measured), so buffer_bytes + 48MiB keeps
// the peak resident set near buffer_bytes + 64MiB.
const memoryHeadroom = 48 * pipeline.MiB

// setMemoryLimit gives the Go runtime a soft memory limit of buffer_bytes
// plus memoryHeadroom, so the garbage collector works harder as the
// process nears it instead of letting the heap grow to twice what is
// live: the buffered records are most of what is live, and buffer_bytes
// is what users size the process by. A GOMEMLIMIT in the environment
// wins; with the embedded broker, whose data lives in the process, no
// limit is set. It returns the limit set, or 0.
func setMemoryLimit(bufferBytes pipeline.ByteSize, embedded bool, log *zap.Logger) int64 {
	if embedded || os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := int64(bufferBytes + memoryHeadroom)
	debug.SetMemoryLimit(limit)
	log.Debug("soft memory limit set (GOMEMLIMIT overrides)", zap.Int64("bytes", limit))
	return limit
}
