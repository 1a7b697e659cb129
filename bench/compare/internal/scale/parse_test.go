package scale

import (
	"strings"
	"testing"
)

// output is what the consumption benchmarks print, with -count 2 and
// log lines in between.
const output = `goos: linux
goarch: amd64
pkg: github.com/fencepost-dev/fencepost/bench
cpu: AMD EPYC 7B13
BenchmarkConsume/fencepost/fetch_concurrency=1-2         	       1	 812345678 ns/op	  2000000 records/s	  1900000 records/s-incl-join	  1500000 records/cpu-s	    0.30 allocs/record	   45.00 ms-to-first	 1.000 max-fetches-in-flight
BenchmarkConsume/fencepost/fetch_concurrency=2-2         	       1	 612345678 ns/op	  4000000 records/s	  3500000 records/s-incl-join	  2000000 records/cpu-s	    0.50 allocs/record	   40.00 ms-to-first	 2.000 max-fetches-in-flight
BenchmarkConsume/kafka-go-reader-2                       	       1	1912345678 ns/op	  1000000 records/s	   900000 records/s-incl-join	   800000 records/cpu-s	    6.00 allocs/record	   30.00 ms-to-first
BenchmarkConsume/franz-go-kgo-2                          	       1	 312345678 ns/op	  6000000 records/s	  5000000 records/s-incl-join	  5000000 records/cpu-s	    0.10 allocs/record	   20.00 ms-to-first
2026/11/30 10:00:00 some log line from a client
BenchmarkConsume/fencepost/fetch_concurrency=1-2         	       1	 812345678 ns/op	  2200000 records/s	  2000000 records/s-incl-join	  1700000 records/cpu-s	    0.32 allocs/record	   44.00 ms-to-first	 1.000 max-fetches-in-flight
BenchmarkConsume/fencepost/fetch_concurrency=2-2         	       1	 612345678 ns/op	  4400000 records/s	  3600000 records/s-incl-join	  2200000 records/cpu-s	    0.52 allocs/record	   41.00 ms-to-first	 3.000 max-fetches-in-flight
BenchmarkConsumePartitions/partitions=512/franz-go-kgo-2 	       1	 312345678 ns/op	  7000000 records/s
PASS
ok  	github.com/fencepost-dev/fencepost/bench	25.1s
`

func TestParse(t *testing.T) {
	rs, err := Parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{
		"Consume/fencepost/fetch_concurrency=1", "Consume/fencepost/fetch_concurrency=2",
		"Consume/kafka-go-reader", "Consume/franz-go-kgo", "ConsumePartitions/partitions=512/franz-go-kgo",
	}
	if got := rs.Names(); strings.Join(got, " ") != strings.Join(wantNames, " ") {
		t.Errorf("names %q\nwant %q", got, wantNames)
	}
	tests := []struct {
		name, unit string
		runs       int
		median     float64
	}{
		{"Consume/fencepost/fetch_concurrency=2", "records/s", 2, 4_200_000},
		{"Consume/fencepost/fetch_concurrency=2", "records/cpu-s", 2, 2_100_000},
		{"Consume/fencepost/fetch_concurrency=2", "allocs/record", 2, 0.51},
		{"Consume/fencepost/fetch_concurrency=2", "max-fetches-in-flight", 2, 2.5},
		{"Consume/fencepost/fetch_concurrency=1", "ms-to-first", 2, 44.5},
		{"Consume/kafka-go-reader", "records/s", 1, 1_000_000},
		{"Consume/franz-go-kgo", "ns/op", 1, 312345678}, // as written, not tidied to sec/op
		{"ConsumePartitions/partitions=512/franz-go-kgo", "records/s", 1, 7_000_000},
	}
	for _, tc := range tests {
		if n := rs.Runs(tc.name, tc.unit); n != tc.runs {
			t.Errorf("%s %s: %d runs, want %d", tc.name, tc.unit, n, tc.runs)
		}
		got, ok := rs.Median(tc.name, tc.unit)
		if !ok || got < tc.median*0.999999 || got > tc.median*1.000001 {
			t.Errorf("%s %s: median %v (%v), want %v", tc.name, tc.unit, got, ok, tc.median)
		}
	}
	if _, ok := rs.Median("Consume/kafka-go-reader", "max-fetches-in-flight"); ok {
		t.Error("a unit the reader never reported has a median")
	}
}

func TestParseReportsMalformedLines(t *testing.T) {
	_, err := Parse(strings.NewReader("BenchmarkX-2   \t  1\t 12 ns/op 7\n"))
	if err == nil {
		t.Error("a value without a unit parsed without error")
	}
}
