//go:build unix

package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// cellKey is one job, guarantee and variant (its index) of the report.
type cellKey struct {
	job, guarantee string
	variant        int
}

var jobTitles = map[string]string{
	"window": "Windowed count, emit on close",
	"join":   "Stream-table join",
}

// pairRatios returns a's figure over b's, round by round (as many rounds
// as both have), and their median.
func pairRatios(a, b []stagesRun, figure func(stagesRun) float64) (float64, []float64) {
	n := min(len(a), len(b))
	each := make([]float64, n)
	for i := range n {
		each[i] = figure(a[i]) / figure(b[i])
	}
	return median(each, func(x float64) float64 { return x }), each
}

// outputsAgree says whether every run of a job and guarantee, whatever
// its engine, output exactly what was expected, and whether all those
// outputs were the same (one digest), as a sentence for the report.
func outputsAgree(vs []variant, runs [][]stagesRun) string {
	digests := map[uint64]bool{}
	var bad []string
	for i, rs := range runs {
		for r, x := range rs {
			digests[x.check.digest] = true
			if !x.exact() {
				bad = append(bad, fmt.Sprintf("%s round %d (%s; %s)", vs[i].name, r+1, x.check, x.check.example))
			}
		}
	}
	switch {
	case len(bad) > 0:
		return "**not every output was exact**: " + strings.Join(bad, "; ")
	case len(digests) == 1:
		return "every run's output was exact and the same, whatever the engine (one digest of its distinct records)"
	default:
		return fmt.Sprintf("every run's output was exact, but %d digests differ: check the digest code", len(digests))
	}
}

func eachRound(rs []stagesRun, f func(stagesRun) float64, unit float64, format string) string {
	var s []string
	for _, r := range rs {
		s = append(s, fmt.Sprintf(format, f(r)/unit))
	}
	return strings.Join(s, ", ")
}

func printStagesReport(w io.Writer, e *env, s *stagesSetup, jobs, guarantees []string, vs []variant, results map[cellKey][]stagesRun, took time.Duration) {
	header(w, e, "Stateful stages against Kafka Streams")
	sp := s.spec
	fmt.Fprintf(w, "Events: %d JSON click events (`{\"id\",\"user\",\"page\",\"ts\"}`, about 70 B) keyed by user over %d users, "+
		"%d partitions (murmur2), event time (the record timestamp, and `ts`) advancing %d events per second, up to %d ms behind "+
		"its place, one in %d %d s behind (late once its window has closed), and one closing record per partition an hour later. "+
		"Windowed count: tumbling windows of %v, grace %v, each window written once when it closes (fencepost `aggregate` with "+
		"`emit: on_close`; Kafka Streams `windowedBy(TimeWindows.ofSizeAndGrace(...)).count().suppress(untilWindowCloses(unbounded()))`). "+
		"Join: an inner join with the compacted table `users` (%d rows of about 100 B, loaded first; fencepost `join`, "+
		"Kafka Streams `KStream.join(KTable)`). Expected: %d windows (%d late events dropped), %d joined events.\n\n",
		sp.records, sp.streamUsers(), sp.partitions, sp.rate, sp.jitter, sp.lateEvery, sp.lateBy/1000,
		time.Duration(s.windowMs)*time.Millisecond, time.Duration(s.graceMs)*time.Millisecond, sp.users, len(s.want), s.late, s.joined)
	fmt.Fprintf(w, "%d round(s), each running every job, guarantee and variant once, in turn; medians over rounds. "+
		"*records/s* and *records/CPU-s*: the input records committed in the steady window (from the 20 ms poll that saw %d "+
		"committed until the group had committed every input offset and the output was complete, at exactly_once with no open "+
		"transaction) over its wall time, and over the process's user+system CPU in it; *from exec*: process start to done; "+
		"*peak RSS*: VmHWM, sampled every 20 ms; *output*: the output read back (read_committed at exactly_once) and compared "+
		"with the expected windows and counts, or joined events and rows.\n\n", len(results[cellKey{jobs[0], guarantees[0], 0}]), s.warmup)
	for i, v := range vs {
		settings := "nothing changed"
		if v.engine == "streams" {
			for _, g := range guarantees {
				jvm, props := streamsSettings(g, v)
				var kv []string
				for _, k := range slices.Sorted(maps.Keys(props)) {
					kv = append(kv, k+"="+props[k])
				}
				fmt.Fprintf(w, "- variant %d, %s, %s: `%s` `%s`\n", i+1, v.name, g, strings.Join(jvm, " "), strings.Join(kv, " "))
			}
			continue
		}
		if len(v.settings) > 0 {
			var kv []string
			for _, x := range v.settings {
				kv = append(kv, x[0]+"="+x[1])
			}
			settings = "`" + strings.Join(kv, " ") + "`"
		}
		fmt.Fprintf(w, "- variant %d, %s: `processor run`, the job's configuration (consumer.commit_interval 100ms, else the defaults) with %s\n", i+1, v.name, settings)
	}
	fmt.Fprintln(w)
	for _, job := range jobs {
		for _, g := range guarantees {
			fmt.Fprintf(w, "## %s, %s\n\n", jobTitles[job], g)
			fmt.Fprintln(w, "| variant | records/s | records/CPU-s | peak RSS | from exec | output exact | records/s by round | records/CPU-s by round |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
			var runs [][]stagesRun
			for i, v := range vs {
				rs := results[cellKey{job, g, i}]
				runs = append(runs, rs)
				exact := 0
				for _, r := range rs {
					if r.exact() {
						exact++
					}
				}
				fmt.Fprintf(w, "| %s | %.0f k | %.0f k | %.0f MiB | %.1f s | %d of %d | %s | %s |\n", v.name,
					median(rs, stagesRun.rate)/1e3, median(rs, stagesRun.perCPU)/1e3, median(rs, stagesRun.rssMiB),
					median(rs, func(r stagesRun) float64 { return r.total.Seconds() }), exact, len(rs),
					eachRound(rs, stagesRun.rate, 1e3, "%.0f k"), eachRound(rs, stagesRun.perCPU, 1e3, "%.0f k"))
			}
			fmt.Fprintln(w)
			fmt.Fprintf(w, "Output: %s.\n\n", outputsAgree(vs, runs))
			printPairs(w, vs, runs)
		}
	}
	fmt.Fprintf(w, "The whole series took %v.\n", took.Round(time.Second))
}

// printPairs prints, for each fencepost variant and Kafka Streams
// variant, the ratios of their figures round by round.
func printPairs(w io.Writer, vs []variant, runs [][]stagesRun) {
	started := false
	for i, a := range vs {
		for j, b := range vs {
			if a.engine != "fencepost" || b.engine != "streams" {
				continue
			}
			if !started {
				fmt.Fprintln(w, "| fencepost / Kafka Streams | records/s (median; rounds) | records/CPU-s (median; rounds) | peak RSS (median) |")
				fmt.Fprintln(w, "|---|---|---|---|")
				started = true
			}
			rate, rates := pairRatios(runs[i], runs[j], stagesRun.rate)
			cpu, cpus := pairRatios(runs[i], runs[j], stagesRun.perCPU)
			rss, _ := pairRatios(runs[i], runs[j], stagesRun.rssMiB)
			fmt.Fprintf(w, "| %s / %s | **%.2f×** (%s) | **%.2f×** (%s) | %.2f |\n", a.name, b.name, rate, joinFloats(rates),
				cpu, joinFloats(cpus), rss)
		}
	}
	if started {
		fmt.Fprintln(w)
	}
}

func joinFloats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, ", ")
}
