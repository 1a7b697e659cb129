package pipeline_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestDeadLetterIsTheSourceRecord: with a stage that transforms records
// (new key, changed value, added header, as map does) before one that
// rejects a record, the dead-letter topic holds the record as it was
// consumed (key, value, headers, timestamp) with the error and source
// headers; replayed through the same stages it is transformed once.
func TestDeadLetterIsTheSourceRecord(t *testing.T) {
	c := kafkatest.New(t, 1)
	c.CreateTopic(t, "in", 1)
	c.CreateTopic(t, "dlq", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ts := time.UnixMilli(1_700_000_000_000)
	src := &kgo.Record{Topic: "in", Key: []byte("k-bad"), Value: []byte("bad"), Timestamp: ts,
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t-1")}}}
	for _, r := range []*kgo.Record{{Topic: "in", Key: []byte("k-0"), Value: []byte("good")}, src} {
		if err := c.Client.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	transform := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		out := make([]stages.Record, len(in))
		for i, r := range in {
			r.Key = append([]byte("mapped-"), r.Key...)
			r.Value = append([]byte("mapped-"), r.Value...)
			r.Headers = append(slices.Clone(r.Headers), stages.Header{Key: "mapped", Value: []byte("yes")})
			out[i] = r
		}
		return out, nil
	})
	cfg := fastConfig(c, "g-dl-source", "in")
	cfg.DeadLetter = pipeline.DeadLetterConfig{Policy: pipeline.DeadLetterTopic, Topic: "dlq", Retries: 1, Backoff: 10 * time.Millisecond}
	r := start(t, cfg, pipeline.WithStage("map", transform), pipeline.WithStage("check", rejectValue("mapped-bad")))
	waitFor(t, 15*time.Second, "both records committed", func() bool { return committed(c, "g-dl-source", "in", 0) == 2 })
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	dl := readAll(t, c, "dlq")
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	d := dl[0]
	headers := map[string]string{}
	for _, h := range d.Headers {
		headers[h.Key] = string(h.Value)
	}
	if !bytes.Equal(d.Key, src.Key) || !bytes.Equal(d.Value, src.Value) || !d.Timestamp.Equal(ts) {
		t.Fatalf("dead letter key %q value %q at %v, want the source's %q %q at %v", d.Key, d.Value, d.Timestamp, src.Key, src.Value, ts)
	}
	want := map[string]string{"trace": "t-1", stages.HeaderErrorStage: "check", stages.HeaderSourceTopic: "in",
		stages.HeaderSourcePartition: "0", stages.HeaderSourceOffset: "1"}
	for k, v := range want {
		if headers[k] != v {
			t.Fatalf("header %s = %q, want %q (headers %q)", k, headers[k], v, headers)
		}
	}
	if _, ok := headers["mapped"]; ok {
		t.Fatalf("the dead letter carries a header the map stage added: %q", headers)
	}
	// replayed through the same stages, the record is transformed once
	replay := stages.Record{Topic: "dlq", Offset: 0, Key: d.Key, Value: d.Value}
	out, err := transform(context.Background(), []stages.Record{replay})
	if err != nil || string(out[0].Value) != "mapped-bad" || string(out[0].Key) != "mapped-k-bad" {
		t.Fatalf("replayed: %q / %q, %v; want mapped once", out[0].Key, out[0].Value, err)
	}
}
