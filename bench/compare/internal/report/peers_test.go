package report

import (
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/events"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"
)

func TestPipelineTitle(t *testing.T) {
	r := []pipebench.Result{run(time.Second, time.Second, 1, events.Correctness{})}
	v := func(e pipebench.Engine, runs []pipebench.Result) PipelineVariant {
		return PipelineVariant{Variant: pipebench.Variant{Engine: e}, Runs: runs}
	}
	tests := []struct {
		variants []PipelineVariant
		want     string
	}{
		{[]PipelineVariant{v(pipebench.Fencepost, r), v(pipebench.Fencepost, r), v(pipebench.Benthos, r), v(pipebench.Benthos, r)},
			"fencepost against Benthos v4.27.0"},
		{[]PipelineVariant{v(pipebench.Fencepost, r), v(pipebench.Benthos, r), v(pipebench.KafkaStreams, r), v(pipebench.KafkaStreams, r)},
			"fencepost against Benthos v4.27.0 and Kafka Streams 4.1.1"},
		{[]PipelineVariant{v(pipebench.KafkaStreams, r), v(pipebench.KafkaStreams, r)}, "Kafka Streams 4.1.1"},
		{[]PipelineVariant{v(pipebench.Fencepost, r), v(pipebench.Benthos, nil)}, "fencepost"},
	}
	for _, tc := range tests {
		if got := pipelineTitle(&Pipeline{Variants: tc.variants}); got != tc.want {
			t.Errorf("pipelineTitle = %q, want %q", got, tc.want)
		}
	}
}

func TestExactlyOncePairsWithItsOwnEngine(t *testing.T) {
	run := []pipebench.Result{{Records: 10, Elapsed: time.Second, CPU: time.Second}}
	p := &Pipeline{Variants: []PipelineVariant{
		{Variant: pipebench.Variant{Name: "fencepost, defaults"}, Runs: run},
		{Variant: pipebench.Variant{Name: "fencepost, exactly-once", ExactlyOnce: true, Baseline: "fencepost, defaults"}, Runs: run},
		{Variant: pipebench.Variant{Name: "Kafka Streams, tuned, at_least_once", Engine: pipebench.KafkaStreams}, Runs: run},
		{Variant: pipebench.Variant{Name: "Kafka Streams, tuned, exactly_once_v2", Engine: pipebench.KafkaStreams, ExactlyOnce: true, Baseline: "Kafka Streams, tuned, at_least_once"}, Runs: run},
		{Variant: pipebench.Variant{Name: "Kafka Streams, exactly_once_v2", Engine: pipebench.KafkaStreams, ExactlyOnce: true, Baseline: "Kafka Streams, at_least_once"}, Runs: run}, // its baseline did not run
	}}
	got := map[string]string{}
	for _, pr := range pipelinePairs(p) {
		got[pr.name] = pr.baseName
	}
	want := map[string]string{"fencepost, exactly-once": "fencepost, defaults", "Kafka Streams, tuned, exactly_once_v2": "Kafka Streams, tuned, at_least_once"}
	if len(got) != len(want) {
		t.Fatalf("pairs %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s paired with %q, want %q", k, got[k], v)
		}
	}
}
