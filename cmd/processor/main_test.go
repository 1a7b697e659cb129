package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/cmd/processor/app"
	"github.com/fencepost-dev/fencepost/internal/config"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// These tests use the stages compiled into this binary (stages.Default):
// they pass once the built-in stages are imported by main.go.

// TestConfigsLint: every example in configs/ passes lint with the
// binary's stages, expressions compiled.
func TestConfigsLint(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no configurations found: %v", err)
	}
	t.Setenv("KAFKA_PASSWORD", "lint-only")
	for _, f := range files {
		if code := app.Main([]string{"lint", "-c", f}); code != app.ExitOK {
			t.Errorf("processor lint -c %s: exit %d (problems above)", f, code)
		}
	}
}

// TestExactlyOnceExample: configs/exactly-once.yaml passes lint (as
// TestConfigsLint checks), asks for exactly_once, and uses only stages
// that take part in it, so lint prints no warning for it.
func TestExactlyOnceExample(t *testing.T) {
	const file = "../../configs/exactly-once.yaml"
	if code := app.Main([]string{"lint", "-c", file}); code != app.ExitOK {
		t.Fatalf("processor lint -c %s: exit %d (problems above)", file, code)
	}
	cfg, err := config.Load(file, stages.Default)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pipeline.Guarantee != pipeline.ExactlyOnce {
		t.Errorf("guarantee %q, want %q", cfg.Pipeline.Guarantee, pipeline.ExactlyOnce)
	}
	if ws := cfg.Warnings(); len(ws) > 0 {
		t.Errorf("lint warns about the example: %v", ws)
	}
}

// TestQuickstartRuns: "processor run --for 3s" of the quickstart, built
// as users build it, exits 0 having processed records.
func TestQuickstartRuns(t *testing.T) {
	runExample(t, "configs/quickstart.yaml")
}

// TestExactlyOnceExampleRuns: the same for configs/exactly-once.yaml: its
// transactions commit (records processed and written, exit 0).
func TestExactlyOnceExampleRuns(t *testing.T) {
	stderr := runExample(t, "configs/exactly-once.yaml")
	if !strings.Contains(stderr, "transactional producer ready") {
		t.Errorf("no transactional producer started:\n%s", stderr)
	}
}

// TestRevenuePerMinuteExampleRuns: configs/revenue-per-minute.yaml, a
// stateful pipeline with a repartition, logs its topology, starts its
// stores and processes records.
func TestRevenuePerMinuteExampleRuns(t *testing.T) {
	stderr := runExample(t, "configs/revenue-per-minute.yaml")
	for _, want := range []string{"created repartition topic", "revenue-by-revenue-repartition", "state: stores ready", "revenue-revenue-changelog",
		`topology	{"segment": 2, "segments": 2, "sources": ["revenue-by-revenue-repartition"], "stages": ["aggregate", "produce"], ` +
			`"stores": ["revenue"], "changelogs": ["revenue-revenue-changelog"]}`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the run's log does not say %q:\n%s", want, stderr)
		}
	}
}

// runExample runs "processor run --for 3s" of file, built as users build
// it, checks it exits 0 having processed records, and returns its stderr.
func runExample(t *testing.T, file string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "processor")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	run := exec.Command(bin, "run", "-c", file, "--for", "3s", "--http", "127.0.0.1:0", "--progress", "1s")
	run.Dir = "../.."
	run.Stdout, run.Stderr = &stdout, &stderr
	start := time.Now()
	if err := run.Run(); err != nil {
		t.Fatalf("%s: %v after %v\nstdout:\n%s\nstderr:\n%s", file, err, time.Since(start), stdout.String(), stderr.String())
	}
	m := regexp.MustCompile(`summary: processed (\d+) records`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no summary:\n%s", stderr.String())
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Errorf("%s processed no records:\n%s", file, stderr.String())
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("--for 3s took %v", d)
	}
	return stderr.String()
}
