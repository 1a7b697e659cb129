// Package scale runs the main module's consumption benchmarks
// (bench/consume_bench_test.go) against a broker of ours and reads their
// output, in the Go benchmark format, with golang.org/x/perf/benchfmt.
package scale

import (
	"bytes"
	"errors"
	"io"

	"golang.org/x/perf/benchfmt"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/stats"
)

// Results are the values a benchmark run reported, by benchmark name
// and unit, in the order the names first appeared.
type Results struct {
	names  []string
	values map[string]map[string][]float64
}

// Parse reads benchmark output (go test -bench, possibly with -count >
// 1 and interleaved log lines). A name is kept without the "Benchmark"
// prefix and the GOMAXPROCS suffix: "ConsumePartitions/partitions=64/franz-go-kgo".
// Each line of a repeated benchmark adds one value per unit. A line in
// the format that does not parse is an error; other text is skipped.
func Parse(r io.Reader) (*Results, error) {
	rs := &Results{values: map[string]map[string][]float64{}}
	br := benchfmt.NewReader(r, "benchmark output")
	var errs []error
	for br.Scan() {
		switch rec := br.Result().(type) {
		case *benchfmt.Result:
			name := shortName(rec.Name)
			units, ok := rs.values[name]
			if !ok {
				units = map[string][]float64{}
				rs.values[name] = units
				rs.names = append(rs.names, name)
			}
			for _, v := range rec.Values {
				unit, val := v.Unit, v.Value
				if v.OrigUnit != "" { // keep the unit as the benchmark wrote it
					unit, val = v.OrigUnit, v.OrigValue
				}
				units[unit] = append(units[unit], val)
			}
		case *benchfmt.SyntaxError:
			errs = append(errs, rec)
		}
	}
	if err := br.Err(); err != nil {
		errs = append(errs, err)
	}
	return rs, errors.Join(errs...)
}

// shortName drops the GOMAXPROCS suffix ("-2") from a benchmark name.
func shortName(n benchfmt.Name) string {
	base, parts := n.Parts()
	var b bytes.Buffer
	b.Write(base)
	for _, p := range parts {
		if len(p) > 0 && p[0] == '-' {
			continue
		}
		b.Write(p)
	}
	return b.String()
}

// Names lists the benchmarks in the order they first appeared.
func (rs *Results) Names() []string { return append([]string(nil), rs.names...) }

// Values returns the values name reported in unit, one per run.
func (rs *Results) Values(name, unit string) []float64 { return rs.values[name][unit] }

// Median returns the median of name's values in unit; ok is false if it
// reported none.
func (rs *Results) Median(name, unit string) (median float64, ok bool) {
	vs := rs.Values(name, unit)
	if len(vs) == 0 {
		return 0, false
	}
	return stats.Median(vs), true
}

// Runs returns how many values name reported in unit.
func (rs *Results) Runs(name, unit string) int { return len(rs.Values(name, unit)) }
