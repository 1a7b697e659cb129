package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/broker"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/events"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/kafkaio"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/proc"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/report"
)

// suite is one run of the command.
type suite struct {
	opts   options
	phases map[string]bool
	pick   variantFilter // -variants
	work   string
	procs  *proc.Group
	args   []string

	lay  layout
	bins struct {
		processor, benthos, benchTest string
		realkafka                     string         // with -kafka apache
		streams                       pipebench.Java // with -only streams
	}
	prog *progress
	rep  report.Report
}

func (s *suite) run(ctx context.Context) error {
	start := time.Now()
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	if s.lay, err = findLayout(wd); err != nil {
		return err
	}
	s.rep = report.Report{Date: start, Runs: s.opts.runs, Machine: s.machine(),
		Command: strings.TrimSpace("go run -C bench/compare ./cmd/report " + strings.Join(s.args, " "))}
	if err := s.checkVariants(); err != nil {
		return err
	}
	if err := s.checkSearch(); err != nil {
		return err
	}
	s.prog = newProgress(os.Stderr, s.estimate())
	s.prog.logf("report: load average %s; work directory %s", s.rep.Machine.LoadBefore, s.work)
	if err := s.build(ctx); err != nil {
		return err
	}
	if s.pipelineBroker() {
		if err := s.pipelinePhases(ctx); err != nil {
			return err
		}
	}
	if err := s.consumePhases(ctx); err != nil {
		return err
	}
	s.rep.Took = time.Since(start)
	s.rep.Machine.LoadAfter = loadAverage()
	out := s.opts.out
	if out == "" {
		out = filepath.Join(s.lay.root, "bench", "results")
	}
	end := s.prog.step("writing the report and charts", 5)
	path, err := report.Write(out, &s.rep)
	end()
	s.prog.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "report: wrote %s in %v (load average now %s)\n", path, s.rep.Took.Round(time.Second), s.rep.Machine.LoadAfter)
	return nil
}

// estimate is the suite's expected duration in seconds, the progress
// bar's scale.
func (s *suite) estimate() int {
	o := s.opts
	n := 60 // builds, mostly cached
	if s.pipelineBroker() {
		n += 5 + int(o.records/50_000)
		if o.kafka == "apache" {
			n += 20 + int(o.records/50_000) // the JVM's start, a slower load
		}
	}
	if s.phases["search"] {
		for _, sp := range s.searchSpaces() {
			n += o.runs * s.pipelineWeight(sp.Engine) * (len(sp.Trials) + 2)
		}
	}
	if s.phases["pipeline"] {
		for _, v := range s.pipelineVariants() {
			n += o.runs * s.pipelineWeight(v.Engine)
		}
	}
	if s.phases["streams"] {
		n += 20 // the Maven build
		n += o.runs * s.pipelineWeight(pipebench.KafkaStreams) * len(s.streamsVariants())
	}
	if s.phases["latency"] {
		rates := 1
		if o.latencyLow > 0 {
			rates++
		}
		n += rates * (1 + len(s.latencyVariants())*o.runs) * s.latencyWeight()
	}
	for _, p := range []string{"raw", "partitions", "brokers3"} {
		if s.phases[p] {
			n += s.consumeWeight(p)
		}
	}
	return n
}

func (s *suite) pipelineWeight(e pipebench.Engine) int {
	switch e {
	case pipebench.Benthos:
		return 3 + int(s.opts.records/40_000)
	case pipebench.KafkaStreams:
		return 6 + int(s.opts.records/40_000) // JVM start-up; speed not yet measured
	}
	return 3 + int(s.opts.records/150_000)
}

func (s *suite) latencyWeight() int { return int(s.opts.latencyFor.Seconds()) + 4 }

func (s *suite) consumeWeight(phase string) int {
	perRead := 2 + s.opts.scaleRecords/1_000_000
	load := 1 + s.opts.scaleRecords/200_000
	switch phase {
	case "raw":
		return load + 4*s.opts.runs*perRead
	case "partitions":
		return 3*load + 6*s.opts.runs*perRead
	default: // brokers3: 100 B and 1 KB
		return 2 + 11*load + 4*s.opts.runs*perRead
	}
}

