package run

import (
	"os"
	"runtime/debug"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// memoryHeadroom is what the Go runtime may use beyond twice
// consumer.buffer_bytes: fetch responses in flight, the stages' working
// memory (parsed JSON, producer batches) and the runtime's own. The
// resident set is larger than what the runtime counts by the binary's
// code and data (about 15 MiB measured), so 2×buffer_bytes + 48MiB keeps
// the peak resident set near 2×buffer_bytes + 64MiB.
const memoryHeadroom = 48 * pipeline.MiB

// setMemoryLimit gives the Go runtime a soft memory limit of twice
// buffer_bytes plus memoryHeadroom, so that memory follows buffer_bytes,
// what users size the process by: the buffered records are most of what
// is live. Twice, because the collector needs room to work in: with a
// limit of buffer_bytes + 48MiB the heap sat at the limit, the collector
// ran every few milliseconds and the runtime returned memory to the
// system only to fault it back, and the pipeline benchmark spent 1.3 to
// 1.5 times the CPU per record it spends without a limit; twice the
// budget gives the collector the room GOGC=100 would, and costs nothing
// measurable (bench/README.md, "Memory limit"). A GOMEMLIMIT in the
// environment wins; with the embedded broker, whose data lives in the
// process, no limit is set. It returns the limit set, or 0.
func setMemoryLimit(bufferBytes pipeline.ByteSize, embedded bool, log *zap.Logger) int64 {
	if embedded || os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := int64(2*bufferBytes + memoryHeadroom)
	debug.SetMemoryLimit(limit)
	log.Debug("soft memory limit set (GOMEMLIMIT overrides)", zap.Int64("bytes", limit))
	return limit
}
