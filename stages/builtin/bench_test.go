package builtin_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/internal/shopevents"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// benchBatch is 100 records with a ~150-byte JSON value and two headers.
func benchBatch() []stages.Record {
	in := make([]stages.Record, 100)
	for i := range in {
		in[i] = rec(int64(i), fmt.Sprintf("user-%d", i%10),
			fmt.Sprintf(`{"id":%d,"status":"%s","amount":%d,"items":[{"sku":"a","n":1},{"sku":"b","n":2}],"note":"some text here"}`,
				i, []string{"paid", "open"}[i%2], i*7),
			"tenant", []string{"a", "b", "c"}[i%3], "trace", "0123456789abcdef")
	}
	return in
}

func benchStage(b *testing.B, name string, opts stages.Options) {
	st, err := stagetest.Build(name, opts, stagetest.Env(nil, nil))
	if err != nil {
		b.Fatal(err)
	}
	in := benchBatch()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := st.Process(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/record")
}

func BenchmarkFilter(b *testing.B) {
	for _, c := range []struct{ name, cond string }{
		{"offset", `offset % 2 == 0`},
		{"key", `key == "user-3"`},
		{"header", `headers["tenant"] == "a"`},
		{"json", `json?.status == "paid" && json?.amount > 100`},
		{"json-equals", `json.status == "paid"`}, // from the field's bytes (fieldEquals)
	} {
		b.Run(c.name, func(b *testing.B) { benchStage(b, "filter", stages.Options{"if": c.cond}) })
	}
}

func BenchmarkMap(b *testing.B) {
	for _, c := range []struct {
		name string
		opts stages.Options
	}{
		{"value_string", stages.Options{"value": `upper(key)`}},
		{"value_json_object", stages.Options{"value": `{"id": json.id, "total": json.amount * 2}`}},
		{"key_and_header", stages.Options{"key": `headers["tenant"]`, "headers": map[string]string{"src": `topic`}}},
	} {
		b.Run(c.name, func(b *testing.B) { benchStage(b, "map", c.opts) })
	}
}

// shopBatch is 1000 shop events of ~190 bytes, one type in four a
// purchase: the data of the comparison benchmark in bench/compare.
func shopBatch() []stages.Record {
	types := []string{"view", "cart", "purchase", "refund"}
	in := make([]stages.Record, 1000)
	for i := range in {
		in[i] = rec(int64(i), "", fmt.Sprintf(`{"id":%d,"user":"u%d","type":"%s","amount":%d.5,"currency":"EUR",`+
			`"items":[{"sku":"sku-%d","qty":%d}],"ts":"2026-12-01T03:%02d:00Z","session":"s-%08x"}`,
			i, i%100, types[i%4], i%500, i%37, i%3+1, i%60, i*7919))
	}
	return in
}

// BenchmarkShopChain runs json (require) -> filter (one type in four) ->
// map (key and a reshaped value) through the process step's chain, as the
// pipeline does: ns/record is per input record.
func BenchmarkShopChain(b *testing.B) {
	in := shopBatch()
	runChainBench(b, in, len(in)/4, stages.Options{"require": []string{"type", "user"}},
		stages.Options{"if": `json.type == "purchase"`},
		stages.Options{"key": `json.user`, "value": `toJSON({"order": json.id, "user": json.user, "amount": json.amount})`})
}

// compareBatch is 1000 events shaped like bench/compare's, one in four a
// purchase, keyed by user.
func compareBatch() []stages.Record {
	in := make([]stages.Record, 1000)
	for i := range in {
		in[i] = rec(int64(i), shopevents.Make(int64(i)).User, string(shopevents.Value(int64(i))))
	}
	return in
}

// runChainBench measures a json -> filter -> map chain over in, of which
// want records come out: ns/record and allocs/record are per input
// record.
func runChainBench(b *testing.B, in []stages.Record, want int, json, filter, mapOpts stages.Options) {
	runChainBatches(b, in, len(in), want, json, filter, mapOpts)
}

// runChainBatches is runChainBench with in run through the chain batch
// records at a time (a chain call each).
func runChainBatches(b *testing.B, in []stages.Record, batch, want int, json, filter, mapOpts stages.Options) {
	build := func(name string, opts stages.Options) process.NamedStage {
		st, err := stagetest.Build(name, opts, stagetest.Env(nil, nil))
		if err != nil {
			b.Fatal(err)
		}
		return process.NamedStage{Name: name, Stage: st}
	}
	chain := process.Chain{Log: stagetest.Env(nil, nil).Log, Stages: []process.NamedStage{
		build("json", json), build("filter", filter), build("map", mapOpts),
	}}
	ctx := context.Background()
	run := func() {
		n := 0
		for i := 0; i < len(in); i += batch {
			out, err := chain.Run(ctx, in[i:min(i+batch, len(in))])
			if err != nil {
				b.Fatal(err)
			}
			n += len(out)
		}
		if n != want {
			b.Fatalf("%d records out; want %d", n, want)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/record")
	b.ReportMetric(float64(testing.AllocsPerRun(1, run))/float64(len(in)), "allocs/record")
}

// BenchmarkShopChainSmallBatches is BenchmarkShopChainBench with the
// records in chain calls of 10, as many partitions at a moderate rate
// give: what a call allocates at once is paid per 10 records.
func BenchmarkShopChainSmallBatches(b *testing.B) {
	in := compareBatch()
	runChainBatches(b, in, 10, len(in)/4, stages.Options{},
		stages.Options{"if": `json.type == "purchase"`},
		stages.Options{"key": `json.user`,
			"value": `toJSON({"order": json.id, "user": json.user, "product": json.product, "amount": json.price * json.qty, "currency": json.currency, "ts": json.ts})`})
}

// BenchmarkShopChainBench runs exactly the stage chain of
// bench/compare/configs/fencepost-defaults.yaml (json, filter, map) over
// events shaped like bench/compare's.
func BenchmarkShopChainBench(b *testing.B) {
	in := compareBatch()
	runChainBench(b, in, len(in)/4, stages.Options{},
		stages.Options{"if": `json.type == "purchase"`},
		stages.Options{"key": `json.user`,
			"value": `toJSON({"order": json.id, "user": json.user, "product": json.product, "amount": json.price * json.qty, "currency": json.currency, "ts": json.ts})`})
}
