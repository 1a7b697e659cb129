// Package proc starts the benchmark's child processes (brokers, the
// processor, Benthos, the benchmark binary) and measures them: CPU time
// while they run, peak resident memory once they exited. A Group ends
// every child it started, so a failed or interrupted run leaves nothing
// behind.
package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Group owns the children started through it. Its methods are safe for
// concurrent use.
type Group struct {
	dir string // log files go here

	mu       sync.Mutex
	children []*Child
}

// NewGroup returns a group whose children log to files in dir.
func NewGroup(dir string) *Group { return &Group{dir: dir} }

// Child is a started process.
type Child struct {
	Name  string
	Log   string    // path of the file holding its stdout and stderr
	Start time.Time // when it was started

	cmd  *exec.Cmd
	done chan struct{} // closed once it exited
	err  error         // cmd.Wait's result, valid once done is closed
}

// Start runs bin with args and the extra environment variables env
// (NAME=value) in dir (empty: the current directory), its output in
// name.log. The child is in a process group of its own, and Linux kills
// it if this program dies (see sysProcAttr).
func (g *Group) Start(name, dir, bin string, args, env []string) (*Child, error) {
	path := filepath.Join(g.dir, name+".log")
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	c := &Child{Name: name, Log: path, cmd: cmd, done: make(chan struct{})}
	g.mu.Lock()
	defer g.mu.Unlock()
	c.Start = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	g.children = append(g.children, c)
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// StopAll ends every child still running: SIGTERM to its process group,
// then SIGKILL after grace. It returns once all have exited.
func (g *Group) StopAll(grace time.Duration) {
	g.mu.Lock()
	cs := append([]*Child(nil), g.children...)
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { _, _ = c.Stop(grace) })
	}
	wg.Wait()
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Done is closed once the child exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Exited reports whether the child exited, and how.
func (c *Child) Exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// Usage is what a child cost over its whole life.
type Usage struct {
	CPU time.Duration // user plus system time
	// MaxRSS is getrusage's peak resident set, in bytes. On Linux it is
	// at least this program's own resident set when it started the
	// child: Go starts children with vfork, so the child's address space
	// is this program's until exec, and the high-water mark survives the
	// exec. Use PeakRSS for the child's own.
	MaxRSS  int64
	Elapsed time.Duration // from Start to exit
	Err     error         // how it exited (nil: status 0)
}

// Stop sends SIGTERM to the child's process group, waits up to grace
// for it to exit, then sends SIGKILL. It returns the child's resource
// usage; calling it again returns the same.
func (c *Child) Stop(grace time.Duration) (Usage, error) {
	if exited, _ := c.Exited(); !exited {
		_ = syscall.Kill(-c.Pid(), syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(grace):
			_ = syscall.Kill(-c.Pid(), syscall.SIGKILL)
			<-c.done
		}
	}
	return c.usage()
}

// Wait waits for the child to exit by itself, or for ctx to end (then it
// stops the child as Stop does, with a grace of 5s).
func (c *Child) Wait(ctx context.Context) (Usage, error) {
	select {
	case <-c.done:
		return c.usage()
	case <-ctx.Done():
		_, _ = c.Stop(5 * time.Second)
		return Usage{}, ctx.Err()
	}
}

func (c *Child) usage() (Usage, error) {
	st := c.cmd.ProcessState
	ru, ok := st.SysUsage().(*syscall.Rusage)
	if !ok {
		return Usage{}, errors.New("no resource usage for " + c.Name)
	}
	return Usage{
		CPU:     time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		MaxRSS:  ru.Maxrss * 1024, // kilobytes on Linux
		Elapsed: time.Since(c.Start),
		Err:     c.err,
	}, nil
}

// CPU is the user plus system time the running child has used so far,
// all its threads together, from /proc/PID/stat (10 ms resolution).
func (c *Child) CPU() (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Pid()))
	if err != nil {
		return 0, fmt.Errorf("CPU time of %s: %w", c.Name, err)
	}
	return parseStatCPU(string(data))
}

// PeakRSS is the running child's peak resident set in bytes so far,
// VmHWM of /proc/PID/status: the high-water mark of its own address
// space, created at exec.
func (c *Child) PeakRSS() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Pid()))
	if err != nil {
		return 0, fmt.Errorf("peak RSS of %s: %w", c.Name, err)
	}
	return parseStatusHWM(string(data))
}

// WaitLine waits until the child's log has a line starting with prefix
// and returns the rest of that line. It fails if the child exits first,
// after timeout, or when ctx ends.
func (c *Child) WaitLine(ctx context.Context, prefix string, timeout time.Duration) (string, error) {
	deadline := time.After(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if rest, ok := findLine(c.Log, prefix); ok {
			return rest, nil
		}
		if exited, err := c.Exited(); exited {
			return "", fmt.Errorf("%s exited (%v) before printing %q; see %s", c.Name, err, prefix, c.Log)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-deadline:
			return "", fmt.Errorf("%s printed no %q line within %v; see %s", c.Name, prefix, timeout, c.Log)
		case <-tick.C:
		}
	}
}

func findLine(path, prefix string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

// Tail returns the last n lines of the child's log, for error messages.
func (c *Child) Tail(n int) string {
	data, err := os.ReadFile(c.Log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
