package offsets

import (
	"errors"
	"testing"

	"github.com/fencepost-dev/fencepost/offsetstore"
	"pgregory.net/rapid"
)

func TestWatermarkMark(t *testing.T) {
	type mark struct {
		gen   Generation
		epoch offsetstore.Epoch
		span  Span
		err   error
	}
	tests := []struct {
		name    string
		start   int64
		marks   []mark
		want    int64
		pending int
	}{
		{name: "nothing marked", start: 10, want: 10},
		{name: "in order", start: 10, marks: []mark{{1, 1, Span{10, 12}, nil}, {1, 1, Span{12, 20}, nil}}, want: 20},
		{name: "gap waits", start: 10, marks: []mark{{1, 1, Span{12, 20}, nil}}, want: 10, pending: 1},
		{name: "gap closes", start: 10, marks: []mark{{1, 1, Span{15, 20}, nil}, {1, 1, Span{12, 15}, nil}, {1, 1, Span{10, 12}, nil}}, want: 20},
		{name: "partial close keeps rest pending", start: 0, marks: []mark{{1, 1, Span{5, 6}, nil}, {1, 1, Span{8, 9}, nil}, {1, 1, Span{0, 5}, nil}}, want: 6, pending: 1},
		{name: "duplicate below next is harmless", start: 10, marks: []mark{{1, 1, Span{10, 20}, nil}, {1, 1, Span{10, 15}, nil}}, want: 20},
		{name: "overlap extends", start: 10, marks: []mark{{1, 1, Span{10, 20}, nil}, {1, 1, Span{15, 25}, nil}}, want: 25},
		{name: "overlapping pending merge", start: 0, marks: []mark{{1, 1, Span{5, 8}, nil}, {1, 1, Span{7, 12}, nil}, {1, 1, Span{3, 5}, nil}}, want: 0, pending: 1},
		{name: "epoch before start rejected", start: 10, marks: []mark{{1, 0, Span{10, 20}, ErrStaleEpoch}}, want: 10},
		{name: "newer epoch accepted", start: 10, marks: []mark{{1, 4, Span{10, 20}, nil}}, want: 20},
		{name: "stale generation rejected", start: 10, marks: []mark{{0, 1, Span{10, 20}, ErrStaleGeneration}}, want: 10},
		{name: "empty span rejected", start: 10, marks: []mark{{1, 1, Span{10, 10}, ErrEmptySpan}}, want: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWatermark(1, 1, tt.start)
			for _, m := range tt.marks {
				if err := w.Mark(m.gen, m.epoch, m.span); !errors.Is(err, m.err) {
					t.Fatalf("Mark(%v) = %v, want %v", m.span, err, m.err)
				}
			}
			got, ok := w.Committable()
			if !ok || got != tt.want {
				t.Fatalf("Committable() = %d, %v; want %d, true", got, ok, tt.want)
			}
			if w.Pending() != tt.pending {
				t.Fatalf("Pending() = %d, want %d", w.Pending(), tt.pending)
			}
		})
	}
}

func TestWatermarkSkipAndRestart(t *testing.T) {
	w := NewWatermark(1, 1, 100)
	// a reset jumped from 110 to 140 while 100..110 were still being
	// processed: the skip waits for them
	w.Skip(Span{110, 140})
	if got, _ := w.Committable(); got != 100 {
		t.Fatalf("skip passed unprocessed offsets: committable %d, want 100", got)
	}
	if err := w.Mark(1, 1, Span{100, 110}); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.Committable(); got != 140 {
		t.Fatalf("after the processed run reached the skip: committable %d, want 140", got)
	}
	// a mark of a newer epoch counts; a backwards replay changes nothing
	if err := w.Mark(1, 2, Span{50, 60}); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.Committable(); got != 140 {
		t.Fatalf("backwards replay moved committable to %d", got)
	}
	// data loss: restart below, old lineage rejected
	w.Mark(1, 2, Span{150, 160})
	w.Restart(3, 0)
	if got, _ := w.Committable(); got != 0 || w.Pending() != 0 {
		t.Fatalf("after restart: committable %d pending %d, want 0 and 0", got, w.Pending())
	}
	if err := w.Mark(1, 2, Span{0, 10}); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("mark of the lineage before the data loss: %v, want ErrStaleEpoch", err)
	}
	if err := w.Mark(1, 3, Span{0, 10}); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.Committable(); got != 10 {
		t.Fatalf("committable %d, want 10", got)
	}
	var zero Watermark
	if _, ok := zero.Committable(); ok {
		t.Fatal("zero watermark reports a committable offset")
	}
	zero.Skip(Span{0, 5})
	if _, ok := zero.Committable(); ok {
		t.Fatal("skip started a watermark")
	}
}

// TestWatermarkModel checks the watermark against a naive model (a set of
// processed offsets) over random out-of-order spans that tile the offset
// space, with duplicates and stale marks mixed in.
func TestWatermarkModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		start := rapid.Int64Range(0, 1000).Draw(t, "start")
		n := rapid.IntRange(1, 40).Draw(t, "spans")
		spans := make([]Span, n)
		at := start
		for i := range spans {
			l := rapid.Int64Range(1, 5).Draw(t, "len")
			spans[i] = Span{at, at + l}
			at += l
		}
		order := rapid.Permutation(spans).Draw(t, "order")
		w := NewWatermark(3, 7, start)
		done := map[int64]bool{}
		last := start
		for _, s := range order {
			if rapid.Bool().Draw(t, "stale") {
				if err := w.Mark(3, 6, s); !errors.Is(err, ErrStaleEpoch) {
					t.Fatalf("stale mark accepted: %v", err)
				}
				if err := w.Mark(2, 7, s); !errors.Is(err, ErrStaleGeneration) {
					t.Fatalf("mark of another generation accepted: %v", err)
				}
			}
			if err := w.Mark(3, 7, s); err != nil {
				t.Fatal(err)
			}
			for o := s.Start; o < s.End; o++ {
				done[o] = true
			}
			want := start
			for done[want] {
				want++
			}
			got, _ := w.Committable()
			if got != want {
				t.Fatalf("committable %d, model %d", got, want)
			}
			if got < last {
				t.Fatalf("committable moved backwards %d -> %d", last, got)
			}
			last = got
		}
		if got, _ := w.Committable(); got != at || w.Pending() != 0 {
			t.Fatalf("all marked: committable %d pending %d, want %d and 0", got, w.Pending(), at)
		}
	})
}

func BenchmarkWatermarkMarkInOrder(b *testing.B) {
	w := NewWatermark(1, 1, 0)
	b.ReportAllocs()
	var o int64
	for b.Loop() {
		if err := w.Mark(1, 1, Span{o, o + 1}); err != nil {
			b.Fatal(err)
		}
		o++
	}
}

func BenchmarkWatermarkMarkOutOfOrderPairs(b *testing.B) {
	w := NewWatermark(1, 1, 0)
	b.ReportAllocs()
	var o int64
	for b.Loop() {
		// mark o+1 then o: one pending insert and one absorb per pair
		if err := w.Mark(1, 1, Span{o + 1, o + 2}); err != nil {
			b.Fatal(err)
		}
		if err := w.Mark(1, 1, Span{o, o + 1}); err != nil {
			b.Fatal(err)
		}
		o += 2
	}
}
