package realkafka

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the JVM in its own process group (so it can be killed
// with everything it started) and has Linux kill it if the test process
// dies first.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
