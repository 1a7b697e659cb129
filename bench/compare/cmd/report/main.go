// Command report runs the comparison benchmarks and writes
// bench/results/<date>.md with their tables and PNG charts. From the
// repository root:
//
//	go run -C bench/compare ./cmd/report           # the full suite
//	go run -C bench/compare ./cmd/report -quick    # a smoke run: few records, one repetition
//	go run -C bench/compare ./cmd/report -only pipeline,latency -variants fencepost-defaults,fencepost-exactly-once
//
// It builds the processor (cmd/processor), the Benthos binary
// (bench/compare/cmd/benthos) and the consumption benchmarks (go test -c
// ./bench), starts the brokers it needs as separate processes
// (`processor broker`), and stops every process it started when it ends,
// fails or is interrupted (Ctrl-C). Each figure is the median of -runs
// repetitions. Logs of every child process go to a temporary directory,
// which is kept (and named) when something fails or with -keep.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/proc"
)

// options are the command's flags.
type options struct {
	quick         bool
	runs          int
	records       int64
	scaleRecords  int
	partitions    int
	latencyFor    time.Duration
	latencyWarmup time.Duration
	latencyRate   int
	latencyLow    int
	only          string
	variants      string
	search        string
	warmup        int64
	kafka         string
	out           string
	keep          bool
	timeout       time.Duration
}

// phases the suite can run, in order; -only picks some.
var allPhases = []string{"pipeline", "latency", "raw", "partitions", "brokers3"}

// optPhases are phases -only knows that are not in its default, so run
// only when named: "streams" adds the Kafka Streams variants (streams.go)
// to the pipeline and latency phases; "search" runs the tuning search
// of the engines -search names (search.go).
var optPhases = []string{"streams", "search"}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var o options
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.BoolVar(&o.quick, "quick", false, "a smoke run: 50,000 pipeline events, 200,000 records per consumption benchmark, 4 s latency runs, one repetition (flags given explicitly win)")
	fs.IntVar(&o.runs, "runs", 3, "repetitions of every measurement; tables show medians")
	fs.Int64Var(&o.records, "records", 1_000_000, "shop events in the pipeline benchmark's input topic")
	fs.IntVar(&o.scaleRecords, "scale-records", 1_000_000, "records per topic in the consumption benchmarks")
	fs.IntVar(&o.partitions, "partitions", 4, "partitions of the pipeline benchmark's topics")
	fs.DurationVar(&o.latencyFor, "latency-for", 10*time.Second, "how long each latency run produces")
	fs.DurationVar(&o.latencyWarmup, "latency-warmup", 2*time.Second, "the first part of a latency run that is not timed")
	fs.IntVar(&o.latencyRate, "latency-rate", 0, "events/s of the main latency runs; 0: half the best median throughput of the pipeline phase")
	fs.IntVar(&o.latencyLow, "latency-low-rate", 5000, "events/s of a second set of latency runs, at a moderate rate; 0: none")
	fs.StringVar(&o.only, "only", strings.Join(allPhases, ","), "comma-separated phases to run: "+strings.Join(allPhases, ", ")+
		"; and, only when named, streams: the pipeline benchmark of the Kafka Streams variants (with pipeline: in the same table; with latency: its variants there too; needs Java 17+ and Maven); search: the tuning search of -search")
	fs.StringVar(&o.variants, "variants", "", "comma-separated variants of the pipeline and latency phases to run, each a variant's name in lower case with dashes (fencepost-exactly-once) or its first words (fencepost: every fencepost variant); empty: all")
	fs.StringVar(&o.search, "search", "", "with -only search: the engines whose knobs to search, comma-separated: "+strings.Join(searchEngineNames, ", ")+
		" (streams: both guarantees; streams-alos, streams-eos: one); every trial runs -runs times on the pipeline benchmark's input")
	fs.Int64Var(&o.warmup, "warmup", 0, "input records of every pipeline and search run before its steady-state window opens (records/s and records per CPU-second after the warm-up: start-up, group join and the JVM's JIT compilation fall before it); 0: none")
	fs.StringVar(&o.kafka, "kafka", "embedded", "the broker of the pipeline, latency, streams and search phases: embedded (processor broker, kfake in its own process) or apache (Apache Kafka, 1 node, started with the repository's internal/realkafka launcher; needs Java 17+ and Maven)")
	fs.StringVar(&o.out, "out", "", "directory for the report and charts (default: bench/results of the repository)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (binaries, configs, every process's log)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "longest one pipeline run may take")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quick := map[string]func(){
			"runs":           func() { o.runs = 1 },
			"records":        func() { o.records = 50_000 },
			"scale-records":  func() { o.scaleRecords = 200_000 },
			"latency-for":    func() { o.latencyFor = 4 * time.Second },
			"latency-warmup": func() { o.latencyWarmup = time.Second },
		}
		for name, apply := range quick {
			if !set[name] {
				apply()
			}
		}
	}
	phases, err := parsePhases(o.only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		return 2
	}
	pick, err := parseVariants(o.variants)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		return 2
	}
	if o.kafka != "embedded" && o.kafka != "apache" {
		fmt.Fprintf(os.Stderr, "report: -kafka %q: want embedded or apache\n", o.kafka)
		return 2
	}
	if o.warmup < 0 || o.warmup >= o.records {
		fmt.Fprintf(os.Stderr, "report: -warmup %d must be at least 0 and below -records (%d)\n", o.warmup, o.records)
		return 2
	}
	if o.runs < 1 || o.records < 4 || o.scaleRecords < 1 || o.partitions < 1 || o.latencyFor <= o.latencyWarmup {
		fmt.Fprintln(os.Stderr, "report: -runs, -records, -scale-records and -partitions must be positive, and -latency-for longer than -latency-warmup")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	work, err := os.MkdirTemp("", "fencepost-report-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		return 1
	}
	procs := proc.NewGroup(work)
	s := &suite{opts: o, phases: phases, pick: pick, work: work, procs: procs, args: args}
	err = s.run(ctx)
	procs.StopAll(10 * time.Second) // whatever happened, nothing stays behind
	switch {
	case err == nil && !o.keep:
		_ = os.RemoveAll(work)
	default:
		fmt.Fprintf(os.Stderr, "report: binaries, configurations and logs are in %s\n", work)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "report: interrupted; every process it started is stopped")
			return 130
		}
		fmt.Fprintln(os.Stderr, "report:", err)
		return 1
	}
	return 0
}

