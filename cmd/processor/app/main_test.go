package app

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// TestMain checks that no test leaves a goroutine behind (Main's
// contract), and removes the test binary built for the end-to-end tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runCLI runs the command line in process with reg's stages.
func runCLI(ctx context.Context, reg *stages.Registry, args ...string) (code int, stdout, stderr string) {
	return runCLIInput(ctx, reg, "", args...)
}

// runCLIInput runs the command line in process with stdin.
func runCLIInput(ctx context.Context, reg *stages.Registry, stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errOut stagetest.Buffer
	code = execute(ctx, args, &cli{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, registry: reg})
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testClient returns a franz-go client to the cluster at addr that writes
// records to the partition they name; the caller closes it.
func testClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// testBinary builds internal/testprocessor (the processor with a
// "record" stage) once per test run and returns its path.
func testBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			binErr = err
			return
		}
		if binDir, binErr = os.MkdirTemp("", "fencepost-e2e-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "processor")
		// -buildvcs=auto: the commit is recorded when the tree is a git
		// clone, whatever GOFLAGS says (TestVersionFromCheckout)
		cmd := exec.Command("go", "build", "-buildvcs=auto", "-o", binPath, "./internal/testprocessor")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}
