package process

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/stateref"
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
			var stop *stages.StoppedError
			switch {
			case tt.want.stopped >= 0:
				if !errors.As(err, &stop) || stop.Offset != tt.want.stopped {
					t.Fatalf("err %v, want a stop at %d", err, tt.want.stopped)
				}
			case err != nil:
				t.Fatal(err)
			}
			if got := offsetsOf(out); !slices.Equal(got, tt.want.out) {
				t.Fatalf("out %v, want %v", got, tt.want.out)
			}
			if got := offsetsOf(sink.got); !slices.Equal(got, tt.want.dead) {
				t.Fatalf("dead letters %v, want %v", got, tt.want.dead)
			}
			for _, d := range sink.got {
				if v, ok := d.Header(stages.HeaderErrorStage); !ok || string(v) != "s" {
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

func (m *memSink) Produce(_ context.Context, rs []stages.Record) error {
	m.got = append(m.got, rs...)
	return nil
}

func offsetsOf(rs []stages.Record) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Offset)
	}
	return out
}

// fails is a stage that fails, for good, the records at the given
// offsets, reporting them in a *stages.RecordErrors.
func fails(offsets ...int64) stages.Stage {
	return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		var re stages.RecordErrors
		for i, r := range in {
			if slices.Contains(offsets, r.Offset) {
				re.Fail(i, stages.Permanent(errors.New("bad record")))
				continue
			}
			re.Emit(i, r)
		}
		if re.Failed() {
			return nil, &re
		}
		return in, nil
	})
}

// seen is a pass-through stage that remembers the offsets it finished.
type seen struct{ offsets []int64 }

func (s *seen) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	for _, r := range in {
		s.offsets = append(s.offsets, r.Offset)
	}
	return in, nil
}

// TestChainStopFinishesWhatCameBefore: under the stop policy the records
// before the failing one run through every later stage, so the stop's
// Offset is a commit that passes only finished records; records derived
// out of order or from nowhere pull it back.
func TestChainStopFinishesWhatCameBefore(t *testing.T) {
	reorder := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		out := slices.Clone(in)
		slices.Reverse(out) // 13 12 11 10
		return out, nil
	})
	orphan := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		return append(slices.Clone(in), stages.Record{Topic: "t", Offset: -1}), nil // a record from nowhere
	})
	tests := []struct {
		name       string
		before     []NamedStage
		failing    []int64
		wantOffset int64
		wantLast   []int64 // what the last stage finished
	}{
		{name: "the records before the failing one finish", failing: []int64{12},
			wantOffset: 12, wantLast: []int64{10, 11}},
		{name: "the first failure of a later stage wins", failing: []int64{11, 12},
			wantOffset: 11, wantLast: []int64{10}},
		{name: "records after the failing one in a reordered batch hold the commit", failing: []int64{12},
			before: []NamedStage{{Name: "reorder", Stage: reorder}}, wantOffset: 10, wantLast: []int64{}},
		{name: "a record of unknown source holds the whole batch", failing: []int64{-1},
			before: []NamedStage{{Name: "orphan", Stage: orphan}}, wantOffset: 10, wantLast: []int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			last := &seen{}
			c := Chain{Stages: append(tt.before, NamedStage{Name: "check", Stage: fails(tt.failing...)}, NamedStage{Name: "last", Stage: last}),
				Policy: FailurePolicy{Stop: true, Backoff: time.Millisecond}, Log: nopLog()}
			_, err := c.Run(context.Background(), records(10, 11, 12, 13))
			var stop *stages.StoppedError
			if !errors.As(err, &stop) || stop.Offset != tt.wantOffset || stop.Stage != "check" {
				t.Fatalf("err %v, want a stop by check at %d", err, tt.wantOffset)
			}
			if !slices.Equal(append([]int64{}, last.offsets...), tt.wantLast) {
				t.Fatalf("the last stage finished %v, want %v", last.offsets, tt.wantLast)
			}
		})
	}
}

// countJournal is a stateref.Journal over a count per offset: a call's
// writes are pending until Keep, and Rollback drops them.
type countJournal struct {
	counts, pending map[int64]int
}

func (j *countJournal) Begin()    { j.pending = map[int64]int{} }
func (j *countJournal) Rollback() { j.pending = nil }
func (j *countJournal) Keep() {
	for o, n := range j.pending {
		j.counts[o] += n
	}
	j.pending = nil
}

