package builtin_test

import (
	"context"
	"fmt"
	"testing"

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
