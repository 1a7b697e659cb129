package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/scale"
)

// The units the consumption benchmarks report (bench/consume_bench_test.go).
const (
	unitRate      = "records/s"
	unitRateJoin  = "records/s-incl-join"
	unitPerCPU    = "records/cpu-s"
	unitAllocs    = "allocs/record"
	unitMsToFirst = "ms-to-first"
	unitFetches   = "max-fetches-in-flight"
)

// kgoClient is the name element of franz-go's kgo, the reference the
// ratios are taken against.
const kgoClient = "franz-go-kgo"

// ConsumeRow is one client's medians in one consumption benchmark. A
// figure the benchmark did not report is NaN.
type ConsumeRow struct {
	Client        string // as the tables show it: "fencepost, fetch_concurrency=2"
	Name          string // the benchmark's name
	Partitions    int    // 0 when the name has none (BenchmarkConsume: 4)
	Runs          int
	RecordsPerSec float64
	InclJoin      float64 // records/s counting the group join
	PerCPU        float64 // records per CPU-second of the client's process
	Allocs        float64 // allocations per record
	MsToFirst     float64
	MaxFetches    float64
	VsKgoRate     float64 // RecordsPerSec over kgo's in the same table (NaN for kgo itself or without kgo)
	VsKgoJoin     float64 // InclJoin over kgo's
	VsKgoCPU      float64 // PerCPU over kgo's
}

// clientLabel turns the client part of a benchmark name into a label.
func clientLabel(elems []string) string {
	switch strings.Join(elems, "/") {
	case kgoClient:
		return "franz-go kgo"
	case "kafka-go-reader":
		return "kafka-go Reader"
	}
	return strings.Join(elems, ", ")
}

// ConsumeRows returns a row per client of rs's benchmarks with
// partitions=N in their name (partitions 0: the names without one), in
// the order the benchmarks ran, with ratios against kgo's row.
func ConsumeRows(rs *scale.Results, partitions int) ([]ConsumeRow, error) {
	var rows []ConsumeRow
	var kgo *ConsumeRow
	for _, name := range rs.Names() {
		elems := strings.Split(name, "/")
		if len(elems) < 2 {
			continue
		}
		client, p := elems[1:], 0
		if n, err := fmt.Sscanf(elems[1], "partitions=%d", &p); err == nil && n == 1 {
			client = elems[2:]
		}
		if p != partitions || len(client) == 0 {
			continue
		}
		med := func(unit string) float64 {
			v, ok := rs.Median(name, unit)
			if !ok {
				return math.NaN()
			}
			return v
		}
		rows = append(rows, ConsumeRow{
			Client: clientLabel(client), Name: name, Partitions: p, Runs: rs.Runs(name, unitRate),
			RecordsPerSec: med(unitRate), InclJoin: med(unitRateJoin), PerCPU: med(unitPerCPU),
			Allocs: med(unitAllocs), MsToFirst: med(unitMsToFirst), MaxFetches: med(unitFetches),
		})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no consumption benchmark with partitions=%d among %v", partitions, rs.Names())
	}
	for i := range rows {
		if strings.HasSuffix(rows[i].Name, "/"+kgoClient) {
			kgo = &rows[i]
		}
	}
	for i := range rows {
		rows[i].VsKgoRate, rows[i].VsKgoJoin, rows[i].VsKgoCPU = math.NaN(), math.NaN(), math.NaN()
		if kgo != nil && &rows[i] != kgo {
			rows[i].VsKgoRate = rows[i].RecordsPerSec / kgo.RecordsPerSec
			rows[i].VsKgoJoin = rows[i].InclJoin / kgo.InclJoin
			rows[i].VsKgoCPU = rows[i].PerCPU / kgo.PerCPU
		}
	}
	return rows, nil
}
