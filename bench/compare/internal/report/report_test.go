package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/events"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/latency"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/scale"
)

func run(elapsed, cpu time.Duration, rss int64, c events.Correctness) pipebench.Result {
	return pipebench.Result{Records: 1000, Elapsed: elapsed, CPU: cpu, MaxRSS: rss, Correct: c}
}

func TestPipelineVariantMediansAndWorst(t *testing.T) {
	exact := events.Correctness{Expected: 250, Records: 250, Unique: 250}
	dup := events.Correctness{Expected: 250, Records: 260, Unique: 250, Duplicates: 10}
	miss := events.Correctness{Expected: 250, Records: 249, Unique: 249, Missing: 1}
	tests := []struct {
		name      string
		runs      []pipebench.Result
		rate, cpu float64
		rss       float64
		worst     events.Correctness
		exact     int
	}{
		{"three exact runs", []pipebench.Result{
			run(time.Second, 2*time.Second, 100, exact), run(2*time.Second, time.Second, 300, exact), run(4*time.Second, 4*time.Second, 200, exact),
		}, 500, 500, 200, exact, 3},
		{"missing outweighs duplicates", []pipebench.Result{
			run(time.Second, time.Second, 1, dup), run(time.Second, time.Second, 1, miss), run(time.Second, time.Second, 1, exact),
		}, 1000, 1000, 1, miss, 1},
		{"duplicates outweigh exact", []pipebench.Result{
			run(time.Second, time.Second, 1, exact), run(time.Second, time.Second, 1, dup),
		}, 1000, 1000, 1, dup, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := PipelineVariant{Runs: tc.runs}
			m := v.Medians()
			if m.RecordsPerSec != tc.rate || m.RecordsPerCPUSec != tc.cpu || m.MaxRSS != tc.rss {
				t.Errorf("medians %+v, want rate %v cpu %v rss %v", m, tc.rate, tc.cpu, tc.rss)
			}
			worst, n := v.Worst()
			if worst != tc.worst || n != tc.exact {
				t.Errorf("worst %+v (%d exact), want %+v (%d)", worst, n, tc.worst, tc.exact)
			}
		})
	}
}

