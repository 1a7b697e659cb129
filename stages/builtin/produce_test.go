package builtin_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

func TestProduceForwardsConvertedRecords(t *testing.T) {
	p := &stagetest.Producer{}
	st := build(t, "produce", stages.Options{
		"topic":   "out",
		"key":     `json.id`,
		"value":   `{"v": json.v, "at": offset}`,
		"headers": map[string]string{"src": `topic + ":" + string(offset)`, "h": `"new"`},
	}, stagetest.Env(nil, p))
	in := []stages.Record{rec(7, "k7", `{"id":"a","v":1}`, "h", "old", "keep", "1"), rec(8, "k8", `{"id":"b","v":2}`)}
	res := run(t, "produce", st, in...)

	got := p.Records("out")
	if len(got) != 2 {
		t.Fatalf("produced %d records, want 2", len(got))
	}
	want := []struct{ key, value, headers string }{
		{"a", `{"at":7,"v":1}`, "keep=1 h=new src=in:7"},
		{"b", `{"at":8,"v":2}`, "h=new src=in:8"},
	}
	for i, r := range got {
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, h.Key+"="+str(h.Value))
		}
		if str(r.Key) != want[i].key || str(r.Value) != want[i].value || strings.Join(hs, " ") != want[i].headers {
			t.Errorf("produced %d: key %s value %s headers %v; want %+v", i, r.Key, r.Value, hs, want[i])
		}
		if r.Topic != "out" || r.Partition != -1 || r.Offset != -1 || !r.Timestamp.Equal(in[i].Timestamp) {
			t.Errorf("produced %d: topic %q partition %d offset %d time %v; want out -1 -1 %v",
				i, r.Topic, r.Partition, r.Offset, r.Timestamp, in[i].Timestamp)
		}
	}
	// the stage passes its input on, unchanged
	if !slices.Equal(values(res.Outputs), values(in)) || !slices.Equal(offsets(res.Outputs), []int64{7, 8}) ||
		header(res.Outputs[0], "h") != "old" {
		t.Errorf("outputs %v, want the inputs", res.Outputs)
	}
	if p.Calls() != 1 {
		t.Errorf("%d Produce calls for one batch, want 1", p.Calls())
	}
	if m := res.Marks[stagetest.Partition{Topic: "in"}]; m != 9 {
		t.Errorf("mark %d, want 9", m)
	}
}

func TestProduceDefaultsToInput(t *testing.T) {
	p := &stagetest.Producer{}
	st := build(t, "produce", stages.Options{"topic": "copy"}, stagetest.Env(nil, p))
	in := rec(1, "k", "<nil>", "a", "1")
	run(t, "produce", st, in)
	got := p.Records("copy")
	if len(got) != 1 || string(got[0].Key) != "k" || got[0].Value != nil || header(got[0], "a") != "1" {
		t.Fatalf("produced %+v, want a copy of the input with a null value", got)
	}
}

// probe is a stage that records, for each record it sees, whether the
// producer had acknowledged it by then.
type probe struct {
	p    *stagetest.Producer
	mu   sync.Mutex
	seen []bool
}

func (s *probe) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	acked := len(s.p.Records("out"))
	s.mu.Lock()
	defer s.mu.Unlock()
	for range in {
		s.seen = append(s.seen, acked >= len(in))
	}
	return in, nil
}

