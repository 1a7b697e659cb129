package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/broker"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/report"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/scale"
)

// consumeRun is one invocation of the main module's consumption
// benchmarks against a separate-process cluster.
type consumeRun struct {
	title      string
	phase      string // of the progress bar's weights: raw, partitions or brokers3
	bench      string // -bench pattern
	partitions []int
	valueSize  int
}

// The -bench patterns: every client of BenchmarkConsume; of
// BenchmarkConsumePartitions only fencepost at its defaults
// (fetch_concurrency chosen from the partitions per broker) and kgo. A top-level | separates whole
// slash-separated patterns (kgo has no fourth level, and a name shorter
// than its pattern only runs to find sub-benchmarks).
const (
	benchRaw        = "^BenchmarkConsume$"
	benchPartitions = "^BenchmarkConsumePartitions$/./^fencepost$/^default$|^BenchmarkConsumePartitions$/./^franz-go-kgo$"
)

func (s *suite) consumePhases(ctx context.Context) error {
	if s.phases["raw"] || s.phases["partitions"] {
		err := s.withCluster(ctx, 1, func(addrs []string) error {
			if s.phases["raw"] {
				c, err := s.consume(ctx, addrs, consumeRun{title: "4 partitions, one broker, 100 B records", phase: "raw", bench: benchRaw, partitions: []int{4}, valueSize: 100})
				if err != nil {
					return err
				}
				s.rep.Raw = c
			}
			if s.phases["partitions"] {
				c, err := s.consume(ctx, addrs, consumeRun{title: "4, 64 and 512 partitions, one broker, 100 B records", phase: "partitions", bench: benchPartitions, partitions: []int{4, 64, 512}, valueSize: 100})
				if err != nil {
					return err
				}
				s.rep.Partitions = c
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if s.phases["brokers3"] {
		return s.withCluster(ctx, 3, func(addrs []string) error {
			for _, size := range []int{100, 1000} {
				c, err := s.consume(ctx, addrs, consumeRun{title: fmt.Sprintf("64 partitions over three brokers, %s records", sizeName(size)), phase: "brokers3", bench: benchPartitions, partitions: []int{64}, valueSize: size})
				if err != nil {
					return err
				}
				s.rep.Brokers3 = append(s.rep.Brokers3, c)
			}
			return nil
		})
	}
	return nil
}

func sizeName(n int) string {
	if n%1000 == 0 {
		return fmt.Sprintf("%d KB", n/1000)
	}
	return fmt.Sprintf("%d B", n)
}

// withCluster runs fn with a cluster of n brokers started for it.
func (s *suite) withCluster(ctx context.Context, n int, fn func(addrs []string) error) error {
	end := s.prog.step(fmt.Sprintf("start a %d-broker cluster", n), 2)
	cl, err := broker.Start(ctx, s.procs, s.bins.processor, fmt.Sprintf("broker-%d", n), n, 4)
	end()
	if err != nil {
		return err
	}
	defer func() { _ = cl.Stop() }()
	return fn(cl.Addrs)
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// consume runs the benchmark binary once and parses its output.
func (s *suite) consume(ctx context.Context, addrs []string, r consumeRun) (*report.Consume, error) {
	o := s.opts
	args := []string{"-run", "^$", "-bench", r.bench, "-benchtime", "1x", "-count", strconv.Itoa(o.runs)}
	flags := []string{"-brokers", strings.Join(addrs, ","), "-partitions", joinInts(r.partitions),
		"-value-size", strconv.Itoa(r.valueSize), "-records", strconv.Itoa(o.scaleRecords)}
	c := &report.Consume{Title: r.title, Brokers: len(addrs), Partitions: r.partitions, ValueSize: r.valueSize, Records: o.scaleRecords,
		Command: fmt.Sprintf("go test ./bench %s -args %s", shellQuote(args), shellQuote(flags))}
	c.Command = strings.Replace(c.Command, strings.Join(addrs, ","), "$BROKERS", 1)
	weight := s.consumeWeight(r.phase)
	if r.phase == "brokers3" {
		weight /= 2
	}
	end := s.prog.step(fmt.Sprintf("consume: %s, %d run(s)", r.title, o.runs), weight)
	testArgs := make([]string, 0, len(args)+len(flags))
	for i := 0; i < len(args); i += 2 { // go test's flags, as the test binary spells them
		testArgs = append(testArgs, "-test."+strings.TrimPrefix(args[i], "-"), args[i+1])
	}
	testArgs = append(testArgs, flags...)
	name := fmt.Sprintf("bench-%s-%d", r.phase, r.valueSize)
	child, err := s.procs.Start(name, filepath.Join(s.lay.root, "bench"), s.bins.benchTest, testArgs, nil)
	if err != nil {
		end()
		return nil, err
	}
	u, err := child.Wait(ctx)
	end()
	if err == nil && u.Err != nil {
		err = fmt.Errorf("%s failed (%v); its output ends:\n%s", name, u.Err, child.Tail(20))
	}
	if err != nil {
		return nil, err
	}
	out, err := os.ReadFile(child.Log)
	if err != nil {
		return nil, err
	}
	c.Output = string(out)
	if c.Results, err = scale.Parse(strings.NewReader(c.Output)); err != nil {
		return nil, fmt.Errorf("%s: %w", child.Log, err)
	}
	if len(c.Results.Names()) == 0 {
		return nil, fmt.Errorf("%s reported no benchmark; see %s", name, child.Log)
	}
	s.prog.logf("consume  %s: %d benchmarks, %v", r.title, len(c.Results.Names()), u.Elapsed.Round(time.Second))
	return c, nil
}

// shellQuote joins args for a shell, quoting those that need it.
func shellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " ^$|()*?[]'\"\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