// build compiles the programs the phases to run need into the work
// directory: always the processor (it is the broker too); Benthos if a
// Benthos variant is picked, the consumption benchmarks for their
// phases.
func (s *suite) build(ctx context.Context) error {
	s.bins.processor = filepath.Join(s.work, "processor")
	s.bins.benthos = filepath.Join(s.work, "benthos")
	s.bins.benchTest = filepath.Join(s.work, "bench.test")
	type step struct {
		what, dir string
		args      []string
		weight    int
	}
	steps := []step{{"build the processor (cmd/processor)", s.lay.root, []string{"build", "-o", s.bins.processor, "./cmd/processor"}, 15}}
	if s.needsBenthos() {
		steps = append(steps, step{"build Benthos v4.27.0 (bench/compare/cmd/benthos)", s.lay.compare, []string{"build", "-o", s.bins.benthos, "./cmd/benthos"}, 30})
	}
	if s.phases["raw"] || s.phases["partitions"] || s.phases["brokers3"] {
		steps = append(steps, step{"build the consumption benchmarks (go test -c ./bench)", s.lay.root, []string{"test", "-c", "-o", s.bins.benchTest, "./bench"}, 15})
	}
	for _, st := range steps {
		end := s.prog.step(st.what, st.weight)
		err := goCmd(ctx, st.dir, st.args...)
		end()
		if err != nil {
			return err
		}
	}
	if s.opts.kafka == "apache" && s.pipelineBroker() {
		s.bins.realkafka = filepath.Join(s.work, "realkafka")
		end := s.prog.step("build the Apache Kafka launcher (internal/realkafka/cmd/realkafka)", 10)
		err := goCmd(ctx, s.lay.root, "build", "-o", s.bins.realkafka, "./internal/realkafka/cmd/realkafka")
		end()
		if err != nil {
			return err
		}
	}
	if s.phases["streams"] || s.searchNeeds(pipebench.KafkaStreams) {
		return s.buildStreams(ctx)
	}
	return nil
}

// pipelineBroker reports whether a phase to run needs the pipeline
// phases' broker and loaded input.
func (s *suite) pipelineBroker() bool {
	return s.phases["pipeline"] || s.phases["latency"] || s.phases["streams"] || s.phases["search"]
}

// needsBenthos reports whether a phase to run has a Benthos variant.
func (s *suite) needsBenthos() bool {
	var vs []pipebench.Variant
	if s.phases["pipeline"] {
		vs = append(vs, s.pipelineVariants()...)
	}
	if s.phases["latency"] {
		for _, v := range s.latencyVariants() {
			vs = append(vs, v.Variant)
		}
	}
	for _, v := range vs {
		if v.Engine == pipebench.Benthos {
			return true
		}
	}
	return s.searchNeeds(pipebench.Benthos)
}

// pipelinePhases loads the shop events into a broker of their own and
// runs the throughput and latency benchmarks on it.
func (s *suite) pipelinePhases(ctx context.Context) error {
	o := s.opts
	end := s.prog.step(fmt.Sprintf("pipeline: start a broker (%s), load %d events", o.kafka, o.records), 5+int(o.records/50_000))
	var cl *broker.Cluster
	var err error
	if o.kafka == "apache" {
		cl, err = broker.StartApache(ctx, s.procs, s.bins.realkafka, "broker-pipeline-apache")
	} else {
		cl, err = broker.Start(ctx, s.procs, s.bins.processor, "broker-pipeline", 1, o.partitions)
	}
	if err != nil {
		end()
		return err
	}
	s.rep.Broker = cl.What
	defer func() { _ = cl.Stop() }()
	adm, err := kafkaio.NewAdmin(cl.Addrs)
	if err != nil {
		end()
		return err
	}
	defer adm.Close()
	in := pipebench.Input{Topic: "events", Partitions: o.partitions, Records: o.records, Warmup: o.warmup}
	err = adm.CreateTopic(ctx, in.Topic, in.Partitions)
	if err == nil {
		err = kafkaio.Load(ctx, cl.Addrs, in.Topic, in.Records, nil)
	}
	if err == nil {
		in.End, err = adm.EndOffsets(ctx, in.Topic)
	}
	end()
	if err != nil {
		return err
	}
	if got := in.End.Sum(); got != in.Records {
		return fmt.Errorf("the input topic holds %d records, want %d", got, in.Records)
	}
	env := pipebench.Env{Procs: s.procs, Processor: s.bins.processor, Benthos: s.bins.benthos, Streams: s.bins.streams,
		Brokers: cl.Addrs, Timeout: o.timeout}
	if s.phases["pipeline"] || s.phases["streams"] {
		if err := s.throughput(ctx, env, in); err != nil {
			return err
		}
	}
	if s.phases["search"] {
		if err := s.search(ctx, env, in); err != nil {
			return err
		}
	}
	if s.phases["latency"] {
		if err := s.latency(ctx, env, adm); err != nil {
			return err
		}
	}
	return nil
}

// configPath is a configuration file of bench/compare/configs.
func (s *suite) configPath(name string) string { return filepath.Join(s.lay.compare, "configs", name) }

