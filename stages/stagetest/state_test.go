package stagetest_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// counter counts records per value in the store "counts" and emits
// "value=count".
type counter struct {
	// drift, if set, adds a number that grows with every call: a stage
	// that is not deterministic on replay.
	drift *atomic.Int64
}

func (counter) Stores() []string { return []string{"counts"} }

func (c counter) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	st, err := stages.StoreFor(ctx, "counts")
	if err != nil {
		return nil, err
	}
	counts := stages.Typed[int]{Store: st, Codec: stages.JSONCodec[int]{}}
	return stages.ForEach(in, func(r *stages.Record, emit func(stages.Record)) error {
		n, _, err := counts.Get(r.Value)
		if err != nil {
			return err
		}
		n++
		if c.drift != nil {
			n += int(c.drift.Add(1))
		}
		if err := counts.Put(r.Value, n); err != nil {
			return err
		}
		out := *r
		out.Value = fmt.Appendf(nil, "%s=%d", r.Value, n)
		emit(out)
		return nil
	})
}

func valuesRecords(partition int32, from int64, values ...string) []stages.Record {
	recs := make([]stages.Record, len(values))
	for i, v := range values {
		recs[i] = stages.Record{Topic: "in", Partition: partition, Offset: from + int64(i), Value: []byte(v)}
	}
	return recs
}

func count(t *testing.T, st *stagetest.State, partition int32, key string) int {
	t.Helper()
	v, ok := st.Get("counts", partition, []byte(key))
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		t.Fatalf("stored count %q: %v", v, err)
	}
	return n
}

// TestStateAcrossRunsAndCrashes: the state a stateful stage writes is
// kept from one Run to the next, per partition, survives a crash (the
// next Run restores it from the changelog), and can be preloaded.
func TestStateAcrossRunsAndCrashes(t *testing.T) {
	st := stagetest.NewState()
	rn := stagetest.Runner{State: st, BatchSize: 2}
	step := stagetest.NamedStage{Name: "count", Stage: counter{}}
	rn.Run(t, append(valuesRecords(0, 0, "a", "b", "a"), valuesRecords(1, 0, "a")...), step)
	if a0, b0, a1 := count(t, st, 0, "a"), count(t, st, 0, "b"), count(t, st, 1, "a"); a0 != 2 || b0 != 1 || a1 != 1 {
		t.Fatalf("after one run: a=%d b=%d on partition 0, a=%d on 1; want 2, 1, 1", a0, b0, a1)
	}
	st.Crash()
	res := rn.Run(t, valuesRecords(0, 3, "a"), step)
	if got := string(res.Outputs[0].Value); got != "a=3" {
		t.Fatalf("after a crash the count went on as %q, want a=3 (restored from the changelog)", got)
	}
	st.Preload("counts", 2, []byte("z"), []byte("41"))
	res = rn.Run(t, valuesRecords(2, 0, "z"), step)
	if got := string(res.Outputs[0].Value); got != "z=42" {
		t.Fatalf("after a preload of 41, got %q, want z=42", got)
	}
	if n := count(t, st, 1, "a"); n != 1 {
		t.Fatalf("partition 1's count changed to %d by other partitions' runs", n)
	}
}

// TestStateRollsBackAFailedCall: a stage call that fails after writing
// is retried record by record; its writes are taken back first, so each
// record counts once.
func TestStateRollsBackAFailedCall(t *testing.T) {
	var calls atomic.Int64
	failFirst := stages.StageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
		out, err := counter{}.Process(ctx, in)
		if err == nil && len(in) > 1 && calls.Add(1) == 1 {
			return nil, fmt.Errorf("failing the whole batch once, after writing")
		}
		return out, err
	})
	st := stagetest.NewState()
	rn := stagetest.Runner{State: st, Policy: stagetest.Policy{Retries: 1}}
	rn.Run(t, valuesRecords(0, 0, "a", "a", "a"), stagetest.NamedStage{Name: "count", Stage: statefulFunc{failFirst}})
	if n := count(t, st, 0, "a"); n != 3 {
		t.Fatalf("count after a failed call and its retry: %d, want 3", n)
	}
}

type statefulFunc struct{ stages.StageFunc }

func (statefulFunc) Stores() []string { return []string{"counts"} }

// TestCheckReplay: a deterministic stateful stage passes; one whose
// output depends on more than its records and its state fails.
func TestCheckReplay(t *testing.T) {
	recs := valuesRecords(0, 0, "a", "b", "a")
	stagetest.Runner{}.CheckReplay(t, nil, recs, stagetest.NamedStage{Name: "count", Stage: counter{}})

	rt := &recordingT{}
	stagetest.Runner{}.CheckReplay(rt, nil, recs, stagetest.NamedStage{Name: "count", Stage: counter{drift: new(atomic.Int64)}})
	if len(rt.errs) == 0 || !strings.Contains(strings.Join(rt.errs, "\n"), "not deterministic on replay") {
		t.Fatalf("a drifting stage passed CheckReplay: %q", rt.errs)
	}
}

// A stateful stage keeps its counts from one run to the next, and after a
// crash the next run restores them from the changelog.
func ExampleState() {
	st := stagetest.NewState()
	rn := stagetest.Runner{State: st}
	step := stagetest.NamedStage{Name: "count", Stage: counter{}}
	rec := func(off int64, v string) stages.Record {
		return stages.Record{Topic: "clicks", Partition: 0, Offset: off, Value: []byte(v)}
	}
	res := rn.RunContext(context.Background(), nil, []stages.Record{rec(0, "home"), rec(1, "cart"), rec(2, "home")}, step)
	for _, r := range res.Outputs {
		fmt.Println(string(r.Value))
	}
	st.Crash()
	res = rn.RunContext(context.Background(), nil, []stages.Record{rec(3, "home")}, step)
	fmt.Println(string(res.Outputs[0].Value))
	v, _ := st.Get("counts", 0, []byte("cart"))
	fmt.Println("cart:", string(v))
	// Output:
	// home=1
	// cart=1
	// home=2
	// home=3
	// cart: 1
}

// TestStateKeepsWritesOfRecordErrors: a call that names its failed
// records keeps the writes of the others (they count as finished); the
// failed record, retried alone, counts once.
func TestStateKeepsWritesOfRecordErrors(t *testing.T) {
	var failOnce atomic.Bool
	st := stagetest.NewState()
	stage := statefulFunc{stages.StageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
		var errs stages.RecordErrors
		for i, r := range in {
			if string(r.Value) == "b" && len(in) > 1 && failOnce.CompareAndSwap(false, true) {
				errs.Fail(i, fmt.Errorf("b fails in a batch, once"))
				continue
			}
			out, err := counter{}.Process(ctx, []stages.Record{r})
			if err != nil {
				return nil, err
			}
			errs.Emit(i, out[0])
		}
		if errs.Failed() {
			return nil, &errs
		}
		return errs.Out, nil
	})}
	res := stagetest.Runner{State: st, Policy: stagetest.Policy{Retries: 1}}.Run(t, valuesRecords(0, 0, "a", "b", "a"), stagetest.NamedStage{Name: "count", Stage: stage})
	if a, b := count(t, st, 0, "a"), count(t, st, 0, "b"); a != 2 || b != 1 || len(res.Outputs) != 3 {
		t.Fatalf("counts a=%d b=%d with %d outputs, want a=2 b=1 and 3 outputs", a, b, len(res.Outputs))
	}
}