// TestChainKeepsStateOfFinishedRecords: a stateful stage's writes stay
// exactly for the records that finished it, each once: a call that fails
// as a whole is taken back (its records run again alone); a call that
// names its failed records in a *stages.RecordErrors keeps the writes of
// the others, whose output the chain takes from the error without running
// them again; one marked unavailable is made again whole.
func TestChainKeepsStateOfFinishedRecords(t *testing.T) {
	flaky := errors.New("flaky")
	for _, tt := range []struct {
		name string
		fail func(re *stages.RecordErrors) error // what a call that fails record 1 returns
	}{
		{name: "record errors", fail: func(re *stages.RecordErrors) error { return re }},
		{name: "a plain error", fail: func(*stages.RecordErrors) error { return flaky }},
		{name: "record errors marked unavailable", fail: func(re *stages.RecordErrors) error { return stages.Unavailable(re) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := &countJournal{counts: map[int64]int{}}
			attempts := 0
			counter := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
				attempts++
				var re stages.RecordErrors
				for i, r := range in {
					if r.Offset == 1 && attempts == 1 {
						re.Fail(i, flaky) // (no write for a record it fails)
						continue
					}
					j.pending[r.Offset]++
					re.Emit(i, r)
				}
				if re.Failed() {
					return nil, tt.fail(&re)
				}
				return re.Out, nil
			})
			c := Chain{Stages: []NamedStage{{Name: "count", Stage: counter}}, Policy: FailurePolicy{Retries: 1, Backoff: time.Microsecond}, Log: nopLog()}
			out, err := c.Run(stateref.WithJournal(context.Background(), j), records(0, 1, 2))
			if err != nil || !slices.Equal(offsetsOf(out), []int64{0, 1, 2}) {
				t.Fatalf("Run = %v, %v; want every record out", offsetsOf(out), err)
			}
			if want := map[int64]int{0: 1, 1: 1, 2: 1}; !maps.Equal(j.counts, want) {
				t.Fatalf("the stage's kept writes count %v, want each record once %v", j.counts, want)
			}
		})
	}
}