// allPipelineVariants are the configurations the pipeline phase can
// run: each engine at its defaults and tuned for throughput, and
// fencepost at its defaults with exactly-once.
func (s *suite) allPipelineVariants() []pipebench.Variant {
	var vs []pipebench.Variant
	if s.phases["pipeline"] {
		vs = []pipebench.Variant{
			{Name: "fencepost, defaults", Engine: pipebench.Fencepost, Config: s.configPath("fencepost-defaults.yaml")},
			{Name: "fencepost, tuned", Engine: pipebench.Fencepost, Config: s.configPath("fencepost-tuned.yaml")},
			{Name: "fencepost, exactly-once", Engine: pipebench.Fencepost, Config: s.configPath("fencepost-exactly-once.yaml"), ExactlyOnce: true,
				Baseline: "fencepost, defaults"},
			{Name: "Benthos, defaults", Engine: pipebench.Benthos, Config: s.configPath("benthos-defaults.yaml")},
			{Name: "Benthos, tuned", Engine: pipebench.Benthos, Config: s.configPath("benthos-tuned.yaml"), Env: benthosTunedEnv},
		}
	}
	if s.phases["streams"] {
		vs = append(vs, s.streamsVariants()...)
	}
	return vs
}

// pipelineVariants are the variants -variants picks of allPipelineVariants.
func (s *suite) pipelineVariants() []pipebench.Variant {
	return picked(s.pick, s.allPipelineVariants(), func(v pipebench.Variant) string { return v.Name })
}

// picked returns the variants of vs that f picks, by name.
func picked[V any](f variantFilter, vs []V, name func(V) string) []V {
	var out []V
	for _, v := range vs {
		if f.picks(name(v)) {
			out = append(out, v)
		}
	}
	return out
}

// checkVariants fails if -variants names a variant that no phase to run
// has, or picks none in a phase that needs one.
func (s *suite) checkVariants() error {
	var names []string
	if s.phases["pipeline"] {
		for _, v := range s.allPipelineVariants() {
			names = append(names, v.Name)
		}
		if len(s.pipelineVariants()) == 0 {
			return fmt.Errorf("-variants %s picks no variant of the pipeline phase", s.opts.variants)
		}
	}
	if s.phases["latency"] {
		for _, v := range s.allLatencyVariants() {
			names = append(names, v.Name)
		}
		if len(s.latencyVariants()) == 0 {
			return fmt.Errorf("-variants %s picks no variant of the latency phase", s.opts.variants)
		}
	}
	if bad := s.pick.unmatched(names); len(bad) > 0 {
		return fmt.Errorf("-variants: %s picks no variant of the phases to run (%s)", strings.Join(bad, ", "), strings.Join(names, "; "))
	}
	return nil
}

func (s *suite) throughput(ctx context.Context, env pipebench.Env, in pipebench.Input) error {
	o := s.opts
	p := &report.Pipeline{Records: in.Records, Partitions: in.Partitions, ValueBytes: valueSizes(in.Records), Warmup: in.Warmup}
	for _, v := range s.pipelineVariants() {
		p.Variants = append(p.Variants, report.PipelineVariant{Variant: v})
	}
	s.rep.Pipeline = p
	// Repetitions go round the variants, so a change in the machine's
	// load hits all of them alike.
	for run := 1; run <= o.runs; run++ {
		for i := range p.Variants {
			v := &p.Variants[i]
			end := s.prog.step(fmt.Sprintf("pipeline: %s, run %d of %d", v.Name, run, o.runs), s.pipelineWeight(v.Engine))
			res, err := env.Run(ctx, v.Variant, in, fmt.Sprintf("%s-r%d", slug(v.Name), run))
			end()
			if err != nil {
				return fmt.Errorf("pipeline %s, run %d: %w", v.Name, run, err)
			}
			v.Runs = append(v.Runs, res)
			s.prog.logf("pipeline %-20s run %d: %8.0f records/s %8.0f records/CPU-s (steady %8.0f, %8.0f)  peak RSS %4d MiB  output: %d records, %d duplicates, %d missing, %d wrong",
				v.Name, run, res.RecordsPerSec(), res.RecordsPerCPUSec(), res.SteadyRecordsPerSec(), res.SteadyRecordsPerCPUSec(), res.MaxRSS>>20,
				res.Correct.Records, res.Correct.Duplicates, res.Correct.Missing, res.Correct.Wrong)
			if res.ExitErr != "" {
				s.prog.logf("pipeline %-20s run %d: exited after SIGTERM with %s", v.Name, run, res.ExitErr)
			}
		}
	}
	return nil
}

// valueSizes returns the smallest and largest of the first events'
// values.
func valueSizes(n int64) [2]int {
	lo, hi := 1<<30, 0
	ts := time.Now().UnixMicro()
	for i := int64(0); i < min(n, 10_000); i++ {
		l := len(events.Value(events.Make(i, ts)))
		lo, hi = min(lo, l), max(hi, l)
	}
	return [2]int{lo, hi}
}

// slug turns a variant name into part of a topic or file name.
func slug(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// machine describes where the suite runs.
func (s *suite) machine() report.Machine {
	m := report.Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Commit: gitCommit(s.lay.root), LoadBefore: loadAverage()}
	if out, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil {
		m.GoVersion = strings.TrimSpace(string(out))
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// loadAverage is the 1, 5 and 15 minute load average.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

var errNoRate = errors.New("-only latency without pipeline needs -latency-rate (events/s)")
