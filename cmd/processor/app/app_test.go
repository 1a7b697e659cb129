package app

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/cli/clitest"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestVersionAndHelp: every command has help; version prints.
func TestVersionAndHelp(t *testing.T) {
	code, out, _ := runCLI(context.Background(), clitest.Registry(), "version")
	if code != ExitOK || !strings.HasPrefix(out, "processor ") {
		t.Errorf("version: %d %q", code, out)
	}
	for _, cmd := range [][]string{{"run"}, {"lint"}, {"stages"}, {"broker"}, {"version"}, {"offsets"}, {"offsets", "describe"},
		{"offsets", "reset"}, {"consume"}, {"produce"}, {"topics"}, {"topics", "list"}, {"topics", "create"}, {"topics", "delete"},
		{"state"}, {"state", "get"}, {"state", "scan"}, {"state", "count"}, {"state", "reset"}} {
		code, out, _ := runCLI(context.Background(), clitest.Registry(), append(cmd, "--help")...)
		if code != ExitOK || !strings.Contains(out, "Usage:") {
			t.Errorf("%s --help: exit %d\n%s", cmd, code, out)
		}
	}
}

// TestVersionFromCheckout: the built binary names the commit it was
// built from when built in a git clone (as CI's is), and says nothing of
// a commit otherwise (a git worktree, a source archive).
func TestVersionFromCheckout(t *testing.T) {
	bin := testBinary(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	head := ""
	if fi, err := os.Stat(filepath.Join(root, ".git")); err == nil && fi.IsDir() {
		out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
		if err == nil {
			head = strings.TrimSpace(string(out))
		}
	}
	p := startBinary(t, bin, nil, "version")
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr)
	}
	out := p.stdout.String()
	if !strings.HasPrefix(out, "processor ") || !strings.Contains(out, " go1.") {
		t.Fatalf("version line %q", out)
	}
	switch {
	case head != "" && !strings.Contains(out, "(commit "+head):
		t.Errorf("built in a clone at %s; version says %q", head, out)
	case head == "" && strings.Contains(out, "commit"):
		t.Errorf("built outside a clone; version claims a commit: %q", out)
	}
	t.Logf("%s (clone HEAD %q)", strings.TrimSpace(out), head)
}

// TestLintPrintsTheExampleTopology: "processor lint
// configs/revenue-per-minute.yaml" names, after "ok", the two
// sub-pipelines: the purchases go through the repartition topic by user
// to the aggregate, whose store has its changelog topic.
func TestLintPrintsTheExampleTopology(t *testing.T) {
	const file = "../../../configs/revenue-per-minute.yaml"
	code, out, errOut := runCLI(context.Background(), stages.Default, "lint", file)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		file + ": ok\n  topology of group revenue: 2 sub-pipelines",
		"    1. reads events\n",
		"repartition  revenue-by-revenue-repartition (read by sub-pipeline 2)\n",
		"    2. reads revenue-by-revenue-repartition\n",
		"store        revenue, changelog revenue-revenue-changelog\n",
		"writes       revenue-per-minute\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lint's output lacks %q:\n%s", want, out)
		}
	}
}