// TestChainTimeout: a call that hangs past Timeout is cancelled and fails
// like any error: its records are run alone, the hanging one retried and
// dead-lettered; one that ignores its context is reported stuck.
func TestChainTimeout(t *testing.T) {
	hang := stages.StageFunc(func(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
		for _, r := range in {
			if r.Offset == 1 {
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}
		return in, nil
	})
	sink := &memSink{}
	c := Chain{Stages: []NamedStage{{Name: "slow", Stage: hang}}, Timeout: 5 * time.Millisecond,
		Policy: FailurePolicy{Retries: 1, Backoff: time.Millisecond, Sink: sink}, Log: nopLog()}
	out, err := c.Run(context.Background(), records(0, 1, 2))
	if err != nil || !slices.Equal(offsetsOf(out), []int64{0, 2}) || !slices.Equal(offsetsOf(sink.got), []int64{1}) {
		t.Fatalf("out %v, dead letters %v, err %v; want 0 and 2 out, 1 dead-lettered", offsetsOf(out), offsetsOf(sink.got), err)
	}
	if msg, _ := sink.got[0].Header(stages.HeaderErrorMessage); !strings.Contains(string(msg), "did not finish 1 record(s) within processing_timeout (5ms)") {
		t.Fatalf("dead letter error %q, want the processing timeout", msg)
	}

	// a stage ignoring its context: reported stuck, then unstuck
	release := make(chan struct{})
	deaf := stages.StageFunc(func(context.Context, []stages.Record) ([]stages.Record, error) {
		<-release
		return nil, errors.New("late")
	})
	var stuck atomic.Int32
	c = Chain{Stages: []NamedStage{{Name: "deaf", Stage: deaf}}, Timeout: time.Millisecond, StuckAfter: time.Millisecond,
		Policy: FailurePolicy{Stop: true}, Log: nopLog(), OnStuck: func(_ string, d int) { stuck.Add(int32(d)) }}
	done := make(chan error, 1)
	go func() { _, err := c.Run(context.Background(), records(0)); done <- err }()
	deadline := time.Now().Add(5 * time.Second)
	for stuck.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("a call ignoring its context was never reported stuck")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-done; !errors.As(err, new(*stages.StoppedError)) {
		t.Fatalf("err %v, want a stop", err)
	}
	if stuck.Load() != 0 {
		t.Fatalf("stuck count %d after the call returned, want 0", stuck.Load())
	}
}

// refusingSink refuses records for good: all of them, or only whole
// ones (taking truncated dead letters).
type refusingSink struct {
	all bool
	got []stages.Record
}

func (s *refusingSink) Produce(_ context.Context, rs []stages.Record) error {
	if _, truncated := rs[0].Header(stages.HeaderTruncated); s.all || !truncated {
		return stages.Permanent(errors.New("MESSAGE_TOO_LARGE"))
	}
	s.got = append(s.got, rs...)
	return nil
}

// TestChainUndeliverable: a dead letter the sink refuses for good is
// replaced by a truncated one; if that is refused too, the partition
// stops at the record.
func TestChainUndeliverable(t *testing.T) {
	big := records(0, 1, 2)
	big[1].Key, big[1].Value = []byte("k"), make([]byte, 1000)
	big[1].Headers = []stages.Header{{Key: "h", Value: []byte("v")}}

	sink := &refusingSink{}
	c := Chain{Stages: []NamedStage{{Name: "check", Stage: fails(1)}}, Policy: FailurePolicy{Backoff: time.Millisecond, Sink: sink}, Log: nopLog()}
	out, err := c.Run(context.Background(), big)
	if err != nil || !slices.Equal(offsetsOf(out), []int64{0, 2}) || len(sink.got) != 1 {
		t.Fatalf("out %v, err %v, %d dead letters; want 0 and 2 out and one truncated dead letter", offsetsOf(out), err, len(sink.got))
	}
	dl := sink.got[0]
	size, _ := dl.Header(stages.HeaderSourceSize)
	refused, _ := dl.Header(stages.HeaderRefused)
	if dl.Value != nil || string(dl.Key) != "k" || string(size) != "1003" || string(refused) != "MESSAGE_TOO_LARGE" || dl.Offset != 1 {
		t.Fatalf("truncated dead letter %+v", dl)
	}
	if _, kept := dl.Header("h"); kept {
		t.Fatal("the truncated dead letter kept the record's own headers")
	}

	c.Policy.Sink = &refusingSink{all: true}
	_, err = c.Run(context.Background(), big)
	var stop *stages.StoppedError
	var undeliverable *stages.UndeliverableError
	if !errors.As(err, &stop) || stop.Offset != 1 || !errors.As(err, &undeliverable) ||
		!strings.Contains(err.Error(), "could not be written to the dead-letter topic") {
		t.Fatalf("err %v, want a stop at 1 because the record cannot be dead-lettered", err)
	}
}

// limitSink takes records of at most limit bytes (stages.Record.Size) and
// refuses larger ones for good, as a topic's max.message.bytes does.
type limitSink struct {
	limit int
	got   []stages.Record
}

func (s *limitSink) Produce(_ context.Context, rs []stages.Record) error {
	for _, r := range rs {
		if r.Size() > s.limit {
			return stages.Permanent(errors.New("MESSAGE_TOO_LARGE"))
		}
	}
	s.got = append(s.got, rs...)
	return nil
}

// TestChainDeadLetterIsTheSourceRecord: the dead letter of a record that
// an earlier stage transformed is the source record as consumed (key,
// value, headers, timestamp), with the failing stage, its error and the
// source coordinates; its size is the source's, so a transformed record
// too large for the dead-letter topic does not empty a dead letter that
// fits; a source record two derived records of which fail is
// dead-lettered once.
func TestChainDeadLetterIsTheSourceRecord(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	src := func() []stages.Record {
		rs := records(0, 1, 2)
		for i := range rs {
			rs[i].Partition, rs[i].Timestamp = 3, ts
			rs[i].Key, rs[i].Value = []byte("k"), []byte("v")
			rs[i].Headers = []stages.Header{{Key: "orig", Value: []byte("h")}}
		}
		return rs
	}
	// mapper derives a record per input, as the map stage does: new key,
	// a bigger value, an added header, the source's Offset kept; twice
	// emits two derived records per input.
	mapper := func(copies int) stages.Stage {
		return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
			var out []stages.Record
			for _, r := range in {
				for range copies {
					d := r
					d.Key, d.Value = []byte("new-key"), make([]byte, 500)
					d.Headers = append(slices.Clone(r.Headers), stages.Header{Key: "added", Value: []byte("x")})
					d.Timestamp = time.Now()
					out = append(out, d)
				}
			}
			return out, nil
		})
	}
	tests := []struct {
		name   string
		copies int
		limit  int
	}{
		{name: "one derived record", copies: 1, limit: 1 << 20},
		{name: "the transformed record is too large, the source fits", copies: 1, limit: 300},
		{name: "two derived records of one source fail", copies: 2, limit: 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &limitSink{limit: tt.limit}
			var reported []int64
			in := src()
			c := Chain{Stages: []NamedStage{{Name: "map", Stage: mapper(tt.copies)}, {Name: "check", Stage: fails(1)}},
				Policy: FailurePolicy{Backoff: time.Millisecond, Sink: sink}, Log: nopLog(),
				OnDeadLetter: func(r stages.Record, _ string, _ error) { reported = append(reported, r.Offset) }}
			out, err := c.Run(context.Background(), in)
			if err != nil || len(out) != 2*tt.copies {
				t.Fatalf("out %v, err %v", offsetsOf(out), err)
			}
			if len(sink.got) != 1 || !slices.Equal(reported, []int64{1}) {
				t.Fatalf("%d dead letters (reported %v), want one, of offset 1", len(sink.got), reported)
			}
			dl := sink.got[0]
			if string(dl.Key) != "k" || string(dl.Value) != "v" || !dl.Timestamp.Equal(ts) || dl.Offset != 1 || dl.Partition != 3 {
				t.Fatalf("dead letter key %q, value of %d bytes, at %v (offset %d, partition %d): want the source record", dl.Key, len(dl.Value), dl.Timestamp, dl.Offset, dl.Partition)
			}
			if _, ok := dl.Header("added"); ok {
				t.Fatal("the dead letter carries a header an earlier stage added")
			}
			if _, ok := dl.Header(stages.HeaderTruncated); ok {
				t.Fatal("the dead letter was truncated although the source record fits")
			}
			want := map[string]string{"orig": "h", stages.HeaderErrorStage: "check", stages.HeaderErrorMessage: "bad record",
				stages.HeaderSourceTopic: "t", stages.HeaderSourcePartition: "3", stages.HeaderSourceOffset: "1"}
			for k, v := range want {
				if got, _ := dl.Header(k); string(got) != v {
					t.Fatalf("header %s = %q, want %q (headers %v)", k, got, v, dl.Headers)
				}
			}
			if len(in[1].Headers) != 1 {
				t.Fatalf("the source record's headers were modified: %v", in[1].Headers)
			}
		})
	}

	// a source too large for the sink: the truncated dead letter names
	// the source's size, not the transformed record's
	sink := &limitSink{limit: 300}
	in := src()
	in[1].Value = make([]byte, 200)
	c := Chain{Stages: []NamedStage{{Name: "map", Stage: mapper(1)}, {Name: "check", Stage: fails(1)}},
		Policy: FailurePolicy{Backoff: time.Millisecond, Sink: sink}, Log: nopLog()}
	if _, err := c.Run(context.Background(), in); err != nil || len(sink.got) != 1 {
		t.Fatalf("err %v, %d dead letters", err, len(sink.got))
	}
	size, _ := sink.got[0].Header(stages.HeaderSourceSize)
	if want := strconv.Itoa(in[1].Size()); string(size) != want || string(sink.got[0].Key) != "k" {
		t.Fatalf("truncated dead letter size %q key %q, want the source's %s and key k", size, sink.got[0].Key, want)
	}
}

