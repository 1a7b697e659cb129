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
