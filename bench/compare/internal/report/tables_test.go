package report

import (
	"math"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/scale"
)

// benchOutput is consumption benchmark output as the suite gets it:
// BenchmarkConsume with -count 3 and BenchmarkConsumePartitions at two
// partition counts, with a log line in between.
const benchOutput = `goos: linux
goarch: amd64
pkg: github.com/fencepost-dev/fencepost/bench
BenchmarkConsume/fencepost/fetch_concurrency=1-2 	1	812345678 ns/op	2000000 records/s	1900000 records/s-incl-join	1500000 records/cpu-s	0.30 allocs/record	45.00 ms-to-first	1.000 max-fetches-in-flight
BenchmarkConsume/fencepost/default-2 	1	612345678 ns/op	4000000 records/s	3500000 records/s-incl-join	2000000 records/cpu-s	0.50 allocs/record	40.00 ms-to-first	2.000 max-fetches-in-flight
BenchmarkConsume/kafka-go-reader-2               	1	1912345678 ns/op	1000000 records/s	900000 records/s-incl-join	800000 records/cpu-s	6.00 allocs/record	30.00 ms-to-first
BenchmarkConsume/franz-go-kgo-2                  	1	312345678 ns/op	5000000 records/s	5000000 records/s-incl-join	4000000 records/cpu-s	0.10 allocs/record	20.00 ms-to-first
BenchmarkConsume/fencepost/fetch_concurrency=1-2 	1	812345678 ns/op	2200000 records/s	2000000 records/s-incl-join	1700000 records/cpu-s	0.32 allocs/record	44.00 ms-to-first	1.000 max-fetches-in-flight
BenchmarkConsume/fencepost/default-2 	1	612345678 ns/op	4400000 records/s	3600000 records/s-incl-join	2200000 records/cpu-s	0.52 allocs/record	41.00 ms-to-first	2.000 max-fetches-in-flight
client log: rebalanced
BenchmarkConsume/kafka-go-reader-2               	1	1912345678 ns/op	1100000 records/s	950000 records/s-incl-join	900000 records/cpu-s	6.20 allocs/record	31.00 ms-to-first
BenchmarkConsume/franz-go-kgo-2                  	1	312345678 ns/op	6000000 records/s	5500000 records/s-incl-join	4400000 records/cpu-s	0.12 allocs/record	21.00 ms-to-first
BenchmarkConsume/fencepost/fetch_concurrency=1-2 	1	812345678 ns/op	2100000 records/s	1950000 records/s-incl-join	1600000 records/cpu-s	0.31 allocs/record	46.00 ms-to-first	1.000 max-fetches-in-flight
BenchmarkConsume/fencepost/default-2 	1	612345678 ns/op	3000000 records/s	3000000 records/s-incl-join	2100000 records/cpu-s	0.51 allocs/record	42.00 ms-to-first	3.000 max-fetches-in-flight
BenchmarkConsume/kafka-go-reader-2               	1	1912345678 ns/op	1200000 records/s	980000 records/s-incl-join	850000 records/cpu-s	6.10 allocs/record	32.00 ms-to-first
BenchmarkConsume/franz-go-kgo-2                  	1	312345678 ns/op	5500000 records/s	5200000 records/s-incl-join	4200000 records/cpu-s	0.11 allocs/record	22.00 ms-to-first
BenchmarkConsumePartitions/partitions=64/fencepost/default-2 	1	1 ns/op	6000000 records/s	1 records/s-incl-join	3000000 records/cpu-s	0.4 allocs/record	1 ms-to-first	2 max-fetches-in-flight
BenchmarkConsumePartitions/partitions=64/franz-go-kgo-2                  	1	1 ns/op	8000000 records/s	1 records/s-incl-join	6000000 records/cpu-s	0.2 allocs/record	1 ms-to-first
BenchmarkConsumePartitions/partitions=512/fencepost/default-2 	1	1 ns/op	7000000 records/s	1 records/s-incl-join	3500000 records/cpu-s	0.4 allocs/record	1 ms-to-first	2 max-fetches-in-flight
PASS
`

