package proc

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of the CPU times in /proc/PID/stat: USER_HZ,
// which is 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// parseStatCPU returns utime+stime of a /proc/PID/stat line. The command
// name (field 2, in parentheses) may hold spaces and parentheses, so the
// fields are counted from the last ')'.
func parseStatCPU(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat line %.40q: no command name", line)
	}
	// After ") " come field 3 (state) onwards; utime and stime are
	// fields 14 and 15.
	fields := strings.Fields(line[i+1:])
	const utime = 14 - 3
	if len(fields) <= utime+1 {
		return 0, fmt.Errorf("/proc stat line %.40q: %d fields after the name, want at least %d", line, len(fields), utime+2)
	}
	var ticks int64
	for _, f := range fields[utime : utime+2] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat line: CPU field %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// parseStatusHWM returns VmHWM of a /proc/PID/status text, in bytes.
func parseStatusHWM(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc status: VmHWM line %q: want a number of kB", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc status: VmHWM line %q: %w", line, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc status has no VmHWM line")
}