// TestChainWaitsForAnUnavailableDestination: a stage whose destination is
// unavailable for every record (stages.Unavailable) holds the records
// and retries the same call with backoff until it is back: nothing is
// dead-lettered, nothing lost, and the wait is reported from start to
// end. The same holds for the dead-letter sink; and when ctx ends during
// the wait, the run is aborted, nothing dead-lettered.
func TestChainWaitsForAnUnavailableDestination(t *testing.T) {
	type report struct {
		stage string
		delta int
	}
	down := func(n int32, calls *atomic.Int32) stages.Stage {
		return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
			if calls.Add(1) <= n {
				return nil, stages.Unavailable(errors.New("UNKNOWN_TOPIC_OR_PARTITION"))
			}
			return in, nil
		})
	}
	var calls atomic.Int32
	var reports []report
	sink := &memSink{}
	c := Chain{Stages: []NamedStage{{Name: "out", Stage: down(5, &calls)}}, Log: nopLog(),
		Policy:        FailurePolicy{Retries: 1, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Sink: sink},
		OnUnavailable: func(stage string, d int, _ error) { reports = append(reports, report{stage, d}) }}
	out, err := c.Run(context.Background(), records(0, 1, 2))
	if err != nil || !slices.Equal(offsetsOf(out), []int64{0, 1, 2}) || len(sink.got) != 0 {
		t.Fatalf("out %v, err %v, %d dead letters; want every record out and none dead-lettered", offsetsOf(out), err, len(sink.got))
	}
	if calls.Load() != 6 {
		t.Fatalf("%d calls, want 6: the same batch call again until the destination is back, not one per record", calls.Load())
	}
	want := []report{{"out", 1}, {"out", 0}, {"out", 0}, {"out", 0}, {"out", 0}, {"out", -1}}
	if !slices.Equal(reports, want) {
		t.Fatalf("reports %v, want %v", reports, want)
	}

	// the dead-letter sink unavailable for a while
	reports = nil
	dl := &flakySink{failures: 3}
	c = Chain{Stages: []NamedStage{{Name: "check", Stage: fails(1)}}, Log: nopLog(),
		Policy:        FailurePolicy{Backoff: time.Millisecond, Sink: dl},
		OnUnavailable: func(stage string, d int, _ error) { reports = append(reports, report{stage, d}) }}
	if _, err := c.Run(context.Background(), records(0, 1, 2)); err != nil || len(dl.got) != 1 {
		t.Fatalf("err %v, %d dead letters, want 1", err, len(dl.got))
	}
	if want := []report{{DeadLetterStage, 1}, {DeadLetterStage, 0}, {DeadLetterStage, 0}, {DeadLetterStage, -1}}; !slices.Equal(reports, want) {
		t.Fatalf("reports %v, want %v", reports, want)
	}

	// ctx ends while the destination is down: aborted, nothing dead-lettered
	calls.Store(0)
	reports = nil
	sink = &memSink{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	c = Chain{Stages: []NamedStage{{Name: "out", Stage: down(1<<30, &calls)}}, Log: nopLog(),
		Policy:        FailurePolicy{Backoff: time.Millisecond, Sink: sink},
		OnUnavailable: func(stage string, d int, _ error) { reports = append(reports, report{stage, d}) }}
	if _, err := c.Run(ctx, records(0, 1)); !errors.Is(err, errAborted) || len(sink.got) != 0 {
		t.Fatalf("err %v, %d dead letters; want aborted, none", err, len(sink.got))
	}
	if len(reports) < 2 || reports[0].delta != 1 || reports[len(reports)-1].delta != -1 {
		t.Fatalf("reports %v: want the wait's start and end", reports)
	}
}

