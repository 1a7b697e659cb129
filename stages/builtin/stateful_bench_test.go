package builtin_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/fencepost-dev/fencepost/internal/shopevents"
	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// nullChangelog takes the changelog writes of a benchmark: it counts
// them and keeps nothing.
type nullChangelog struct {
	records, bytes int64
}

func (c *nullChangelog) Write(_ context.Context, _ string, _ int32, recs []stages.Record) (int64, error) {
	for _, r := range recs {
		c.records++
		c.bytes += int64(len(r.Key) + len(r.Value))
	}
	return c.records, nil
}

func (c *nullChangelog) Read(context.Context, string, int32, int64) (state.Chunk, error) {
	return state.Chunk{}, nil
}

// benchStateful runs shop events shaped like the comparison benchmark's
// (keyed by user, 2000 users, one second apart) through a stateful
// stage in units of batch records, each unit as the pipeline runs it
// (stores in memory, with the default block cache of 64 MiB):
// the partition's stores readied (state.Manager.Begin), the stage's
// Process, and the unit's changes written to the changelog and applied
// to the store in memory (End). Each round is the next 1000 records of
// the stream: offsets and timestamps go on, so windows close as they
// would (after 10000 records the events repeat, 10000 s later).
// cpu-ns/record is the process's CPU time (every thread: the GC's,
// pebble's) per record, which a loaded machine inflates less than the
// wall time of ns/record. ns/record and allocs/record are per input record; out/record
// is the output records, cl-records/record the changelog records
// (latest per key and unit) and B/cl-record their size (key and value).
func benchStateful(b *testing.B, name string, opts stages.Options, batch int) {
	st, err := stagetest.Build(name, opts, stagetest.Env(nil, nil))
	if err != nil {
		b.Fatal(err)
	}
	cl := &nullChangelog{}
	cache := pebble.NewCache(64 << 20) // the pipeline's default state.cache_bytes
	defer cache.Unref()
	m := state.NewManager(state.Config{Group: "bench", Stores: st.(stages.Stateful).Stores(),
		Storage: &state.Storage{Memory: true, Cache: cache}, Writer: cl, Reader: cl})
	defer m.Close()
	// 10 rounds of distinct events, then again with time gone on
	const round = 1000
	stream := make([]stages.Record, 10*round)
	for i := range stream {
		stream[i] = rec(int64(i), shopevents.Make(int64(i)).User, string(shopevents.Value(int64(i))))
	}
	recs := make([]stages.Record, round)
	tp := offsetstore.TopicPartition{Topic: "in", Partition: 0}
	ctx := context.Background()
	var rounds, outs, inputs int64
	run := func() {
		from := rounds % 10 * round
		shift := rounds / 10 * int64(len(stream))
		rounds++
		for i := range recs {
			r := stream[from+int64(i)]
			r.Offset += shift
			r.Timestamp = r.Timestamp.Add(time.Duration(shift) * time.Second)
			recs[i] = r
		}
		for i := 0; i < len(recs); i += batch {
			uctx, err := m.Begin(ctx, tp, state.Incarnation{Generation: 1})
			if err != nil {
				b.Fatal(err)
			}
			out, err := st.Process(uctx, recs[i:min(i+batch, len(recs))])
			if err != nil {
				b.Fatal(err)
			}
			outs += int64(len(out))
			if err := m.End(uctx, tp, true); err != nil {
				b.Fatal(err)
			}
		}
		inputs += int64(len(recs))
	}
	for range 10 { // the state a long run has: keys and windows open
		run()
	}
	outs, inputs, cl.records, cl.bytes = 0, 0, 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		run()
	}
	if cpu := cpuTime() - cpu; cpu > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N*round), "cpu-ns/record")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*round), "ns/record")
	b.ReportMetric(float64(outs)/float64(inputs), "out/record")
	b.ReportMetric(float64(cl.records)/float64(inputs), "cl-records/record")
	if cl.records > 0 {
		b.ReportMetric(float64(cl.bytes)/float64(cl.records), "B/cl-record")
	}
	b.ReportMetric(testing.AllocsPerRun(1, run)/round, "allocs/record")
}

// BenchmarkAggregate: aggregate over the shop events (2000 users, 1000
// records a round), in units of 100 and 1000 records.
func BenchmarkAggregate(b *testing.B) {
	three := map[string]string{"orders": "count()", "revenue": "sum(json.price * json.qty)", "biggest": "max(json.price)"}
	all := map[string]string{"orders": "count()", "revenue": "sum(json.price * json.qty)", "biggest": "max(json.price)",
		"smallest": "min(json.price)", "average": "avg(json.price)", "first_order": "first(json.id)", "last_order": "last(json.id)"}
	for _, c := range []struct {
		name string
		opts stages.Options
	}{
		{"running", stages.Options{"fields": three}},
		{"running_7_fields", stages.Options{"fields": all}},
		{"running_by_json_user", stages.Options{"fields": three, "key": "json.user", "repartition": false}},
		{"tumbling_1m_on_close", stages.Options{"fields": three, "window": map[string]string{"type": "tumbling", "size": "1m"}}},
		{"tumbling_1m_on_update", stages.Options{"fields": three, "window": map[string]string{"type": "tumbling", "size": "1m"}, "emit": "on_update"}},
		{"hopping_5m_1m_on_close", stages.Options{"fields": three, "window": map[string]string{"type": "hopping", "size": "5m", "advance": "1m"}}},
		{"session_30m_on_close", stages.Options{"fields": three, "window": map[string]string{"type": "session", "gap": "30m"}}},
	} {
		for _, batch := range []int{100, 1000} {
			b.Run(c.name+"/batch="+strconv.Itoa(batch), func(b *testing.B) { benchStateful(b, "aggregate", c.opts, batch) })
		}
	}
}

// BenchmarkDedupe: dedupe of the shop events by user within 10
// minutes, and by id within an hour (nothing dropped, an entry per
// record).
func BenchmarkDedupe(b *testing.B) {
	for _, c := range []struct {
		name string
		opts stages.Options
	}{
		{"user_10m", stages.Options{"within": 10 * time.Minute}},
		{"id_1h", stages.Options{"within": time.Hour, "key": "json.id", "repartition": false}},
	} {
		for _, batch := range []int{100, 1000} {
			b.Run(c.name+"/batch="+strconv.Itoa(batch), func(b *testing.B) { benchStateful(b, "dedupe", c.opts, batch) })
		}
	}
}
