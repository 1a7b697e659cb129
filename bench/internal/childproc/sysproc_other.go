//go:build unix && !linux

package childproc

import "syscall"

// SysProcAttr puts a child in its own process group, so a kill reaches
// all of it. Without Linux's Pdeathsig, a child outlives this program
// only if the program itself is SIGKILLed.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
