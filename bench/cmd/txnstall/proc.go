//go:build linux

package main

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

// child is a subprocess (the broker or a processor instance) in its own
// process group, its stdout and stderr in one log file.
type child struct {
	name string
	cmd  *exec.Cmd
	log  string        // path of the log file
	done chan struct{} // closed when it exited
	err  error         // cmd.Wait's result, once done
}

// children are the subprocesses started so far; killAll ends those still
// running.
type children []*child

// start runs bin with args, logging to dir/name.log.
func (cs *children) start(dir, name, bin string, args ...string) (*child, error) {
	path := filepath.Join(dir, name+".log")
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own copy
	c := &child{name: name, cmd: exec.Command(bin, args...), log: path, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = f, f
	c.cmd.SysProcAttr = sysProcAttr()
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	*cs = append(*cs, c)
	return c, nil
}

// running reports whether c has not exited.
func (c *child) running() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// signal sends sig to c's process group.
func (c *child) signal(sig syscall.Signal) {
	if c.running() {
		_ = syscall.Kill(-c.cmd.Process.Pid, sig)
	}
}

// stop sends sig and waits up to timeout for c to exit; it reports
// whether c exited in time.
func (c *child) stop(sig syscall.Signal, timeout time.Duration) bool {
	c.signal(sig)
	return c.wait(timeout)
}

// wait waits up to timeout for c to exit; it reports whether c exited.
func (c *child) wait(timeout time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// killAll SIGKILLs every child still running and waits for it.
func (cs children) killAll() {
	for _, c := range cs {
		c.stop(syscall.SIGKILL, 10*time.Second)
	}
}

// waitBootstrap waits for the broker's "bootstrap: host:port" line in
// its log.
func waitBootstrap(ctx context.Context, b *child, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(b.log)
		for _, line := range strings.Split(string(data), "\n") {
			if addr, ok := strings.CutPrefix(line, "bootstrap: "); ok {
				return strings.TrimSpace(addr), nil
			}
		}
		if !b.running() {
			return "", fmt.Errorf("the broker exited before printing its address (%v)", b.err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("no bootstrap line from the broker within %v", timeout)
}
