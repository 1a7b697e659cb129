package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// layout locates the repository and this module.
type layout struct {
	root    string // the repository (module github.com/fencepost-dev/fencepost)
	compare string // bench/compare (this module)
}

const (
	rootModule    = "github.com/fencepost-dev/fencepost"
	compareModule = rootModule + "/bench/compare"
)

// findLayout walks up from dir to the repository root.
func findLayout(dir string) (layout, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if modulePath(filepath.Join(d, "go.mod")) == rootModule {
			l := layout{root: d, compare: filepath.Join(d, "bench", "compare")}
			if modulePath(filepath.Join(l.compare, "go.mod")) != compareModule {
				return layout{}, fmt.Errorf("%s has no %s module", l.compare, compareModule)
			}
			return l, nil
		}
		if filepath.Dir(d) == d {
			return layout{}, fmt.Errorf("no %s module in %s or above: run this from the repository (go run -C bench/compare ./cmd/report)", rootModule, dir)
		}
	}
}

// modulePath is the module line of a go.mod file ("" if none).
func modulePath(gomod string) string {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// goCmd runs the go command in dir; a cancelled ctx kills it and
// whatever it started (its process group).
func goCmd(ctx context.Context, dir string, args ...string) error {
	return toolCmd(ctx, dir, "go", args...)
}

// toolCmd runs the program name (go, mvn) in dir as goCmd does; a
// failure's error holds what it printed.
func toolCmd(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s %s (in %s): %w\n%s", name, strings.Join(args, " "), dir, err, out.String())
	}
	return nil
}

// gitCommit is the repository's HEAD and whether the work tree differs
// from it.
func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += " (with uncommitted changes)"
	}
	return c
}
