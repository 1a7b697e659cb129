package childproc

import "syscall"

// SysProcAttr puts a child in its own process group (so a kill reaches
// all of it) and has Linux SIGKILL it if this program dies first.
// Pdeathsig follows the thread that started the child; the Go runtime
// does not end threads of goroutines that are not locked to one, so it
// holds for the life of the program.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
