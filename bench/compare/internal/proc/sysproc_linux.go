package proc

import "syscall"

// sysProcAttr puts a child in a process group of its own (a terminal's
// Ctrl-C reaches only this program, which then stops its children in
// order, and a signal to the group reaches a child's own children) and
// asks Linux to SIGKILL it if this program dies first. Pdeathsig is tied
// to the thread that started the child; the Go runtime keeps its threads
// alive unless a goroutine locked to one exits, which this program never
// does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
