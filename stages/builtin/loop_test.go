package builtin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/stages"
)

// loopModel is what eachRecord must return for the outcomes os over in:
// the outputs in input order (the input record for passed, a record
// derived from it for replaced), and for failures the error's Errs and
// From. It is written the plain way, one append per output.
func loopModel(in []stages.Record, os []outcome) (out []stages.Record, from []int, errs map[int]error) {
	for i, o := range os {
		switch o {
		case passed:
			out, from = append(out, in[i]), append(from, i)
		case replaced:
			out, from = append(out, replacement(in[i])), append(from, i)
		case failed:
			if errs == nil {
				errs = map[int]error{}
			}
			errs[i] = loopErr(i)
		}
	}
	return out, from, errs
}

func replacement(r stages.Record) stages.Record {
	r.Value = []byte(fmt.Sprintf("new-%d", r.Offset))
	return r
}

func loopErr(i int) error { return fmt.Errorf("record %d fails", i) }

// runLoop runs eachRecord with fn giving os[i] for record i.
func runLoop(in []stages.Record, os []outcome) ([]stages.Record, error) {
	i := 0
	return eachRecord(context.Background(), in, func(r *stages.Record, out *stages.Record) (outcome, error) {
		o := os[i]
		i++
		switch o {
		case replaced:
			*out = replacement(*r)
		case failed:
			return dropped, loopErr(int(r.Offset)) // the error wins over the outcome
		}
		return o, nil
	})
}

func loopInput(n int) []stages.Record {
	in := make([]stages.Record, n, n+5) // spare capacity: the output must not expose it
	for i := range in {
		in[i] = stages.Record{Topic: "t", Offset: int64(i), Value: []byte(fmt.Sprint(i))}
	}
	return in
}

// checkLoop compares eachRecord's result with the model's.
func checkLoop(t interface {
	Fatalf(string, ...any)
}, in []stages.Record, os []outcome, got []stages.Record, err error) {
	want, from, errs := loopModel(in, os)
	same := func(a, b []stages.Record) bool {
		return slices.EqualFunc(a, b, func(x, y stages.Record) bool {
			return x.Offset == y.Offset && string(x.Value) == string(y.Value) && x.Topic == y.Topic
		})
	}
	if errs == nil {
		if err != nil {
			t.Fatalf("outcomes %v: error %v, want none", os, err)
		}
		if !same(got, want) {
			t.Fatalf("outcomes %v: output %v, want %v", os, got, want)
		}
		if cap(got) != len(got) {
			t.Fatalf("outcomes %v: output has capacity %d beyond its length %d: an append by the next stage could write into another slice", os, cap(got), len(got))
		}
		return
	}
	var re *stages.RecordErrors
	if !errors.As(err, &re) {
		t.Fatalf("outcomes %v: error %v, want a *stages.RecordErrors", os, err)
	}
	if !same(re.Out, want) || !slices.Equal(re.From, from) || len(re.Errs) != len(errs) || !re.Consistent(len(in)) {
		t.Fatalf("outcomes %v: RecordErrors Out %v From %v Errs %v, want Out %v From %v Errs %v", os, re.Out, re.From, re.Errs, want, from, errs)
	}
	for i, e := range errs {
		if re.Errs[i] == nil || re.Errs[i].Error() != e.Error() {
			t.Fatalf("outcomes %v: error of record %d is %v, want %v", os, i, re.Errs[i], e)
		}
	}
}

// TestEachRecord: the outputs, in input order, and the errors of failed
// records with where every output came from; when every record passes,
// the output is the input itself (nothing copied), and otherwise no
// spare room an append could share.
func TestEachRecord(t *testing.T) {
	P, R, D, F := passed, replaced, dropped, failed
	for _, os := range [][]outcome{
		{}, {P}, {R}, {D}, {F},
		{P, P, P}, {R, R, R}, {D, D, D}, {F, F},
		{P, D, P, D}, {D, P}, {R, D, R}, {P, R, P},
		{P, F, P}, {R, R, F}, {F, R, P, D}, {D, D, F},
	} {
		in := loopInput(len(os))
		got, err := runLoop(in, os)
		checkLoop(t, in, os, got, err)
		if len(os) > 0 && !slices.ContainsFunc(os, func(o outcome) bool { return o != P }) && &got[0] != &in[0] {
			t.Errorf("outcomes %v: every record passed, but the output is a copy of the input", os)
		}
	}
}

// TestEachRecordProperty: any sequence of outcomes gives the model's
// result (rapid prints the seed of a failing case; -rapid.seed replays
// it).
func TestEachRecordProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		os := rapid.SliceOfN(rapid.SampledFrom([]outcome{passed, replaced, dropped, failed}), 0, 40).Draw(t, "outcomes")
		in := loopInput(len(os))
		got, err := runLoop(in, os)
		checkLoop(t, in, os, got, err)
	})
}

// TestEachRecordStopsWithContext: once ctx has ended no further record
// runs and the whole batch fails with ctx's error.
func TestEachRecordStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ran := 0
	out, err := eachRecord(ctx, loopInput(5), func(r *stages.Record, _ *stages.Record) (outcome, error) {
		ran++
		if r.Offset == 1 {
			cancel()
		}
		return passed, nil
	})
	if !errors.Is(err, context.Canceled) || out != nil || ran != 2 {
		t.Fatalf("eachRecord after cancel: %d ran, output %v, error %v; want 2 ran, no output, context.Canceled", ran, out, err)
	}
}