// TestChainDeadLetterUnavailableWrapsPermanent: a dead-letter write
// failing with an unavailable error that wraps a permanent one (a
// transactional producer's "transaction over" error whose cause was a
// refused batch) is the sink's unavailability, not a refusal of the
// record: the partition waits and the whole dead letter is written,
// neither truncated nor undeliverable.
func TestChainDeadLetterUnavailableWrapsPermanent(t *testing.T) {
	dl := &flakySink{failures: 2, err: stages.Unavailable(fmt.Errorf("transaction over: %w", stages.Permanent(errors.New("MESSAGE_TOO_LARGE"))))}
	c := Chain{Stages: []NamedStage{{Name: "check", Stage: fails(1)}}, Log: nopLog(), Policy: FailurePolicy{Backoff: time.Millisecond, Sink: dl}}
	if _, err := c.Run(context.Background(), records(0, 1, 2)); err != nil || len(dl.got) != 1 {
		t.Fatalf("err %v, %d dead letters, want 1", err, len(dl.got))
	}
	if _, truncated := dl.got[0].Header(stages.HeaderTruncated); truncated {
		t.Fatalf("dead letter %+v is truncated: an unavailable sink was taken for a refusal of the record", dl.got[0])
	}
}

// flakySink fails its first writes with an unavailable error (err, or
// LEADER_NOT_AVAILABLE).
type flakySink struct {
	failures int
	err      error
	got      []stages.Record
}

func (s *flakySink) Produce(_ context.Context, rs []stages.Record) error {
	if s.failures > 0 {
		s.failures--
		if s.err != nil {
			return s.err
		}
		return stages.Unavailable(errors.New("LEADER_NOT_AVAILABLE"))
	}
	s.got = append(s.got, rs...)
	return nil
}
