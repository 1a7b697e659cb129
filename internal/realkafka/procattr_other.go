//go:build !linux

package realkafka

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the JVM in its own process group, so it can be killed
// with everything it started. (Only Linux can also kill it when the test
// process dies first.)
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