func TestConsumeRows(t *testing.T) {
	rs, err := scale.Parse(strings.NewReader(benchOutput))
	if err != nil {
		t.Fatal(err)
	}
	nan := math.NaN()
	tests := []struct {
		name       string
		partitions int
		want       []ConsumeRow
	}{
		{"BenchmarkConsume: four clients, medians of three runs", 0, []ConsumeRow{
			{Client: "fencepost, fetch_concurrency=1", Runs: 3, RecordsPerSec: 2_100_000, InclJoin: 1_950_000, PerCPU: 1_600_000, Allocs: 0.31, MsToFirst: 45, MaxFetches: 1,
				VsKgoRate: 2.1 / 5.5, VsKgoJoin: 1.95 / 5.2, VsKgoCPU: 1.6 / 4.2},
			{Client: "fencepost, default", Runs: 3, RecordsPerSec: 4_000_000, InclJoin: 3_500_000, PerCPU: 2_100_000, Allocs: 0.51, MsToFirst: 41, MaxFetches: 2,
				VsKgoRate: 4.0 / 5.5, VsKgoJoin: 3.5 / 5.2, VsKgoCPU: 2.1 / 4.2},
			{Client: "kafka-go Reader", Runs: 3, RecordsPerSec: 1_100_000, InclJoin: 950_000, PerCPU: 850_000, Allocs: 6.1, MsToFirst: 31, MaxFetches: nan,
				VsKgoRate: 1.1 / 5.5, VsKgoJoin: 0.95 / 5.2, VsKgoCPU: 0.85 / 4.2},
			{Client: "franz-go kgo", Runs: 3, RecordsPerSec: 5_500_000, InclJoin: 5_200_000, PerCPU: 4_200_000, Allocs: 0.11, MsToFirst: 21, MaxFetches: nan,
				VsKgoRate: nan, VsKgoJoin: nan, VsKgoCPU: nan},
		}},
		{"64 partitions: fencepost against kgo", 64, []ConsumeRow{
			{Client: "fencepost, default", Partitions: 64, Runs: 1, RecordsPerSec: 6e6, InclJoin: 1, PerCPU: 3e6, Allocs: 0.4, MsToFirst: 1, MaxFetches: 2, VsKgoRate: 0.75, VsKgoJoin: 1, VsKgoCPU: 0.5},
			{Client: "franz-go kgo", Partitions: 64, Runs: 1, RecordsPerSec: 8e6, InclJoin: 1, PerCPU: 6e6, Allocs: 0.2, MsToFirst: 1, MaxFetches: nan, VsKgoRate: nan, VsKgoJoin: nan, VsKgoCPU: nan},
		}},
		{"512 partitions without kgo: no ratios", 512, []ConsumeRow{
			{Client: "fencepost, default", Partitions: 512, Runs: 1, RecordsPerSec: 7e6, InclJoin: 1, PerCPU: 3.5e6, Allocs: 0.4, MsToFirst: 1, MaxFetches: 2, VsKgoRate: nan, VsKgoJoin: nan, VsKgoCPU: nan},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := ConsumeRows(rs, tc.partitions)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != len(tc.want) {
				t.Fatalf("%d rows, want %d: %+v", len(rows), len(tc.want), rows)
			}
			for i, got := range rows {
				want := tc.want[i]
				if got.Client != want.Client || got.Partitions != want.Partitions || got.Runs != want.Runs {
					t.Errorf("row %d: %q partitions=%d runs=%d, want %q %d %d", i, got.Client, got.Partitions, got.Runs, want.Client, want.Partitions, want.Runs)
				}
				figs := []struct {
					what      string
					got, want float64
				}{
					{"records/s", got.RecordsPerSec, want.RecordsPerSec}, {"incl join", got.InclJoin, want.InclJoin},
					{"per CPU", got.PerCPU, want.PerCPU}, {"allocs", got.Allocs, want.Allocs},
					{"ms to first", got.MsToFirst, want.MsToFirst}, {"fetches", got.MaxFetches, want.MaxFetches},
					{"vs kgo rate", got.VsKgoRate, want.VsKgoRate}, {"vs kgo incl. join", got.VsKgoJoin, want.VsKgoJoin},
					{"vs kgo CPU", got.VsKgoCPU, want.VsKgoCPU},
				}
				for _, f := range figs {
					if !sameFloat(f.got, f.want) {
						t.Errorf("%s %s: %v, want %v", got.Client, f.what, f.got, f.want)
					}
				}
			}
		})
	}
	if _, err := ConsumeRows(rs, 4); err == nil {
		t.Error("no error for a partition count the output does not have")
	}
}

func sameFloat(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b))
}
