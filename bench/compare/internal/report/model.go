// Package report turns the suite's measurements into the Markdown
// report and its PNG charts.
package report

import (
	"time"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/events"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/latency"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/scale"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/stats"
)

// Report is everything one run of the suite measured. Sections that were
// not run are nil.
type Report struct {
	Date    time.Time
	Command string        // how to run the same suite again
	Runs    int           // repetitions of each measurement
	Took    time.Duration // the whole suite
	Machine Machine
	// Broker is what the pipeline, latency and search phases ran on.
	Broker string

	Pipeline   *Pipeline
	Latency    []*Latency // one per input rate
	Raw        *Consume   // 4 partitions, one broker, every client
	Partitions *Consume   // 4, 64 and 512 partitions, fencepost and kgo
	Brokers3   []*Consume // 64 partitions over three brokers, per record size
	Search     []*Search  // the tuning searches, one per engine (and guarantee)
}

// Search is one engine's tuning search: every trial's runs on the
// pipeline benchmark's input.
type Search struct {
	Engine      string // "Benthos", "Kafka Streams, exactly_once_v2"
	Config      string // the search configuration's file name
	Records     int64
	Warmup      int64 // records before the steady window (0: the whole run counts)
	ExactlyOnce bool
	Trials      []*SearchTrial // in the order run: the base, the sweep, the combination
}

// SearchTrial is one point of a search.
type SearchTrial struct {
	Name     string
	Settings string // what it sets, for the table
	Notes    string
	Base     bool // the search's starting point
	Variant  PipelineVariant
}

// Machine is where the suite ran.
type Machine struct {
	CPUs       int
	Model      string
	GoVersion  string
	Commit     string
	LoadBefore string // /proc/loadavg's first three fields when the suite started
	LoadAfter  string // ... when it ended
}

// Pipeline is the real-pipeline benchmark.
type Pipeline struct {
	Records    int64
	Partitions int
	ValueBytes [2]int // smallest and largest event value
	Warmup     int64  // records before each run's steady window (0: none)
	Variants   []PipelineVariant
}

// PipelineVariant is one variant's runs.
type PipelineVariant struct {
	pipebench.Variant
	Runs []pipebench.Result
}

// Medians are the medians of a variant's runs, each figure on its own.
type Medians struct {
	RecordsPerSec    float64
	RecordsPerCPUSec float64
	MaxRSS           float64 // bytes
	FirstOutput      time.Duration
	Elapsed          time.Duration
	// SteadyRecordsPerSec and SteadyRecordsPerCPUSec are over each run's
	// steady window (pipebench.Result.Steady), or the whole run's
	// figures without one.
	SteadyRecordsPerSec    float64
	SteadyRecordsPerCPUSec float64
}

// Medians of the variant's runs.
func (v PipelineVariant) Medians() Medians {
	var rate, perCPU, rss, first, elapsed, sRate, sCPU []float64
	for _, r := range v.Runs {
		sRate = append(sRate, r.SteadyRecordsPerSec())
		sCPU = append(sCPU, r.SteadyRecordsPerCPUSec())
		rate = append(rate, r.RecordsPerSec())
		perCPU = append(perCPU, r.RecordsPerCPUSec())
		rss = append(rss, float64(r.MaxRSS))
		first = append(first, float64(r.FirstOutput))
		elapsed = append(elapsed, float64(r.Elapsed))
	}
	return Medians{RecordsPerSec: stats.Median(rate), RecordsPerCPUSec: stats.Median(perCPU), MaxRSS: stats.Median(rss),
		FirstOutput: time.Duration(stats.Median(first)), Elapsed: time.Duration(stats.Median(elapsed)),
		SteadyRecordsPerSec: stats.Median(sRate), SteadyRecordsPerCPUSec: stats.Median(sCPU)}
}

// Worst is the run whose output was furthest from exact (most missing,
// then most duplicates, then most wrong), and how many runs were exact.
func (v PipelineVariant) Worst() (worst events.Correctness, exact int) {
	for i, r := range v.Runs {
		c := r.Correct
		if c.Exact() {
			exact++
		}
		if i == 0 || c.Missing > worst.Missing ||
			(c.Missing == worst.Missing && (c.Duplicates > worst.Duplicates || (c.Duplicates == worst.Duplicates && c.Wrong > worst.Wrong))) {
			worst = c
		}
	}
	return worst, exact
}

// Latency is the latency benchmark at one fixed input rate.
type Latency struct {
	Rate     int    // events/s produced
	RateFrom string // how the rate was chosen
	For      time.Duration
	Warmup   time.Duration
	Floor    []latency.Result // producer straight to the consumer, no pipeline
	Variants []LatencyVariant
}

// LatencyVariant is one variant's latency runs.
type LatencyVariant struct {
	pipebench.Variant
	Settings string // what the configuration sets, for the table
	Runs     []LatencyRun
}

// LatencyRun is one latency measurement and what the pipeline spent on it.
type LatencyRun struct {
	latency.Result
	CPU time.Duration // the pipeline's CPU time while events were produced
}

// LatencyMedians are the medians of latency runs, each figure on its own.
type LatencyMedians struct {
	P50, P99, Max time.Duration
	Rate          float64 // events/s achieved
	Cores         float64 // the pipeline's CPU seconds per second of the measurement
	Received      int     // timed records received (of the worst run)
	Expected      int     // ... and expected
}

// latencyMedians summarises runs; cpu[i], if given, is the pipeline's
// CPU time over runs[i].Took.
func latencyMedians(runs []latency.Result, cpu []time.Duration) LatencyMedians {
	var p50, p99, mx, rate, cores []float64
	m := LatencyMedians{}
	for i, r := range runs {
		p50 = append(p50, float64(r.P50))
		p99 = append(p99, float64(r.P99))
		mx = append(mx, float64(r.Max))
		rate = append(rate, r.Rate)
		if i < len(cpu) && r.Took > 0 {
			cores = append(cores, cpu[i].Seconds()/r.Took.Seconds())
		}
		if i == 0 || r.Expected-r.Samples > m.Expected-m.Received {
			m.Received, m.Expected = r.Samples, r.Expected
		}
	}
	m.P50, m.P99, m.Max = time.Duration(stats.Median(p50)), time.Duration(stats.Median(p99)), time.Duration(stats.Median(mx))
	m.Rate = stats.Median(rate)
	if len(cores) > 0 {
		m.Cores = stats.Median(cores)
	}
	return m
}

// Medians of the variant's runs.
func (v LatencyVariant) Medians() LatencyMedians {
	var rs []latency.Result
	var cpu []time.Duration
	for _, r := range v.Runs {
		rs = append(rs, r.Result)
		cpu = append(cpu, r.CPU)
	}
	return latencyMedians(rs, cpu)
}

// FloorMedians are the medians of the floor runs.
func (l *Latency) FloorMedians() LatencyMedians { return latencyMedians(l.Floor, nil) }

// Consume is one run of the main module's consumption benchmarks.
type Consume struct {
	Title      string
	Command    string // the go test command that reproduces it
	Brokers    int
	Partitions []int
	ValueSize  int
	Records    int
	Results    *scale.Results
	Output     string // the raw benchmark output
}
