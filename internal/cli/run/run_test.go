package run

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/cli/clitest"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// countRegistry has a stage "count" that counts the records it sees.
func countRegistry(n *atomic.Int64) *stages.Registry {
	reg := &stages.Registry{}
	if err := reg.Register(stages.Spec{
		Name: "count", Summary: "Count records.",
		New: func(stages.Options, stages.Env) (stages.Stage, error) {
			return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
				n.Add(int64(len(in)))
				return in, nil
			}), nil
		},
	}); err != nil {
		panic(err)
	}
	return reg
}

const embeddedConfig = `kafka:
  embedded:
    partitions: 3
    demo_producer: {topic: events, rate: RATE}
consumer:
  group: inproc
  topics: [events]
  commit_interval: 200ms
pipeline:
  - stage: count
shutdown_timeout: 10s
`

var summaryRE = regexp.MustCompile(`summary: processed (\d+) records .* commits (\d+) .* stopped by ([^\n]+)`)

// summary returns the processed count, commits and stop reason of a
// run's summary line.
func summary(t *testing.T, stderr string) (processed, commits int, reason string) {
	t.Helper()
	m := summaryRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no summary in stderr:\n%s", stderr)
	}
	processed, _ = strconv.Atoi(m[1])
	commits, _ = strconv.Atoi(m[2])
	return processed, commits, m[3]
}

// TestRunEmbeddedMaxRecords: with the embedded broker and demo producer,
// --max-records stops the run gracefully once the limit is reached, and
// the summary says so, and that it is a lower bound; every goroutine has ended when it returns
// (TestMain checks).
func TestRunEmbeddedMaxRecords(t *testing.T) {
	var n atomic.Int64
	cfg := writeFile(t, t.TempDir(), "c.yaml", strings.Replace(embeddedConfig, "RATE", "400", 1))
	start := time.Now()
	code, _, errOut := runCLI(context.Background(), countRegistry(&n), "run", "-c", cfg, "--max-records", "200", "--http", "off", "--for", "60s")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	processed, commits, reason := summary(t, errOut)
	const why = "--max-records 200 (a graceful stop: the records in flight finished too, so at least 200 were processed)"
	if processed < 200 || int64(processed) != n.Load() || reason != why || commits == 0 {
		t.Errorf("processed %d (stage saw %d), commits %d, stopped by %q", processed, n.Load(), commits, reason)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v for 200 records at 400/s", d)
	}
}

// TestRunWarnsAboutStagesOutsideExactlyOnce: run logs what lint warns
// about, once at start: with guarantee: exactly_once, a stage that does
// not take part in it (count does not declare ExactlyOnce), at its line.
func TestRunWarnsAboutStagesOutsideExactlyOnce(t *testing.T) {
	var n atomic.Int64
	src := strings.Replace(embeddedConfig, "RATE", "400", 1) + "guarantee: exactly_once\n"
	cfg := writeFile(t, t.TempDir(), "c.yaml", src)
	code, _, errOut := runCLI(context.Background(), countRegistry(&n), "run", "-c", cfg, "--max-records", "50", "--http", "off", "--for", "60s")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	const want = "stage count does not take part in exactly-once: its effects outside the output records are at-least-once"
	if c := strings.Count(errOut, want); c != 1 {
		t.Errorf("the warning appears %d times, want once:\n%s", c, errOut)
	}
	if !strings.Contains(errOut, cfg+":10:5") {
		t.Errorf("the warning does not name the stage's position %s:10:5:\n%s", cfg, errOut)
	}
}

// TestRunServesMetricsAndHealth: while a run is on, /healthz answers 200
// and /metrics exports the pipeline's measurements, the lag of every
// assigned partition from the first scrape on; cancelling stops it
// gracefully with a summary and progress lines on the way.
func TestRunServesMetricsAndHealth(t *testing.T) {
	var n atomic.Int64
	cfg := writeFile(t, t.TempDir(), "c.yaml", strings.Replace(embeddedConfig, "RATE", "100", 1))
	// progress every 30s: the lag a scrape shows is not the monitor's
	base, errOut, done, cancel := startRun(t, cfg, "30s", countRegistry(&n))
	var code int
	var body string
	waitUntil(t, 20*time.Second, "the partitions assigned", func() bool {
		code, body = get(t, base+"/healthz")
		return strings.Contains(body, `"partitions":3`)
	})
	if code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("/healthz: %d %s", code, body)
	}
	// the first scrape once the partitions are assigned has their lag
	_, body = get(t, base+"/metrics")
	for _, name := range []string{"fencepost_consumer_lag_records{", "fencepost_consumer_committed_lag_records{"} {
		if n := strings.Count(body, name); n != 3 {
			t.Errorf("the first scrape after assignment has %d series %s...}, want 3\n%s", n, name, body)
		}
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusOK || !strings.Contains(body, `"status":"ready"`) {
		t.Errorf("/readyz: %d %s", code, body)
	}
	waitUntil(t, 20*time.Second, "commits", func() bool {
		_, body = get(t, base+"/metrics")
		return strings.Count(body, "fencepost_committed_offset{") == 3 && metricValue(body, `fencepost_record_commit_age_seconds_count{topic="events"}`) > 0
	})
	for _, want := range []string{"fencepost_processed_records_total ", "fencepost_commits_total ", "fencepost_assigned_partitions 3",
		"fencepost_dead_lettered_records_total 0", "fencepost_buffered_bytes ", `fencepost_consumer_lag_records{partition="0",topic="events"}`,
		`fencepost_stage_input_records_total{stage="count"}`, `fencepost_stage_duration_seconds_bucket{stage="count",le="0.001"}`,
		`fencepost_fetch_requests_total{broker="0"}`, "fencepost_commit_latency_seconds_bucket", "fencepost_rebalances_total 1",
		"fencepost_partitions_assigned_total 3", `fencepost_resets_total{reason="no_committed_offset"} 3`,
		`fencepost_build_info{go="go`, "go_goroutines "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Fatalf("exit %d\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop within 30s of cancellation")
	}
	processed, _, reason := summary(t, errOut.String())
	if processed == 0 || reason != "cancellation" {
		t.Errorf("processed %d, stopped by %q", processed, reason)
	}
}

