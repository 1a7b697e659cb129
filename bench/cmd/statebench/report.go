//go:build unix

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// header is what every report starts with: when, where, which commit,
// and the load average (compare ratios within one report only).
func header(w io.Writer, e *env, what string) {
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	host, _ := os.Hostname()
	fmt.Fprintf(w, "# %s\n\n%s, %s, %d CPUs, %s/%s, commit %s, broker: %s\n\nload average at the end: %s\n\n",
		what, time.Now().UTC().Format("2006-01-02 15:04 UTC"), host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH,
		strings.TrimSpace(string(commit)), e.kafka, loadavg())
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func median[T any](xs []T, key func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = key(x)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func printRestoreReport(w io.Writer, e *env, vs []variant, results [][]restoreRun, keys, recBytes, partitions int) {
	header(w, e, "Restore from an empty disk")
	fmt.Fprintf(w, "%d keys, records of %d B (key %d B, 8-byte count), %d partitions, %d rounds (each runs every variant in turn). "+
		"rec/s and MB/s over the restore window (the first partition's restore start to the last one's end); "+
		"from exec: process start to the last restore's end; CPU: the process's whole life; peak RSS: its VmHWM, sampled every 20 ms.\n\n",
		keys, recBytes, recBytes-8, partitions, len(results[0]))
	fmt.Fprintln(w, "| variant | rec/s (median) | MB/s | window | from exec | CPU s | peak RSS MiB | rec/s of each round |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for i, v := range vs {
		rs := results[i]
		rate := func(r restoreRun) float64 { return float64(r.records) / r.window.Seconds() }
		var each []string
		for _, r := range rs {
			each = append(each, fmt.Sprintf("%.0f k", rate(r)/1e3))
		}
		m := median(rs, rate)
		fmt.Fprintf(w, "| %s | %.0f k | %.1f | %.1f s | %.1f s | %.1f | %.0f | %s |\n", v.name, m/1e3, m*float64(recBytes)/1e6,
			median(rs, func(r restoreRun) float64 { return r.window.Seconds() }),
			median(rs, func(r restoreRun) float64 { return r.total.Seconds() }),
			median(rs, func(r restoreRun) float64 { return r.cpu.Seconds() }),
			median(rs, func(r restoreRun) float64 { return float64(r.rssKiB) / 1024 }), strings.Join(each, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Ratios, round by round (fencepost variant / Kafka Streams variant): records/s over the window, records/s from exec, peak RSS.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| fencepost | Kafka Streams | rec/s ratio (median; rounds) | from-exec ratio (median) | peak RSS ratio (median) |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for i, a := range vs {
		if a.engine != "fencepost" {
			continue
		}
		for j, b := range vs {
			if b.engine != "streams" {
				continue
			}
			n := min(len(results[i]), len(results[j]))
			type pair struct{ rate, exec, rss float64 }
			ps := make([]pair, n)
			var each []string
			for k := 0; k < n; k++ {
				x, y := results[i][k], results[j][k]
				ps[k] = pair{
					rate: (float64(x.records) / x.window.Seconds()) / (float64(y.records) / y.window.Seconds()),
					exec: y.total.Seconds() / x.total.Seconds(),
					rss:  float64(x.rssKiB) / float64(y.rssKiB),
				}
				each = append(each, fmt.Sprintf("%.2f", ps[k].rate))
			}
			fmt.Fprintf(w, "| %s | %s | **%.2f×** (%s) | %.2f× | %.2f |\n", a.name, b.name,
				median(ps, func(p pair) float64 { return p.rate }), strings.Join(each, ", "),
				median(ps, func(p pair) float64 { return p.exec }), median(ps, func(p pair) float64 { return p.rss }))
		}
	}
	fmt.Fprintln(w)
}
