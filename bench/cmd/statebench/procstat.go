//go:build unix

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ: 100 on
// every Linux architecture Go supports).
const userHZ = 100

// procCPU returns the user+system CPU time a process has used so far,
// every thread of it (/proc/PID/stat).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("CPU time of process %d (Linux /proc needed): %w", pid, err)
	}
	return parseStatCPU(string(b))
}

// parseStatCPU returns utime+stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name, field 2, is in parentheses and may hold spaces
// and parentheses itself: the fields are counted from the last ')'.
func parseStatCPU(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %.40q: no command name in parentheses", line)
	}
	f := strings.Fields(line[i+1:]) // field 3 (the state) onwards
	const utime = 14 - 3
	if len(f) < utime+2 {
		return 0, fmt.Errorf("/proc stat %.40q: %d fields after the command name, want at least %d", line, len(f), utime+2)
	}
	var ticks int64
	for _, s := range f[utime : utime+2] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: CPU field %q is not a number", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
