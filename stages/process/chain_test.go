package process

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

func records(offsets ...int64) []stages.Record {
	out := make([]stages.Record, len(offsets))
	for i, o := range offsets {
		out[i] = stages.Record{Topic: "t", Offset: o}
	}
	return out
}

// TestChainIsolation: how failures are isolated, retried and ordered.
func TestChainIsolation(t *testing.T) {
	type want struct {
		out     []int64 // offsets out of the chain, in order
		dead    []int64 // offsets dead-lettered
		calls   int32   // stage calls for the failing record
		stopped int64   // offset of a stop, -1 for none
	}
	flaky := errors.New("flaky")
	tests := []struct {
		name  string
		stage func(calls *atomic.Int32) stages.Stage
		stop  bool
		want  want
	}{
		{
			// record 1 fails in the batch and on its first retry; the
			// output keeps input order
			name: "record errors then success on retry keeps order",
			stage: func(calls *atomic.Int32) stages.Stage {
				return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
					var re stages.RecordErrors
					for i, r := range in {
						if r.Offset == 1 && calls.Add(1) <= 2 {
							re.Fail(i, flaky)
							continue
						}
						re.Emit(i, r)
					}
					if re.Failed() {
						return nil, &re
					}
					return re.Out, nil
				})
			},
			want: want{out: []int64{0, 1, 2, 3}, calls: 3, stopped: -1},
		},
		{
			name: "a plain batch error runs records alone, in order",
			stage: func(calls *atomic.Int32) stages.Stage {
				return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
					for _, r := range in {
						if r.Offset == 2 {
							calls.Add(1)
							return nil, errors.New("bad record 2")
						}
					}
					return in, nil
				})
			},
			want: want{out: []int64{0, 1, 3}, dead: []int64{2}, calls: 4, stopped: -1}, // batch, alone, 2 retries
		},
		{
			name: "a permanent error is not retried",
			stage: func(calls *atomic.Int32) stages.Stage {
				return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
					var re stages.RecordErrors
					for i, r := range in {
						if r.Offset == 3 {
							calls.Add(1)
							re.Fail(i, stages.Permanent(errors.New("invalid")))
							continue
						}
						re.Emit(i, r)
					}
					if re.Failed() {
						return nil, &re
					}
					return re.Out, nil
				})
			},
			want: want{out: []int64{0, 1, 2}, dead: []int64{3}, calls: 1, stopped: -1},
		},
		{
			name: "a panic is isolated to its record",
			stage: func(calls *atomic.Int32) stages.Stage {
				return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
					for _, r := range in {
						if r.Offset == 0 {
							calls.Add(1)
							panic("boom")
						}
					}
					return in, nil
				})
			},
			want: want{out: []int64{1, 2, 3}, dead: []int64{0}, calls: 4, stopped: -1},
		},
		{
			// the records before the failing one finish; the ones after
			// it do not run
			name: "stop policy stops at the failing record",
			stop: true,
			stage: func(calls *atomic.Int32) stages.Stage {
				return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
					for _, r := range in {
						if r.Offset == 2 {
							calls.Add(1)
							return nil, errors.New("bad")
						}
					}
					return in, nil
				})
			},
			want: want{out: []int64{0, 1}, calls: 4, stopped: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			sink := &memSink{}
			c := Chain{Stages: []NamedStage{{Name: "s", Stage: tt.stage(&calls)}},
				Policy: FailurePolicy{Retries: 2, Backoff: time.Millisecond, Stop: tt.stop, Sink: sink}}
			c.Log = nopLog()
			out, err := c.Run(context.Background(), records(0, 1, 2, 3))
			var stop *StoppedError
			switch {
			case tt.want.stopped >= 0:
				if !errors.As(err, &stop) || stop.Offset != tt.want.stopped {
					t.Fatalf("err %v, want a stop at %d", err, tt.want.stopped)
				}
			case err != nil:
				t.Fatal(err)
			}
			if got := offsets(out); !slices.Equal(got, tt.want.out) {
				t.Fatalf("out %v, want %v", got, tt.want.out)
			}
			if got := offsets(sink.got); !slices.Equal(got, tt.want.dead) {
				t.Fatalf("dead letters %v, want %v", got, tt.want.dead)
			}
			for _, d := range sink.got {
				if v, ok := d.Header(HeaderStage); !ok || string(v) != "s" {
					t.Fatalf("dead letter without its stage header: %+v", d.Headers)
				}
			}
			if calls.Load() != tt.want.calls {
				t.Fatalf("the failing record was tried %d times, want %d", calls.Load(), tt.want.calls)
			}
		})
	}
}

type memSink struct{ got []stages.Record }

func (m *memSink) Send(_ context.Context, rs []stages.Record) error {
	m.got = append(m.got, rs...)
	return nil
}

func offsets(rs []stages.Record) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Offset)
	}
	return out
}
