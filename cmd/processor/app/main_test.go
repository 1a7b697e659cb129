package app

import (
	"context"
	"errors"
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

// builtBinary is a main package of the module built once per test run into
// binDir (removed by TestMain).
type builtBinary struct {
	name, pkg string
	once      sync.Once
	path      string
	err       error
}

var (
	binDirOnce sync.Once
	binDir     string
	binDirErr  error

	// the processor with a "record" stage
	testProcessor = &builtBinary{name: "processor", pkg: "./internal/testprocessor"}
	// the processor itself (the built-in stages)
	builtinProcessor = &builtBinary{name: "processor-builtin", pkg: "./cmd/processor"}
)

// build builds b once per test run and returns its path.
func (b *builtBinary) build(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		binDirOnce.Do(func() { binDir, binDirErr = os.MkdirTemp("", "fencepost-e2e-") })
		root, err := moduleRoot()
		if err = errors.Join(binDirErr, err); err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(binDir, b.name)
		// -buildvcs=auto: the commit is recorded when the tree is a git
		// clone, whatever GOFLAGS says (TestVersionFromCheckout)
		cmd := exec.Command("go", "build", "-buildvcs=auto", "-o", b.path, b.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// testBinary returns the path of internal/testprocessor (the processor
// with a "record" stage), built once per test run.
func testBinary(t *testing.T) string { return testProcessor.build(t) }

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}