// Write produces the Markdown file, a chart for each section and the raw
// benchmark output, and the text references each chart.
func TestWrite(t *testing.T) {
	rs, err := scale.Parse(strings.NewReader(benchOutput))
	if err != nil {
		t.Fatal(err)
	}
	exact := events.Correctness{Expected: 250, Records: 250, Unique: 250}
	ms := time.Millisecond
	lat := func(p50, p99, mx time.Duration) LatencyRun {
		return LatencyRun{Result: latency.Result{Expected: 10, Samples: 10, P50: p50, P99: p99, Max: mx, Rate: 1000, Took: time.Second}, CPU: 300 * ms}
	}
	r := &Report{
		Date: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Command: "go run -C bench/compare ./cmd/report", Runs: 1,
		Pipeline: &Pipeline{Records: 1000, Partitions: 4, Variants: []PipelineVariant{
			{Variant: pipebench.Variant{Name: "fencepost, defaults", Config: "configs/fencepost-defaults.yaml"}, Runs: []pipebench.Result{run(time.Second, time.Second, 1<<20, exact)}},
			{Variant: pipebench.Variant{Name: "Benthos, tuned", Config: "configs/benthos-tuned.yaml"}, Runs: []pipebench.Result{run(2*time.Second, 4*time.Second, 1<<20, exact)}},
		}},
		Latency: []*Latency{{Rate: 1000, RateFrom: "set", For: 10 * time.Second, Warmup: time.Second,
			Floor: []latency.Result{{Expected: 10, Samples: 10, P50: ms / 2, P99: ms, Max: 2 * ms}},
			Variants: []LatencyVariant{{Variant: pipebench.Variant{Name: "fencepost, defaults"}, Settings: "none",
				Runs: []LatencyRun{lat(3*ms, 9*ms, 20*ms)}},
				{Variant: pipebench.Variant{Name: "Benthos, defaults"}, Settings: "none",
					Runs: []LatencyRun{{Result: latency.Result{Expected: 10, Samples: 4, P50: 900 * ms, P99: 1200 * ms, Max: 1300 * ms, Rate: 1000, Took: time.Second}}}},
				{Variant: pipebench.Variant{Name: "Benthos, low latency"}, Settings: "max_in_flight",
					Runs: []LatencyRun{{Result: latency.Result{Expected: 10, Samples: 0, Rate: 1000, Took: time.Second}}}}}}},
		Raw:        &Consume{Title: "4 partitions", Command: "go test ./bench", Partitions: []int{4}, Results: rs, Output: benchOutput},
		Partitions: &Consume{Title: "partitions", Command: "go test ./bench", Partitions: []int{64, 512}, Results: rs, Output: benchOutput},
	}
	dir := t.TempDir()
	path, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| fencepost, defaults | 1 k | 1 k | 1 MiB |", // records/s, records/CPU-s, RSS
		"| 2.00× | 4.00× |",                           // against Benthos tuned
		"| floor (no pipeline) | – | 0.50 ms | 1.00 ms | 2.00 ms |",
		"| fencepost, defaults | none | 3.00 ms | 9.00 ms | 20.0 ms | 10 of 10 | 1 k | 0.30 |",
		"| franz-go kgo | 4 | 5.50 M |",
		"(2026-12-01-bench.txt)",
		"| Benthos, defaults | none | ≥ 900 ms | ≥ 1200 ms | ≥ 1300 ms | 4 of 10 |",                       // fell behind
		"| Benthos, low latency | max_in_flight | none arrived | none arrived | none arrived | 0 of 10 |", // fell behind, far
		"- Real pipeline, fencepost, tuned against Benthos, tuned:",                                       // absent: no such variant
		"- p99 end-to-end latency at 1000 events/s: fencepost, defaults 9.00 ms; Benthos, defaults fell behind; Benthos, low latency fell behind.",
		"- Raw consumption, 4 partitions, fencepost (default fetch_concurrency) against kgo: 0.73× records/s",
	} {
		if strings.HasPrefix(want, "- Real pipeline, fencepost, tuned") {
			if strings.Contains(string(text), want) {
				t.Errorf("the summary compares a variant that did not run: %q", want)
			}
			continue
		}
		if !strings.Contains(string(text), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, chart := range []string{"pipeline", "latency", "raw", "scaling"} {
		name := "2026-12-01-" + chart + ".png"
		if !strings.Contains(string(text), "("+name+")") {
			t.Errorf("the report does not reference %s", name)
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(data) < 8 || string(data[1:4]) != "PNG" {
			t.Errorf("%s is not a PNG file (%v)", name, err)
		}
	}
}

func TestWriteExactlyOnceCost(t *testing.T) {
	exact := events.Correctness{Expected: 250, Records: 250, Unique: 250}
	ms := time.Millisecond
	lat := func(p50, p99, mx time.Duration, samples int) LatencyRun {
		return LatencyRun{Result: latency.Result{Expected: 10, Samples: samples, P50: p50, P99: p99, Max: mx, Rate: 5000, Took: time.Second}, CPU: 200 * ms}
	}
	defaults := pipebench.Variant{Name: "fencepost, defaults", Config: "configs/fencepost-defaults.yaml"}
	eos := pipebench.Variant{Name: "fencepost, exactly-once", Config: "configs/fencepost-exactly-once.yaml", ExactlyOnce: true, Baseline: "fencepost, defaults"}
	tests := []struct {
		name    string
		r       *Report
		want    []string
		wantNot []string
	}{
		{
			name: "both guarantees ran",
			r: &Report{Runs: 1,
				Pipeline: &Pipeline{Records: 1000, Partitions: 4, Variants: []PipelineVariant{
					{Variant: defaults, Runs: []pipebench.Result{run(time.Second, 2*time.Second, 1<<20, exact)}},
					{Variant: eos, Runs: []pipebench.Result{run(2*time.Second, 4*time.Second, 2<<20, exact)}},
				}},
				Latency: []*Latency{{Rate: 5000, RateFrom: "set", For: 10 * time.Second, Warmup: time.Second, Variants: []LatencyVariant{
					{Variant: defaults, Settings: "none", Runs: []LatencyRun{lat(2*ms, 6*ms, 9*ms, 10)}},
					{Variant: eos, Settings: "exactly_once", Runs: []LatencyRun{lat(60*ms, 110*ms, 130*ms, 10)}},
				}}},
			},
			want: []string{
				"## Exactly-once cost",
				"| fencepost, defaults | 1 k | 500 | 1 MiB | 1 | 1 |",
				"| fencepost, exactly-once | 500 | 250 | 2 MiB | 0.50× | 0.50× |",
				"End-to-end latency at 5000 events/s:",
				"| fencepost, exactly-once | 60.0 ms | 110 ms | 130 ms | 0.20 |",
				"- Exactly-once cost, real pipeline, fencepost, exactly-once against fencepost, defaults: 0.50× records/s, 0.50× records per CPU-second.",
				"- Exactly-once cost, end-to-end latency at 5000 events/s (read_committed): fencepost, exactly-once p50 60.0 ms, p99 110 ms; fencepost, defaults p50 2.00 ms, p99 6.00 ms.",
				"no output partition has an open transaction",
				"For fencepost, exactly-once the consumer is `read_committed`",
			},
		},
		{
			name: "fell behind: marked, not compared as if exact",
			r: &Report{Runs: 1,
				Latency: []*Latency{{Rate: 5000, RateFrom: "set", For: 10 * time.Second, Warmup: time.Second, Variants: []LatencyVariant{
					{Variant: defaults, Settings: "none", Runs: []LatencyRun{lat(2*ms, 6*ms, 9*ms, 10)}},
					{Variant: eos, Settings: "exactly_once", Runs: []LatencyRun{lat(900*ms, 1500*ms, 1600*ms, 4)}},
				}}},
			},
			want: []string{
				"| fencepost, exactly-once | ≥ 900 ms | ≥ 1500 ms | ≥ 1600 ms | 0.20 |",
				"fencepost, exactly-once p50 ≥ 900 ms, p99 ≥ 1500 ms;",
			},
			wantNot: []string{"records/s vs at-least-once", "Exactly-once cost, real pipeline"},
		},
		{
			name: "no baseline: no section",
			r: &Report{Runs: 1,
				Pipeline: &Pipeline{Records: 1000, Partitions: 4, Variants: []PipelineVariant{
					{Variant: eos, Runs: []pipebench.Result{run(2*time.Second, 4*time.Second, 2<<20, exact)}},
				}},
			},
			want:    []string{"no output partition has an open transaction"},
			wantNot: []string{"## Exactly-once cost", "Exactly-once cost,"},
		},
		{
			name: "at-least-once only: nothing about transactions",
			r: &Report{Runs: 1,
				Pipeline: &Pipeline{Records: 1000, Partitions: 4, Variants: []PipelineVariant{
					{Variant: defaults, Runs: []pipebench.Result{run(time.Second, 2*time.Second, 1<<20, exact)}},
				}},
			},
			wantNot: []string{"## Exactly-once cost", "open transaction", "read_committed"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.Date = time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
			path, err := Write(t.TempDir(), tc.r)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			text := string(data)
			for _, want := range tc.want {
				if !strings.Contains(text, want) {
					t.Errorf("the report lacks %q", want)
				}
			}
			for _, not := range tc.wantNot {
				if strings.Contains(text, not) {
					t.Errorf("the report has %q", not)
				}
			}
			if t.Failed() {
				t.Logf("report:\n%s", text)
			}
		})
	}
}
