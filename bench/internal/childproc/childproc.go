//go:build unix

// Package childproc runs the processes a benchmark drives (a broker, the
// processor's instances) as children in their own process groups, each
// with its stdout and stderr in one log file, and ends them all.
package childproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Child is a subprocess (the broker or a processor instance) in its own
// process group, its stdout and stderr in one log file.
type Child struct {
	Name string
	Cmd  *exec.Cmd
	Log  string        // path of the log file
	Done chan struct{} // closed when it exited
	Err  error         // cmd.Wait's result, once done
}

// Children are the subprocesses started so far; killAll ends those still
// running.
type Children []*Child

// Start runs bin with args, logging to dir/name.log.
func (cs *Children) Start(dir, name, bin string, args ...string) (*Child, error) {
	path := filepath.Join(dir, name+".log")
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own copy
	c := &Child{Name: name, Cmd: exec.Command(bin, args...), Log: path, Done: make(chan struct{})}
	c.Cmd.Stdout, c.Cmd.Stderr = f, f
	c.Cmd.SysProcAttr = SysProcAttr()
	if err := c.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { c.Err = c.Cmd.Wait(); close(c.Done) }()
	*cs = append(*cs, c)
	return c, nil
}

// Running reports whether c has not exited.
func (c *Child) Running() bool {
	select {
	case <-c.Done:
		return false
	default:
		return true
	}
}

// Signal sends sig to c's process group.
func (c *Child) Signal(sig syscall.Signal) {
	if c.Running() {
		_ = syscall.Kill(-c.Cmd.Process.Pid, sig)
	}
}

// Stop sends sig and waits up to timeout for c to exit; it reports
// whether c exited in time.
func (c *Child) Stop(sig syscall.Signal, timeout time.Duration) bool {
	c.Signal(sig)
	return c.Wait(timeout)
}

// Wait waits up to timeout for c to exit; it reports whether c exited.
func (c *Child) Wait(timeout time.Duration) bool {
	select {
	case <-c.Done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// ExitCode is c's exit status once done (-1: killed by a signal).
func (c *Child) ExitCode() int { return c.Cmd.ProcessState.ExitCode() }

// KillAll SIGKILLs every child still running and waits for it.
func (cs Children) KillAll() {
	for _, c := range cs {
		c.Stop(syscall.SIGKILL, 10*time.Second)
	}
}

// Logs lists the log files, for a failure message.
func (cs Children) Logs() string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "  %s: %s\n", c.Name, c.Log)
	}
	return b.String()
}

// WaitBootstrap waits for the broker's "bootstrap: host:port" line in
// its log.
func WaitBootstrap(ctx context.Context, b *Child, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(b.Log)
		for _, line := range strings.Split(string(data), "\n") {
			if addr, ok := strings.CutPrefix(line, "bootstrap: "); ok {
				return strings.TrimSpace(addr), nil
			}
		}
		if !b.Running() {
			return "", fmt.Errorf("the broker exited before printing its address (%v)", b.Err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("no bootstrap line from the broker within %v", timeout)
}
