package stagetest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// fate is what a scripted stage does with one record.
type fate int

const (
	pass fate = iota
	drop
	emitTwo
	failOnce // fails its first attempt, then passes
	failAlways
	panics
)

// scripted is a stage whose outcome per record offset is fixed up front
// (so it can run on the harness's worker goroutines).
type scripted struct {
	fates     map[int64]fate
	recordErr bool // report failures as *stages.RecordErrors

	mu       sync.Mutex
	attempts map[int64]int
}

func (s *scripted) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	var re stages.RecordErrors
	for i, r := range in {
		s.mu.Lock()
		s.attempts[r.Offset]++
		n := s.attempts[r.Offset]
		s.mu.Unlock()
		switch s.fates[r.Offset] {
		case pass:
			re.Emit(i, r)
		case drop:
		case emitTwo:
			re.Emit(i, r)
			re.Emit(i, r)
		case failOnce:
			if n == 1 {
				re.Fail(i, errors.New("first attempt fails"))
			} else {
				re.Emit(i, r)
			}
		case failAlways:
			re.Fail(i, stages.Permanent(errors.New("always fails")))
		case panics:
			panic(fmt.Sprintf("offset %d", r.Offset))
		}
	}
	switch {
	case !re.Failed():
		return re.Out, nil
	case s.recordErr:
		return nil, &re
	}
	return nil, errors.New("batch failed")
}

// TestRunnerKeepsThePromises: whatever the stages do, with either
// ordering, any batch size and either policy, the harness (that is, the
// pipeline's scheduler and chain) reports no violation: no mark passes a
// record some stage did not finish, no key runs twice at once. And a mark
// covers every record of a partition that did not stop.
func TestRunnerKeepsThePromises(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var records []stages.Record
		for p := range int32(2) {
			n := rapid.IntRange(1, 12).Draw(rt, "records")
			for o := range int64(n) {
				records = append(records, stages.Record{Topic: "t", Partition: p, Offset: o,
					Key: []byte(fmt.Sprintf("k%d", rapid.IntRange(0, 2).Draw(rt, "key")))})
			}
		}
		var named []stagetest.NamedStage
		for k := range rapid.IntRange(1, 3).Draw(rt, "stages") {
			s := &scripted{fates: map[int64]fate{}, attempts: map[int64]int{}, recordErr: rapid.Bool().Draw(rt, "record errors")}
			for o := range int64(12) {
				s.fates[o] = fate(rapid.SampledFrom([]int{0, 0, 0, 0, 1, 2, 3, 4, 5}).Draw(rt, "fate"))
			}
			named = append(named, stagetest.NamedStage{Name: fmt.Sprintf("s%d", k), Stage: s})
		}
		rn := stagetest.Runner{
			Policy: stagetest.Policy{Retries: rapid.IntRange(0, 2).Draw(rt, "retries"), Backoff: time.Microsecond,
				Stop: rapid.Bool().Draw(rt, "stop")},
			KeyOrdering: rapid.Bool().Draw(rt, "key ordering"),
			Concurrency: rapid.IntRange(1, 4).Draw(rt, "concurrency"),
			BatchSize:   rapid.IntRange(0, 4).Draw(rt, "batch size"),
		}
		res := rn.Run(rt, records, named...) // fails rt on any violation
		for p := range int32(2) {
			tp := stagetest.Partition{Topic: "t", Partition: p}
			var last int64
			for _, r := range records {
				if r.Partition == p {
					last = r.Offset
				}
			}
			mark, marked := res.Marks[tp]
			var stop *stages.StoppedError
			switch stopped := errors.As(res.Stopped[tp], &stop); {
			case !marked:
				rt.Fatalf("%s has no mark (stopped: %v)", tp, res.Stopped[tp])
			case !stopped && mark != last+1:
				rt.Fatalf("%s finished but its mark is %d, want %d", tp, mark, last+1)
			case stopped && (mark > stop.Offset || !rn.Policy.Stop && !errors.As(stop.Err, new(*stages.UndeliverableError))):
				rt.Fatalf("%s stopped (%v) with mark %d", tp, stop, mark)
			}
		}
	})
}
