package stagetest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

func recs(topic string, partition int32, offsets ...int64) []stages.Record {
	out := make([]stages.Record, len(offsets))
	for i, o := range offsets {
		out[i] = stages.Record{Topic: topic, Partition: partition, Offset: o, Value: []byte(strconv.FormatInt(o, 10))}
	}
	return out
}

func offsetsOf(rs []stages.Record) []int64 {
	out := []int64{}
	for _, r := range rs {
		out = append(out, r.Offset)
	}
	return out
}

// recorder is a pass-through stage that records the offsets of each call.
type recorder struct {
	mu    sync.Mutex
	calls [][]int64
}

func (s *recorder) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, offsetsOf(in))
	return in, nil
}

// flaky fails the record at offset bad its first failures attempts
// (counting every call that contains it) and panics on offset boom.
type flaky struct {
	bad, boom int64
	failures  int
	mu        sync.Mutex
	attempts  int // calls that contained bad
}

func (s *flaky) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	for _, r := range in {
		if r.Offset == s.boom {
			panic(fmt.Sprintf("cannot handle offset %d", r.Offset))
		}
		if r.Offset == s.bad {
			s.mu.Lock()
			s.attempts++
			fail := s.attempts <= s.failures
			s.mu.Unlock()
			if fail {
				return nil, errors.New("transient failure")
			}
		}
	}
	return in, nil
}

func TestRunBatchesPerPartitionInOffsetOrder(t *testing.T) {
	in := append(recs("b", 1, 9, 7, 8), recs("a", 0, 3, 1, 2)...)
	in = append(in, recs("b", 0, 5)...)
	rec := &recorder{}
	res := stagetest.Run(t, in, stagetest.NamedStage{Name: "rec", Stage: rec})

	calls := slices.Clone(rec.calls)
	slices.SortFunc(calls, func(x, y []int64) int { return int(x[0] - y[0]) })
	want := [][]int64{{1, 2, 3}, {5}, {7, 8, 9}}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("stage calls %v, want one sorted batch per partition %v", calls, want)
	}
	if got := offsetsOf(res.Outputs); !slices.Equal(got, []int64{1, 2, 3, 5, 7, 8, 9}) {
		t.Errorf("outputs %v, want partitions in topic, partition order", got)
	}
	wantMarks := map[stagetest.Partition]int64{{Topic: "a", Partition: 0}: 4, {Topic: "b", Partition: 0}: 6, {Topic: "b", Partition: 1}: 10}
	if fmt.Sprint(res.Marks) != fmt.Sprint(wantMarks) {
		t.Errorf("marks %v, want %v", res.Marks, wantMarks)
	}
	if len(res.Stopped) != 0 || len(res.DeadLetters) != 0 || len(res.Mutated) != 0 {
		t.Errorf("unexpected stops %v, dead letters %v or mutations %v", res.Stopped, res.DeadLetters, res.Mutated)
	}
}

func TestRunFailures(t *testing.T) {
	tests := []struct {
		name     string
		stage    *flaky
		policy   stagetest.Policy
		out      []int64 // offsets out of the last stage
		dead     []int64
		mark     int64
		stopped  bool
		attempts int // calls containing the bad record
		msg      string
	}{
		{name: "panic is isolated to its record", stage: &flaky{bad: -1, boom: 12},
			out: []int64{10, 11, 13}, dead: []int64{12}, mark: 14, msg: "stage panicked: cannot handle offset 12"},
		{name: "retry succeeds", stage: &flaky{bad: 11, boom: -1, failures: 3},
			policy: stagetest.Policy{Retries: 3, Backoff: time.Millisecond},
			// the batch call, the call alone and the 1st retry fail; the
			// 2nd retry passes, so the record keeps its place
			out: []int64{10, 11, 12, 13}, mark: 14, attempts: 4},
		{name: "retries exhausted: dead letter", stage: &flaky{bad: 11, boom: -1, failures: 100},
			policy: stagetest.Policy{Retries: 2, Backoff: time.Millisecond},
			out:    []int64{10, 12, 13}, dead: []int64{11}, mark: 14, attempts: 4, msg: "transient failure"},
		// the records before the failed one finish every stage (the mark
		// covers them), nothing from it on runs further
		{name: "stop policy: marks stop at the failed record", stage: &flaky{bad: 12, boom: -1, failures: 100},
			policy: stagetest.Policy{Retries: 1, Backoff: time.Millisecond, Stop: true},
			out:    []int64{10, 11}, mark: 12, stopped: true, attempts: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			after := &recorder{}
			res := stagetest.Runner{Policy: tc.policy}.Run(t, recs("t", 0, 10, 11, 12, 13),
				stagetest.NamedStage{Name: "flaky", Stage: tc.stage}, stagetest.NamedStage{Name: "after", Stage: after})
			if got := offsetsOf(res.Outputs); !slices.Equal(got, tc.out) && len(got)+len(tc.out) > 0 {
				t.Errorf("outputs %v, want %v", got, tc.out)
			}
			if got := offsetsOf(res.DeadLetters); !slices.Equal(got, tc.dead) && len(got)+len(tc.dead) > 0 {
				t.Errorf("dead letters %v, want %v", got, tc.dead)
			}
			tp := stagetest.Partition{Topic: "t"}
			if res.Marks[tp] != tc.mark {
				t.Errorf("mark %d, want %d", res.Marks[tp], tc.mark)
			}
			var stop *stages.StoppedError
			if got := errors.As(res.Stopped[tp], &stop); got != tc.stopped {
				t.Errorf("stopped: %v, want stopped %v", res.Stopped[tp], tc.stopped)
			} else if got && (stop.Offset != 12 || stop.Stage != "flaky") {
				t.Errorf("stopped at %d by %q, want 12 by flaky", stop.Offset, stop.Stage)
			}
			if tc.stage.attempts != tc.attempts {
				t.Errorf("%d attempts at the failing record, want %d", tc.stage.attempts, tc.attempts)
			}
			if tc.stopped {
				var seen []int64
				for _, c := range after.calls {
					seen = append(seen, c...)
				}
				if !slices.Equal(seen, []int64{10, 11}) {
					t.Errorf("the next stage saw %v, want exactly the records before the stop [10 11]", after.calls)
				}
			}
			for _, dl := range res.DeadLetters {
				want := map[string]string{
					stages.HeaderErrorStage: "flaky", stages.HeaderErrorMessage: tc.msg, stages.HeaderSourceTopic: "t",
					stages.HeaderSourcePartition: "0", stages.HeaderSourceOffset: strconv.FormatInt(dl.Offset, 10),
				}
				for h, v := range want {
					if got, _ := dl.Header(h); string(got) != v {
						t.Errorf("dead letter header %s = %q, want %q", h, got, v)
					}
				}
				if string(dl.Value) != strconv.FormatInt(dl.Offset, 10) {
					t.Errorf("dead letter value %q: want the failing record's", dl.Value)
				}
			}
		})
	}
}

