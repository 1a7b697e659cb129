package report

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"
)

// Write writes the report as dir/<date>.md with its charts beside it
// (<date>-*.png) and the raw benchmark output (<date>-bench.txt), and
// returns the Markdown file's path.
func Write(dir string, r *Report) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	date := r.Date.Format("2006-01-02")
	w := &writer{dir: dir, prefix: date}
	w.header(r)
	w.summary(r)
	if r.Pipeline != nil {
		if err := w.pipeline(r.Pipeline, r.Runs); err != nil {
			return "", err
		}
	}
	for i, l := range r.Latency {
		if err := w.latency(l, i); err != nil {
			return "", err
		}
	}
	w.exactlyOnce(r)
	w.searches(r)
	if err := w.consume(r); err != nil {
		return "", err
	}
	if raw := rawOutput(r); raw != "" {
		name := date + "-bench.txt"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(raw), 0o644); err != nil {
			return "", err
		}
		w.p("The consumption benchmarks' own output (for benchstat) is in [%s](%s).", name, name)
	}
	path := filepath.Join(dir, date+".md")
	return path, os.WriteFile(path, w.buf.Bytes(), 0o644)
}

func rawOutput(r *Report) string {
	var b strings.Builder
	for _, c := range r.consumeRuns() {
		fmt.Fprintf(&b, "# %s\n# %s\n%s\n", c.Title, c.Command, c.Output)
	}
	return b.String()
}

func (r *Report) consumeRuns() []*Consume {
	var cs []*Consume
	for _, c := range append([]*Consume{r.Raw, r.Partitions}, r.Brokers3...) {
		if c != nil {
			cs = append(cs, c)
		}
	}
	return cs
}

// writer accumulates the Markdown text.
type writer struct {
	dir, prefix string
	buf         bytes.Buffer
}

// p writes a paragraph.
func (w *writer) p(format string, args ...any) {
	fmt.Fprintf(&w.buf, format, args...)
	w.buf.WriteString("\n\n")
}

