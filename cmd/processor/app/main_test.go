package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/fencepost-dev/fencepost/internal/cli/clitest"
	"github.com/fencepost-dev/fencepost/internal/cli/kafkatools"
	"github.com/fencepost-dev/fencepost/stages"
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
	return clitest.Run(ctx, reg, "", commands, args...)
}

// The record and group descriptions the tools print as JSON.
type (
	jsonRecord       = kafkatools.JSONRecord
	jsonHeader       = kafkatools.JSONHeader
	groupDescription = kafkatools.GroupDescription
)

// jsonLines parses consume -o json's output.
func jsonLines(t *testing.T, out string) []jsonRecord {
	t.Helper()
	var recs []jsonRecord
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var j jsonRecord
		if err := json.Unmarshal([]byte(l), &j); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		recs = append(recs, j)
	}
	return recs
}

// content is a record without where it was (what produce writes).
func content(j jsonRecord) jsonRecord {
	j.Topic, j.Partition, j.Offset = "", 0, 0
	return j
}

func strp(s string) *string { return &s }

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	return clitest.WriteFile(t, dir, name, content)
}

// testClient returns a franz-go client to the cluster at addr that writes
// records to the partition they name; the caller closes it.
func testClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return clitest.Client(t, addr, opts...)
}

// waitUntil polls cond until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	clitest.WaitUntil(t, timeout, what, cond)
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

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	return clitest.FreeAddr(t)
}