// variantFilter picks variants by name; the zero value picks all.
type variantFilter []string

// parseVariants parses -variants: a comma-separated list of slugs.
func parseVariants(list string) (variantFilter, error) {
	var f variantFilter
	for _, v := range strings.Split(list, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if slug(v) != v {
			return nil, fmt.Errorf("-variants: %q is not a name in lower case with dashes (like %q)", v, slug(v))
		}
		f = append(f, v)
	}
	return f, nil
}

// picks reports whether the variant called name runs: every one with no
// filter, else one whose slug is an item of f or begins with one and a
// dash ("fencepost" picks "fencepost, defaults" and "fencepost, tuned").
func (f variantFilter) picks(name string) bool {
	if len(f) == 0 {
		return true
	}
	s := slug(name)
	for _, v := range f {
		if s == v || strings.HasPrefix(s, v+"-") {
			return true
		}
	}
	return false
}

// unmatched returns the items of f that pick none of names.
func (f variantFilter) unmatched(names []string) []string {
	var out []string
	for _, v := range f {
		found := false
		for _, n := range names {
			found = found || variantFilter{v}.picks(n)
		}
		if !found {
			out = append(out, v)
		}
	}
	return out
}

func parsePhases(list string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		known := false
		for _, a := range append(allPhases[:len(allPhases):len(allPhases)], optPhases...) {
			known = known || a == p
		}
		if !known {
			return nil, fmt.Errorf("-only: unknown phase %q (phases: %s)", p, strings.Join(append(allPhases[:len(allPhases):len(allPhases)], optPhases...), ", "))
		}
		out[p] = true
	}
	if len(out) == 0 {
		return nil, errors.New("-only: no phase named")
	}
	return out, nil
}