// sinkFunc adapts a function to stages.Producer.
type sinkFunc func(ctx context.Context, rs []stages.Record) error

func (f sinkFunc) Produce(ctx context.Context, rs []stages.Record) error { return f(ctx, rs) }

func TestRunForwardsDeadLettersToPolicySink(t *testing.T) {
	var mu sync.Mutex
	var sent []int64
	fails := 1
	sink := sinkFunc(func(_ context.Context, rs []stages.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 { // the chain retries the sink until it acknowledges
			fails--
			return errors.New("dead-letter topic unavailable")
		}
		sent = append(sent, offsetsOf(rs)...)
		return nil
	})
	st := &flaky{bad: 2, boom: -1, failures: 100}
	res := stagetest.Runner{Policy: stagetest.Policy{DeadLetters: sink}}.Run(t, recs("t", 0, 1, 2, 3),
		stagetest.NamedStage{Name: "flaky", Stage: st})
	if !slices.Equal(sent, []int64{2}) || !slices.Equal(offsetsOf(res.DeadLetters), []int64{2}) {
		t.Errorf("policy sink got %v, result dead letters %v; want [2] in both", sent, offsetsOf(res.DeadLetters))
	}
}

// blocker waits for ctx to end.
type blocker struct{}

func (blocker) Process(ctx context.Context, _ []stages.Record) ([]stages.Record, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestRunCancelledMarksNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res := stagetest.Runner{}.RunContext(ctx, t, recs("t", 0, 1, 2), stagetest.NamedStage{Name: "block", Stage: blocker{}})
	tp := stagetest.Partition{Topic: "t"}
	if _, ok := res.Marks[tp]; ok {
		t.Errorf("mark %d after cancellation, want none", res.Marks[tp])
	}
	if !errors.Is(res.Stopped[tp], context.DeadlineExceeded) {
		t.Errorf("stopped error %v, want one wrapping the ctx error", res.Stopped[tp])
	}
	if len(res.DeadLetters) != 0 {
		t.Errorf("dead letters %v: a cancelled record is redelivered, not dead-lettered", res.DeadLetters)
	}
}

// mutator breaks the contract in the ways a careless stage does.
type mutator struct{ how string }

func (m mutator) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	switch m.how {
	case "bytes":
		in[0].Value[0] = 'X'
	case "field":
		in[0].Key = []byte("new")
	case "header":
		in[0].Headers[0].Value = nil
	}
	return in, nil
}

func TestRunReportsMutatedInputs(t *testing.T) {
	for _, how := range []string{"bytes", "field", "header"} {
		t.Run(how, func(t *testing.T) {
			in := recs("t", 0, 1, 2)
			in[0].Headers = []stages.Header{{Key: "h", Value: []byte("v")}}
			var rec recordingT
			res := stagetest.Run(&rec, in, stagetest.NamedStage{Name: "m", Stage: mutator{how}})
			if len(res.Mutated) != 1 || res.Mutated[0].Offset != 1 || string(res.Mutated[0].Value) != "1" {
				t.Errorf("Mutated = %v, want record 1 as it was given", res.Mutated)
			}
			if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "changed the input record at t/0 offset 1 in place") {
				t.Errorf("the run failed the test with %q, want one failure naming the changed record", rec.errs)
			}
		})
	}
}

// recordingT is a stagetest.T that records the failures Run reports.
type recordingT struct{ errs []string }

func (r *recordingT) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recordingT) Context() context.Context { return context.Background() }
