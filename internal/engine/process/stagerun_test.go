package process

import (
	"context"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/stages"
)

// TestChainReportsStageRuns: OnStage tells, per stage, how many records
// went in and out, which a filter dropped (by source offset, whatever the
// order), and which failed and were dead-lettered.
func TestChainReportsStageRuns(t *testing.T) {
	keep := func(keep func(int64) bool) stages.Stage {
		return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
			var out []stages.Record
			for _, r := range in {
				if keep(r.Offset) {
					out = append(out, r)
				}
			}
			return out, nil
		})
	}
	split := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		var out []stages.Record
		for _, r := range in {
			out = append(out, r, r)
		}
		return out, nil
	})
	reverse := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		out := make([]stages.Record, 0, len(in))
		for i := len(in) - 1; i >= 0; i-- {
			if in[i].Offset != 1 {
				out = append(out, in[i])
			}
		}
		return out, nil
	})
	odd := func(o int64) bool { return o%2 == 1 }
	tests := []struct {
		name   string
		stages []stages.Stage
		stop   bool
		want   []StageRun // Duration not compared
	}{
		{"a filter drops", []stages.Stage{keep(odd)}, false,
			[]StageRun{{Stage: "s0", In: 6, Out: 3, Dropped: 3}}},
		{"a split stage drops nothing; the next sees twice as many", []stages.Stage{split, keep(odd)}, false,
			[]StageRun{{Stage: "s0", In: 6, Out: 12}, {Stage: "s1", In: 12, Out: 6, Dropped: 6}}},
		{"out of order output", []stages.Stage{reverse}, false,
			[]StageRun{{Stage: "s0", In: 6, Out: 5, Dropped: 1}}},
		{"dead letters are failures, not drops", []stages.Stage{fails(2, 4)}, false,
			[]StageRun{{Stage: "s0", In: 6, Out: 4, Failed: 2, DeadLettered: 2}}},
		{"a stop counts the failure; the records after it are neither out nor dropped", []stages.Stage{keep(odd), fails(3)}, true,
			[]StageRun{{Stage: "s0", In: 6, Out: 3, Dropped: 3}, {Stage: "s1", In: 3, Out: 1, Failed: 1}}},
		{"a stage the run does not reach reports nothing", []stages.Stage{keep(func(int64) bool { return false }), split}, false,
			[]StageRun{{Stage: "s0", In: 6, Out: 0, Dropped: 6}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []StageRun
			c := Chain{Log: nopLog(), Policy: FailurePolicy{Stop: tt.stop, Sink: &memSink{}, Backoff: time.Millisecond},
				OnStage: func(r StageRun) {
					if r.Duration <= 0 {
						t.Errorf("stage %s: duration %v", r.Stage, r.Duration)
					}
					r.Duration = 0
					got = append(got, r)
				}}
			for i, s := range tt.stages {
				c.Stages = append(c.Stages, NamedStage{Name: "s" + string(rune('0'+i)), Stage: s})
			}
			_, _ = c.Run(context.Background(), records(0, 1, 2, 3, 4, 5))
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("stage %d: got %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestWithoutOutputProperty: withoutOutput counts, for any input and
// output (in or out of offset order, duplicates, an output that is the
// input itself or starts with it, a prefix of it), the input records
// whose offset no output record carries.
func TestWithoutOutputProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		offsets := rapid.SliceOfN(rapid.Int64Range(0, 20), 0, 30).Draw(t, "in")
		in := make([]stages.Record, len(offsets))
		for i, o := range offsets {
			in[i] = stages.Record{Offset: o}
		}
		var out []stages.Record
		switch shape := rapid.IntRange(0, 3).Draw(t, "shape"); shape {
		case 0: // the input itself
			out = in
		case 1: // a prefix of the input, sharing its memory
			out = in[:rapid.IntRange(0, len(in)).Draw(t, "prefix")]
		case 2: // the input's memory, then more records after it
			out = append(in[:len(in):len(in)], stages.Record{Offset: rapid.Int64Range(0, 20).Draw(t, "extra")})
		default: // records of its own
			for _, o := range rapid.SliceOfN(rapid.Int64Range(0, 20), 0, 30).Draw(t, "out") {
				out = append(out, stages.Record{Offset: o})
			}
		}
		want := 0
		for _, r := range in {
			if !slices.ContainsFunc(out, func(o stages.Record) bool { return o.Offset == r.Offset }) {
				want++
			}
		}
		if got := withoutOutput(in, out); got != want {
			t.Fatalf("withoutOutput(%v, %d records) = %d, want %d", offsets, len(out), got, want)
		}
	})
}
