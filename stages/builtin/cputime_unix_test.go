//go:build unix

package builtin_test

import "syscall"

// cpuTime is the CPU time the process used so far (user and system, all
// threads), in nanoseconds: what a benchmark costs whatever else runs on
// the machine.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