// metricValue returns the value of the sample line starting with name
// (name includes its labels, if any), -1 if there is none.
func metricValue(body, name string) float64 {
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// startRun runs "run -c cfg" in the background with an HTTP server on a
// free port and progress every interval; it returns the server's base
// URL, the run's stderr, its exit code (when it ends) and what cancels it
// (also at the end of the test).
func startRun(t *testing.T, cfg, interval string, reg *stages.Registry) (string, *stagetest.Buffer, chan int, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var out stagetest.Buffer
	errOut := &stagetest.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, []string{"run", "-c", cfg, "--http", "127.0.0.1:0", "--progress", interval},
			&clibase.Env{Stdout: &out, Stderr: errOut, Registry: reg})
	}()
	urlRE := regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
	var base string
	waitUntil(t, 20*time.Second, "the metrics address in the log", func() bool { base = urlRE.FindString(errOut.String()); return base != "" })
	return base, errOut, done, cancel
}

// rejectRegistry has a stage "reject" that fails the record at offset 3
// of partition 0 of every topic, for good.
func rejectRegistry() *stages.Registry {
	reg := &stages.Registry{}
	if err := reg.Register(stages.Spec{
		Name: "reject", Summary: "Reject one record.",
		New: func(stages.Options, stages.Env) (stages.Stage, error) {
			return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
				for _, r := range in {
					if r.Partition == 0 && r.Offset == 3 {
						return nil, stages.Permanent(errors.New("record 3 is poison"))
					}
				}
				return in, nil
			}), nil
		},
	}); err != nil {
		panic(err)
	}
	return reg
}

// TestRunStoppedPartitionIsVisible: a partition stopped by the stop
// policy makes /readyz answer 503 with the reason (while /healthz stays
// 200), shows in the progress line and the summary, and the run exits 1.
func TestRunStoppedPartitionIsVisible(t *testing.T) {
	cfg := writeFile(t, t.TempDir(), "c.yaml", strings.NewReplacer("RATE", "200", "stage: count", "stage: reject").Replace(embeddedConfig))
	base, errOut, done, cancel := startRun(t, cfg, "200ms", rejectRegistry())
	var body string
	waitUntil(t, 20*time.Second, "/readyz to report the stopped partition", func() bool {
		var code int
		code, body = get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "events/0 stopped") && strings.Contains(body, "record 3 is poison")
	})
	if code, body := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with a stopped partition: %d %s, want 200 (liveness)", code, body)
	}
	waitUntil(t, 20*time.Second, "a progress line counting the stopped partition", func() bool {
		return strings.Contains(errOut.String(), "partitions 3 (stopped 1)")
	})
	_, body = get(t, base+"/metrics")
	for name, want := range map[string]float64{`fencepost_partition_stops_total{reason="record_failed"}`: 1,
		"fencepost_stopped_partitions": 1, `fencepost_stage_failed_records_total{stage="reject"}`: 1} {
		if got := metricValue(body, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitFailure {
			t.Fatalf("exit %d, want %d with a stopped partition\n%s", code, ExitFailure, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop within 30s of cancellation")
	}
	for _, want := range []string{"stopped partitions 1;", "stopped events/0: ", "record 3 is poison", "1 partition(s) ended stopped"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, errOut.String())
		}
	}
}

// TestRunRejectsBadConfig: run checks the file first and starts nothing
// when it has problems (no broker is needed to find out).
func TestRunRejectsBadConfig(t *testing.T) {
	bad := writeFile(t, t.TempDir(), "bad.yaml", clitest.BadConfig)
	code, _, errOut := runCLI(context.Background(), clitest.Registry(), "run", "-c", bad)
	if code != ExitFailure || !strings.Contains(errOut, bad+":2:1: consumer.group") || !strings.Contains(errOut, "nothing was started") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	if strings.Contains(errOut, "starting") {
		t.Errorf("run started despite problems:\n%s", errOut)
	}
	if code, _, errOut := runCLI(context.Background(), clitest.Registry(), "run"); code != ExitUsage || !strings.Contains(errOut, "-c FILE") {
		t.Errorf("run without -c: exit %d, stderr %s", code, errOut)
	}
}