// table writes a Markdown table.
func (w *writer) table(head []string, rows [][]string) {
	w.buf.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for range head {
		w.buf.WriteString("---|")
	}
	w.buf.WriteString("\n")
	for _, r := range rows {
		w.buf.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	w.buf.WriteString("\n")
}

// chart names a chart file and references it from the text.
func (w *writer) chart(name, alt string, draw func(path string) error) error {
	file := w.prefix + "-" + name + ".png"
	if err := draw(filepath.Join(w.dir, file)); err != nil {
		return fmt.Errorf("chart %s: %w", file, err)
	}
	w.p("![%s](%s)", alt, file)
	return nil
}

// rate formats records per second.
func rate(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 1e6:
		return fmt.Sprintf("%.2f M", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0f k", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// ratio formats a ratio ("1.85×").
func ratio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}

func num(v float64, prec int) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func mib(bytes float64) string { return fmt.Sprintf("%.0f MiB", bytes/(1<<20)) }

func msec(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

func (w *writer) header(r *Report) {
	m := r.Machine
	w.p("# Benchmarks of %s", r.Date.Format("2006-01-02"))
	w.p("Written by `%s` (from the repository root). Machine: %d CPUs (%s), %s, commit %s. "+
		"Load average (1, 5, 15 min) %s when the suite started, %s when it ended; the suite took %v. "+
		"Every figure is the median of %d run(s) unless a table says otherwise. The machine is shared: "+
		"compare the ratios, measured in the same run on the same broker and data, more than the absolute figures.",
		r.Command, m.CPUs, orUnknown(m.Model), m.GoVersion, m.Commit, m.LoadBefore, m.LoadAfter, r.Took.Round(time.Second), r.Runs)
	if r.Broker != "" {
		w.p("The pipeline, latency and search benchmarks ran on %s, a separate process.", r.Broker)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "model unknown"
	}
	return s
}

func (w *writer) pipeline(p *Pipeline, runs int) error {
	w.p("## The real pipeline: %s", pipelineTitle(p))
	w.p("%d shop events (JSON values of %d–%d bytes, keyed by user) in a topic of %d partitions on one broker, "+
		"a separate process. Each variant runs as a child process in a fresh consumer group: "+
		"consume → parse JSON → keep the purchases (one event in four) → reshape into a new JSON value keyed by user → "+
		"produce to a fresh output topic (acks=all), committing offsets. Configurations: `bench/compare/configs/` "+
		"(each file says what it sets and why).", p.Records, p.ValueBytes[0], p.ValueBytes[1], p.Partitions)
	var rows [][]string
	var names []string
	var rates, perCPU []float64
	var benthosTuned *Medians
	for _, v := range p.Variants {
		if v.Name == "Benthos, tuned" && len(v.Runs) > 0 {
			m := v.Medians()
			benthosTuned = &m
		}
	}
	steady := p.Warmup > 0
	for _, v := range p.Variants {
		if len(v.Runs) == 0 {
			continue
		}
		m := v.Medians()
		worst, exact := v.Worst()
		vsRate, vsCPU := math.NaN(), math.NaN()
		if benthosTuned != nil {
			vsRate, vsCPU = m.SteadyRecordsPerSec/benthosTuned.SteadyRecordsPerSec, m.SteadyRecordsPerCPUSec/benthosTuned.SteadyRecordsPerCPUSec
		}
		row := []string{v.Name, rate(m.RecordsPerSec), rate(m.RecordsPerCPUSec)}
		if steady {
			row = append(row, rate(m.SteadyRecordsPerSec), rate(m.SteadyRecordsPerCPUSec))
		}
		rows = append(rows, append(row, mib(m.MaxRSS),
			msec(m.FirstOutput), fmt.Sprintf("%d of %d exact; worst: %d records, %d duplicates, %d missing, %d wrong",
				exact, len(v.Runs), worst.Records, worst.Duplicates, worst.Missing, worst.Wrong),
			ratio(vsRate), ratio(vsCPU), "`"+filepath.Base(v.Config)+"`"))
		names = append(names, v.Name)
		rates, perCPU = append(rates, m.RecordsPerSec), append(perCPU, m.RecordsPerCPUSec)
	}
	head := []string{"variant", "records/s", "records/CPU-s"}
	if steady {
		head = append(head, "steady records/s", "steady records/CPU-s")
	}
	w.table(append(head, "peak RSS", "first output after", "output (of "+fmt.Sprint(expectedOf(p))+" expected)",
		"records/s vs Benthos tuned", "records/CPU-s vs Benthos tuned", "config"), rows)
	if steady {
		w.p("*steady*: over each run's window after its first %d input records were committed (start-up, the group join and the JVM's "+
			"JIT compilation fall before it), up to the run's end: the records the group committed in it, over its length and the child's CPU "+
			"time in it. The ratios against Benthos tuned use the steady figures.", p.Warmup)
	}
	w.ratios(p)
	w.p("records/s: input records over the time from starting the child process until the group has committed the end of every " +
		"input partition *and* the output topic holds every expected record (polled every 20 ms), so start-up and the group join count. " +
		"records/CPU-s: input records over the child's user+system CPU time over that same span (/proc/PID/stat, 10 ms ticks). " +
		"Peak RSS: the child's own high-water mark, VmHWM of /proc/PID/status, read when it is done (getrusage's maximum is not used: " +
		"on Linux it includes this program's resident set at the moment it started the child, copied by vfork before exec). Output: the whole output topic read back " +
		"and compared with what the generator implies (each purchase once, with the right key and fields).")
	if hasExactlyOnce(p.Variants) {
		w.p("Exactly-once variants (`guarantee: exactly_once`) write the output in Kafka transactions, one per commit interval, " +
			"and are measured as a `read_committed` reader sees them: a run is done once the group has committed the end of every " +
			"input partition, the output's end offsets add up to at least the expected records, *and* no output partition has an open " +
			"transaction (last stable offset = end offset), so the last transaction's commit counts; *first output after* is the first " +
			"transaction's commit; the output is read back `read_committed` (records of aborted transactions would not count).")
	}
	if err := w.chart("pipeline", "records/s and records per CPU-second per variant", func(path string) error {
		return barChart(path, "Real pipeline: consume, JSON, filter 1 in 4, reshape, produce", "million records per second",
			names, []series{{"records/s", rates}, {"records/CPU-s", perCPU}}, 1e6)
	}); err != nil {
		return err
	}
	if runs > 1 {
		var all [][]string
		for _, v := range p.Variants {
			for i, r := range v.Runs {
				all = append(all, []string{v.Name, fmt.Sprint(i + 1), rate(r.RecordsPerSec()), rate(r.RecordsPerCPUSec()),
					mib(float64(r.MaxRSS)), fmt.Sprintf("%.2f s", r.Elapsed.Seconds()), fmt.Sprintf("%.2f s", r.CPU.Seconds()),
					fmt.Sprintf("%.2f s", r.CPUTotal.Seconds()), fmt.Sprintf("%d/%d/%d/%d", r.Correct.Records, r.Correct.Duplicates, r.Correct.Missing, r.Correct.Wrong)})
			}
		}
		w.p("Every run (CPU until done, and over the child's whole life including its graceful shutdown; output as records/duplicates/missing/wrong):")
		w.table([]string{"variant", "run", "records/s", "records/CPU-s", "peak RSS", "elapsed", "CPU until done", "CPU, whole life", "output"}, all)
	}
	return nil
}

func expectedOf(p *Pipeline) int {
	for _, v := range p.Variants {
		for _, r := range v.Runs {
			return r.Correct.Expected
		}
	}
	return 0
}

func (w *writer) latency(l *Latency, i int) error {
	w.p("## End-to-end latency at %d events/s", l.Rate)
	w.p("The rate is %s. A producer in the report's process (franz-go kgo, no linger, uncompressed) writes events at that rate "+
		"in steps of about a millisecond, each stamped with the time just before its Produce call (`ts`, Unix microseconds, "+
		"carried into the output value by both pipelines). A consumer of the output topic in the same process (kgo, no group) "+
		"times each output record when the fetch that brought it returns. So a figure is: the producer's request, the broker's append, "+
		"the pipeline's fetch, processing and produce (acks=all) and the broker's append of the output, and the consumer's fetch; "+
		"the output record has been acknowledged to the pipeline by then or within microseconds. The pipeline runs as a child "+
		"process in a fresh group on fresh topics of the same broker; timing starts once the group holds every partition, and "+
		"the first %v of each %v run is not timed. The floor row is the same producer and consumer on one topic with no pipeline: "+
		"what the method itself adds. Producer, consumer, broker and pipeline share the machine's CPUs.", l.RateFrom, l.Warmup, l.For)
	for _, v := range l.Variants {
		if v.ExactlyOnce && len(v.Runs) > 0 {
			w.p("For %s the consumer is `read_committed`, as that variant's users are: it gets an output record only once the "+
				"transaction that wrote it commits, so the figures include the visibility delay of exactly-once (a transaction "+
				"commits once per `consumer.commit_interval`, 100 ms by default, and waits for the pipeline to drain).", v.Name)
		}
	}
	rows := [][]string{}
	names := []string{}
	var p50, p99, pmax []float64
	behind := false
	add := func(name, settings string, m LatencyMedians, cores string) {
		at := ""
		if m.Received < m.Expected { // fell behind: the figures cover the records that arrived
			at, behind = "≥ ", true
		}
		p50s, p99s, maxs := at+msec(m.P50), at+msec(m.P99), at+msec(m.Max)
		if m.Received == 0 { // nothing to take percentiles of
			p50s, p99s, maxs = "none arrived", "none arrived", "none arrived"
		}
		rows = append(rows, []string{name, settings, p50s, p99s, maxs,
			fmt.Sprintf("%d of %d", m.Received, m.Expected), rate(m.Rate), cores})
		names = append(names, name)
		p50, p99, pmax = append(p50, ms(m.P50)), append(p99, ms(m.P99)), append(pmax, ms(m.Max))
	}
	if len(l.Floor) > 0 {
		add("floor (no pipeline)", "–", l.FloorMedians(), "–")
	}
	for _, v := range l.Variants {
		if len(v.Runs) == 0 {
			continue
		}
		m := v.Medians()
		add(v.Name, v.Settings, m, fmt.Sprintf("%.2f", m.Cores))
	}
	w.table([]string{"variant", "settings", "p50", "p99", "max", "timed records received (worst run)", "events/s produced", "pipeline CPU (cores)"}, rows)
	w.p("Percentiles by nearest rank over every timed record of a run, then the median over runs. Pipeline CPU: the child's " +
		"CPU seconds per second of the measurement.")
	if behind {
		w.p("**≥**: the pipeline fell behind the input rate: some timed records had not arrived 5 s after the producer stopped, " +
			"so the percentiles cover only those that did, and the real ones are higher (the latency grows for as long as the input lasts).")
	}
	name := "latency"
	if i > 0 {
		name = fmt.Sprintf("latency-%d", l.Rate)
	}
	return w.chart(name, "end-to-end latency percentiles per variant", func(path string) error {
		return rangeChart(path, fmt.Sprintf("End-to-end latency at %d events/s", l.Rate), names, p50, p99, pmax)
	})
}

// hasExactlyOnce reports whether an exactly-once variant of vs ran.
func hasExactlyOnce(vs []PipelineVariant) bool {
	for _, v := range vs {
		if v.ExactlyOnce && len(v.Runs) > 0 {
			return true
		}
	}
	return false
}

// eosPair is an exactly-once variant's figures and those of its
// Baseline, from one phase.
type eosPair[M any] struct {
	name, baseName string // the exactly-once variant and its baseline
	eos, base      M
}

// pairs are the exactly-once variants of vs that ran, each with its
// Baseline, if that ran too; variant reads a V's pipebench.Variant, ran
// whether it has runs, medians its figures.
func pairs[V, M any](vs []V, variant func(V) pipebench.Variant, ran func(V) bool, medians func(V) M) []eosPair[M] {
	byName := map[string]V{}
	for _, v := range vs {
		if ran(v) {
			byName[variant(v).Name] = v
		}
	}
	var out []eosPair[M]
	for _, v := range vs {
		pv := variant(v)
		if !pv.ExactlyOnce || !ran(v) {
			continue
		}
		if base, ok := byName[pv.Baseline]; ok {
			out = append(out, eosPair[M]{pv.Name, pv.Baseline, medians(v), medians(base)})
		}
	}
	return out
}

// pipelinePairs are the exactly-once variants of p that ran, each with
// its baseline, if it ran too.
func pipelinePairs(p *Pipeline) []eosPair[Medians] {
	if p == nil {
		return nil
	}
	return pairs(p.Variants, func(v PipelineVariant) pipebench.Variant { return v.Variant },
		func(v PipelineVariant) bool { return len(v.Runs) > 0 }, PipelineVariant.Medians)
}

// latencyPairs is pipelinePairs for one latency rate.
func latencyPairs(l *Latency) []eosPair[LatencyMedians] {
	return pairs(l.Variants, func(v LatencyVariant) pipebench.Variant { return v.Variant },
		func(v LatencyVariant) bool { return len(v.Runs) > 0 }, LatencyVariant.Medians)
}

// latencyCell is a p50 or p99 for a table, marked when the variant fell
// behind.
func latencyCell(m LatencyMedians, d time.Duration) string {
	switch {
	case m.Received == 0:
		return "none arrived"
	case m.Received < m.Expected:
		return "≥ " + msec(d)
	}
	return msec(d)
}

// exactlyOnce writes what exactly-once costs against the same
// configuration at least once, from the tables above, if both ran.
func (w *writer) exactlyOnce(r *Report) {
	pp := pipelinePairs(r.Pipeline)
	type lat struct {
		rate int
		ps   []eosPair[LatencyMedians]
	}
	var ls []lat
	for _, l := range r.Latency {
		if ps := latencyPairs(l); len(ps) > 0 {
			ls = append(ls, lat{l.Rate, ps})
		}
	}
	if len(pp) == 0 && len(ls) == 0 {
		return
	}
	w.p("## Exactly-once cost")
	w.p("Each exactly-once variant against its engine's at-least-once variant with the same settings otherwise, from the tables " +
		"above (medians; steady windows with a warm-up). Exactly-once output is read `read_committed` throughout, so the latency " +
		"includes the wait for each transaction's commit.")
	if len(pp) > 0 {
		var rows [][]string
		for _, p := range pp {
			rows = append(rows,
				[]string{p.baseName, rate(p.base.SteadyRecordsPerSec), rate(p.base.SteadyRecordsPerCPUSec), mib(p.base.MaxRSS), "1", "1"},
				[]string{p.name, rate(p.eos.SteadyRecordsPerSec), rate(p.eos.SteadyRecordsPerCPUSec), mib(p.eos.MaxRSS),
					ratio(p.eos.SteadyRecordsPerSec / p.base.SteadyRecordsPerSec), ratio(p.eos.SteadyRecordsPerCPUSec / p.base.SteadyRecordsPerCPUSec)})
		}
		w.table([]string{"variant", "records/s", "records/CPU-s", "peak RSS", "records/s vs at-least-once", "records/CPU-s vs at-least-once"}, rows)
	}
	for _, l := range ls {
		var rows [][]string
		for _, p := range l.ps {
			rows = append(rows,
				[]string{p.baseName, latencyCell(p.base, p.base.P50), latencyCell(p.base, p.base.P99), latencyCell(p.base, p.base.Max), fmt.Sprintf("%.2f", p.base.Cores)},
				[]string{p.name, latencyCell(p.eos, p.eos.P50), latencyCell(p.eos, p.eos.P99), latencyCell(p.eos, p.eos.Max), fmt.Sprintf("%.2f", p.eos.Cores)})
		}
		w.p("End-to-end latency at %d events/s:", l.rate)
		w.table([]string{"variant", "p50", "p99", "max", "pipeline CPU (cores)"}, rows)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (w *writer) consume(r *Report) error {
	if r.Raw == nil && r.Partitions == nil && len(r.Brokers3) == 0 {
		return nil
	}
	w.p("## Raw consumption: the main module's benchmarks (bench/consume_bench_test.go)")
	w.p("Each client reads every record of a topic in a consumer group with commits on, in the benchmark's process; the " +
		"broker is a separate process (`processor broker`), so CPU time and allocations are the client's alone. records/s: from " +
		"the first record to the last; incl. join: from the start; records/CPU-s: over the process's CPU time for the read; " +
		"allocs/record: heap allocations of the process per record; max fetches in flight: fencepost's most concurrent fetch " +
		"requests. A caution on records/s: the benchmark counts the records of the first poll but starts the clock when that poll " +
		"returns, so when one poll brings a large share of the topic (many partitions: kgo's first fetch can return up to 50 MiB) " +
		"records/s overstates; records/s incl. join (group join and first fetch included) and records/CPU-s do not have that bias, " +
		"and the scaling chart uses them. Reproduce each table with its command, after starting a broker with " +
		"`go run ./cmd/processor broker --port 0 --brokers N` and setting BROKERS to the address list it prints.")
	if c := r.Raw; c != nil {
		rows, err := ConsumeRows(c.Results, 0)
		if err != nil {
			return err
		}
		w.p("### %s, %d records", c.Title, c.Records)
		w.p("`%s`", c.Command)
		w.consumeTable(rows)
		var names []string
		var rates, perCPU []float64
		for _, row := range rows {
			names = append(names, row.Client)
			rates, perCPU = append(rates, row.RecordsPerSec), append(perCPU, row.PerCPU)
		}
		if err := w.chart("raw", "records/s and records per CPU-second per client", func(path string) error {
			return barChart(path, "Raw consumption, 4 partitions, 100 B records", "million records per second",
				names, []series{{"records/s", rates}, {"records/CPU-s", perCPU}}, 1e6)
		}); err != nil {
			return err
		}
	}
	if c := r.Partitions; c != nil {
		w.p("### %s, %d records per topic", c.Title, c.Records)
		w.p("`%s`", c.Command)
		var all []ConsumeRow
		var xs []float64
		figs := map[string][]float64{}
		for _, n := range c.Partitions {
			rows, err := ConsumeRows(c.Results, n)
			if err != nil {
				return err
			}
			all = append(all, rows...)
			xs = append(xs, float64(n))
			for _, row := range rows {
				figs[row.Client+"|rate"] = append(figs[row.Client+"|rate"], row.InclJoin)
				figs[row.Client+"|cpu"] = append(figs[row.Client+"|cpu"], row.PerCPU)
			}
		}
		w.consumeTable(all)
		var ss []series
		for _, client := range []string{"fencepost, default", "franz-go kgo"} {
			ss = append(ss, series{client + ": records/s incl. join", pad(figs[client+"|rate"], len(xs))},
				series{client + ": records/CPU-s", pad(figs[client+"|cpu"], len(xs))})
		}
		if err := w.chart("scaling", "records/s and records per CPU-second against partitions", func(path string) error {
			return lineChart(path, "Raw consumption against partitions (one broker, 100 B records)", "million records per second", xs, ss, 1e6)
		}); err != nil {
			return err
		}
	}
	for _, c := range r.Brokers3 {
		w.p("### %s, %d records", c.Title, c.Records)
		w.p("`%s`", c.Command)
		var all []ConsumeRow
		for _, n := range c.Partitions {
			rows, err := ConsumeRows(c.Results, n)
			if err != nil {
				return err
			}
			all = append(all, rows...)
		}
		w.consumeTable(all)
		if c.ValueSize >= 1000 {
			var mb [][]string
			for _, row := range all {
				mb = append(mb, []string{row.Client, fmt.Sprintf("%.0f MB/s", row.RecordsPerSec*float64(c.ValueSize)/1e6)})
			}
			w.p("In value bytes:")
			w.table([]string{"client", "value bytes/s"}, mb)
		}
	}
	return nil
}

// pad fills vs with NaN up to n values (a client missing at some
// partition count).
func pad(vs []float64, n int) []float64 {
	for len(vs) < n {
		vs = append(vs, math.NaN())
	}
	return vs
}

func (w *writer) consumeTable(rows []ConsumeRow) {
	var out [][]string
	for _, r := range rows {
		parts := "4"
		if r.Partitions > 0 {
			parts = fmt.Sprint(r.Partitions)
		}
		out = append(out, []string{r.Client, parts, rate(r.RecordsPerSec), rate(r.InclJoin), rate(r.PerCPU), num(r.Allocs, 2),
			num(r.MsToFirst, 0), num(r.MaxFetches, 0), ratio(r.VsKgoRate), ratio(r.VsKgoJoin), ratio(r.VsKgoCPU), fmt.Sprint(r.Runs)})
	}
	w.table([]string{"client", "partitions", "records/s", "records/s incl. join", "records/CPU-s", "allocs/record", "ms to first record",
		"max fetches in flight", "vs kgo: records/s", "vs kgo: incl. join", "vs kgo: records/CPU-s", "runs"}, out)
}

// summary states the headline ratios, each computed from the tables below.
func (w *writer) summary(r *Report) {
	var lines []string
	if p := r.Pipeline; p != nil {
		med := map[string]Medians{}
		for _, v := range p.Variants {
			if len(v.Runs) > 0 {
				med[v.Name] = v.Medians()
			}
		}
		for _, pair := range [][2]string{{"fencepost, tuned", "Benthos, tuned"}, {"fencepost, defaults", "Benthos, defaults"}} {
			a, okA := med[pair[0]]
			b, okB := med[pair[1]]
			if okA && okB {
				lines = append(lines, fmt.Sprintf("Real pipeline, %s against %s: %s records/s, %s records per CPU-second; peak RSS %s against %s.",
					pair[0], pair[1], ratio(a.RecordsPerSec/b.RecordsPerSec), ratio(a.RecordsPerCPUSec/b.RecordsPerCPUSec), mib(a.MaxRSS), mib(b.MaxRSS)))
			}
		}
	}
	for _, p := range pipelinePairs(r.Pipeline) {
		lines = append(lines, fmt.Sprintf("Exactly-once cost, real pipeline, %s against %s: %s records/s, %s records per CPU-second.",
			p.name, p.baseName, ratio(p.eos.SteadyRecordsPerSec/p.base.SteadyRecordsPerSec), ratio(p.eos.SteadyRecordsPerCPUSec/p.base.SteadyRecordsPerCPUSec)))
	}
	for _, l := range r.Latency {
		for _, p := range latencyPairs(l) {
			lines = append(lines, fmt.Sprintf("Exactly-once cost, end-to-end latency at %d events/s (read_committed): %s p50 %s, p99 %s; %s p50 %s, p99 %s.",
				l.Rate, p.name, latencyCell(p.eos, p.eos.P50), latencyCell(p.eos, p.eos.P99),
				p.baseName, latencyCell(p.base, p.base.P50), latencyCell(p.base, p.base.P99)))
		}
	}
	for _, l := range r.Latency {
		var parts []string
		for _, v := range l.Variants {
			if len(v.Runs) == 0 {
				continue
			}
			m := v.Medians()
			p99 := msec(m.P99)
			if m.Received < m.Expected {
				p99 = "fell behind"
			}
			parts = append(parts, fmt.Sprintf("%s %s", v.Name, p99))
		}
		if len(parts) > 0 {
			lines = append(lines, fmt.Sprintf("p99 end-to-end latency at %d events/s: %s.", l.Rate, strings.Join(parts, "; ")))
		}
	}
	if r.Raw != nil {
		if rows, err := ConsumeRows(r.Raw.Results, 0); err == nil {
			for _, row := range rows {
				if row.Client == "fencepost, default" {
					lines = append(lines, fmt.Sprintf("Raw consumption, 4 partitions, fencepost (default fetch_concurrency) against kgo: %s records/s, %s records/s incl. join, %s records per CPU-second; %s allocations per record.",
						ratio(row.VsKgoRate), ratio(row.VsKgoJoin), ratio(row.VsKgoCPU), num(row.Allocs, 3)))
				}
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	w.p("## Summary")
	for _, l := range lines {
		w.buf.WriteString("- " + l + "\n")
	}
	w.buf.WriteString("\n")
}