func TestProduceFailure(t *testing.T) {
	errBroker := errors.New("not enough replicas")
	tests := []struct {
		name     string
		failures int // Produce calls that fail before calls succeed
		stop     bool
		wantOut  []int64
		wantDead []int64
		wantMark int64
		wantStop bool
		calls    int
	}{
		// batch call fails; each record alone then succeeds
		{name: "transient", failures: 1, wantOut: []int64{4, 5, 6}, wantMark: 7, calls: 4},
		// batch call, then per record: 1 call + 2 retries, all fail
		{name: "dead letter", failures: 100, wantDead: []int64{4, 5, 6}, wantMark: 7, calls: 1 + 3*3},
		// batch call, then record 4 alone + 2 retries; then the partition stops
		{name: "stop", failures: 100, stop: true, wantMark: 4, wantStop: true, calls: 1 + 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			p := &stagetest.Producer{Fail: func(topic string, rs []stages.Record) error {
				mu.Lock()
				defer mu.Unlock()
				if n++; n <= tc.failures {
					return errBroker
				}
				return nil
			}}
			st := build(t, "produce", stages.Options{"topic": "out"}, stagetest.Env(nil, p))
			pr := &probe{p: p}
			policy := stagetest.Policy{Retries: 2, Backoff: time.Millisecond, Stop: tc.stop}
			res := stagetest.Runner{Policy: policy}.Run(t, []stages.Record{rec(4, "", "a"), rec(5, "", "b"), rec(6, "", "c")},
				stagetest.NamedStage{Name: "produce", Stage: st}, stagetest.NamedStage{Name: "probe", Stage: pr})

			if got := offsets(res.Outputs); !slices.Equal(got, tc.wantOut) && len(got)+len(tc.wantOut) > 0 {
				t.Errorf("outputs %v, want %v", got, tc.wantOut)
			}
			if got := offsets(res.DeadLetters); !slices.Equal(got, tc.wantDead) && len(got)+len(tc.wantDead) > 0 {
				t.Errorf("dead letters %v, want %v", got, tc.wantDead)
			}
			for _, dl := range res.DeadLetters {
				if header(dl, stages.HeaderErrorStage) != "produce" || !strings.Contains(header(dl, stages.HeaderErrorMessage), errBroker.Error()) {
					t.Errorf("dead letter headers %v", dl.Headers)
				}
			}
			tp := stagetest.Partition{Topic: "in"}
			if m, ok := res.Marks[tp]; !ok || m != tc.wantMark {
				t.Errorf("mark %d (present %v), want %d", m, ok, tc.wantMark)
			}
			var stop *stages.StoppedError
			if stopped := errors.As(res.Stopped[tp], &stop); stopped != tc.wantStop {
				t.Errorf("stopped error %v, want stopped %v", res.Stopped[tp], tc.wantStop)
			} else if stopped && (stop.Offset != 4 || !errors.Is(stop, errBroker)) {
				t.Errorf("stopped at %d with %v, want 4 and the broker error", stop.Offset, stop.Err)
			}
			if p.Calls() != tc.calls {
				t.Errorf("%d Produce calls, want %d", p.Calls(), tc.calls)
			}
			if len(p.Records("out")) != len(tc.wantOut) {
				t.Errorf("%d records acknowledged, want %d", len(p.Records("out")), len(tc.wantOut))
			}
			// the next stage saw only acknowledged records
			for i, acked := range pr.seen {
				if !acked {
					t.Errorf("probe call %d saw records before the producer acknowledged them", i)
				}
			}
			if len(pr.seen) != len(tc.wantOut) {
				t.Errorf("probe saw %d records, want %d", len(pr.seen), len(tc.wantOut))
			}
		})
	}
}

func TestProduceExpressionFailureSkipsOnlyThatRecord(t *testing.T) {
	p := &stagetest.Producer{}
	st := build(t, "produce", stages.Options{"topic": "out", "key": `json.id`}, stagetest.Env(nil, p))
	res := run(t, "produce", st, rec(1, "", `{"id":"a"}`), rec(2, "", `oops`), rec(3, "", `{"id":"c"}`))
	if got := offsets(res.DeadLetters); !slices.Equal(got, []int64{2}) {
		t.Errorf("dead letters %v, want [2]", got)
	}
	if got := offsets(res.Outputs); !slices.Equal(got, []int64{1, 3}) {
		t.Errorf("outputs %v, want [1 3]", got)
	}
	var keys []string
	for _, r := range p.Records("out") {
		keys = append(keys, string(r.Key))
	}
	// written once each: the failing record does not make the others be produced again
	if !slices.Equal(keys, []string{"a", "c"}) || p.Calls() != 1 {
		t.Errorf("produced keys %v in %d calls, want [a c] in 1", keys, p.Calls())
	}
}
