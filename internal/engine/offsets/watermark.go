package offsets

import (
	"fmt"

	"github.com/fencepost-dev/fencepost/offsetstore"
)

// Span is a half-open range of offsets [Start, End). The pipeline hands
// records to processing in spans that tile the partition's offset space
// without gaps: a span covers its records and any offsets between them
// that hold no record (compacted away, transaction markers), so marking
// every span done leaves no hole in the watermark.
type Span struct {
	Start int64
	End   int64
}

// Len is End-Start.
func (s Span) Len() int64 { return s.End - s.Start }

func (s Span) String() string { return fmt.Sprintf("[%d,%d)", s.Start, s.End) }

// Watermark tracks which offsets of one partition have been processed and
// reports the contiguous committable offset: one past the end of the
// processed run that starts at the partition's starting position.
//
// Spans may be marked out of order (key-level concurrency finishes
// batches out of order); in-order marks cost O(1) and allocate nothing.
// A reset that jumps forward marks the offsets it skips with
// [Watermark.Skip], so the committable offset passes them only once every
// record before the jump was processed. The committable offset never
// moves backwards within a generation; the one exception is
// [Watermark.Restart], for a data-loss reset, where the old offsets no
// longer exist.
//
// Marks carry the generation and the partition epoch of the batch they
// finish. Marks of another generation are rejected, and so are marks of
// epochs older than the last Restart (the lineage before the data loss).
// Marks of older epochs that are not behind a Restart count: those
// records were really processed.
//
// A Watermark is mutable and owned by exactly one goroutine (the
// coordinator); it is not safe for concurrent use. The zero Watermark has
// nothing committable.
type Watermark struct {
	gen     Generation
	floor   offsetstore.Epoch // marks of older epochs are rejected
	next    int64             // committable offset; valid when set
	set     bool              // a starting position exists
	pending []Span            // marked spans beyond next, sorted, disjoint, not touching next
}

// NewWatermark starts a watermark for a generation at a position of the
// given epoch: the committable offset is start until spans from it on are
// marked.
func NewWatermark(gen Generation, epoch offsetstore.Epoch, start int64) Watermark {
	return Watermark{gen: gen, floor: epoch, next: start, set: true}
}

// Committable returns the offset to commit (the next offset to process
// after the contiguous processed run); ok is false while the partition has
// no starting position.
func (w *Watermark) Committable() (offset int64, ok bool) { return w.next, w.set }

// Floor returns the oldest epoch whose marks the watermark accepts.
func (w *Watermark) Floor() offsetstore.Epoch { return w.floor }

// Generation returns the generation whose marks the watermark accepts.
func (w *Watermark) Generation() Generation { return w.gen }

// Pending returns how many out-of-order spans wait for a gap to close.
func (w *Watermark) Pending() int { return len(w.pending) }

// Mark records the span as processed. It fails, changing nothing, with
// [ErrStaleGeneration] for a mark of another generation, with
// [ErrStaleEpoch] for a mark of an epoch before the last Restart (or
// before any start), and with [ErrEmptySpan] for an empty span. Marking
// offsets that are already committable is harmless.
func (w *Watermark) Mark(gen Generation, epoch offsetstore.Epoch, s Span) error {
	switch {
	case gen != w.gen:
		return ErrStaleGeneration
	case epoch < w.floor || !w.set:
		return ErrStaleEpoch
	case s.End <= s.Start:
		return ErrEmptySpan
	}
	w.add(s)
	return nil
}

// Skip records a span a reset jumped over: offsets that will never be
// processed, by decision (the log start moved past them, or a seek
// skipped them). They count as done, so the committable offset passes
// them once everything before them is processed. An empty span is
// ignored.
func (w *Watermark) Skip(s Span) {
	if w.set && s.End > s.Start {
		w.add(s)
	}
}

func (w *Watermark) add(s Span) {
	if s.Start <= w.next {
		if s.End > w.next {
			w.next = s.End
			if len(w.pending) > 0 {
				w.absorb()
			}
		}
		return
	}
	w.insert(s)
}

// absorb folds pending spans that now touch next into it.
func (w *Watermark) absorb() {
	i := 0
	for ; i < len(w.pending) && w.pending[i].Start <= w.next; i++ {
		if w.pending[i].End > w.next {
			w.next = w.pending[i].End
		}
	}
	if i > 0 {
		n := copy(w.pending, w.pending[i:])
		w.pending = w.pending[:n]
	}
}

// insert adds a span beyond next, merging it with overlapping or adjacent
// pending spans so pending stays sorted and disjoint.
func (w *Watermark) insert(s Span) {
	p := w.pending
	// first index whose End >= s.Start: everything before ends strictly
	// before s and cannot merge with it.
	lo, hi := 0, len(p)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p[m].End < s.Start {
			lo = m + 1
		} else {
			hi = m
		}
	}
	j := lo
	for j < len(p) && p[j].Start <= s.End {
		if p[j].Start < s.Start {
			s.Start = p[j].Start
		}
		if p[j].End > s.End {
			s.End = p[j].End
		}
		j++
	}
	switch {
	case j == lo: // no overlap: insert at lo
		p = append(p, Span{})
		copy(p[lo+1:], p[lo:])
		p[lo] = s
	default: // replace p[lo:j] with s
		p[lo] = s
		n := copy(p[lo+1:], p[j:])
		p = p[:lo+1+n]
	}
	w.pending = p
}

// Continue carries the watermark into generation gen: the partition stays
// owned across a rebalance (cooperative rebalancing keeps the partitions
// that do not move), so what was processed still counts and the next
// commit, under gen, writes it. From now on only marks of gen count.
func (w *Watermark) Continue(gen Generation) { w.gen = gen }

// Restart moves the watermark to offset even if that is backwards, and
// from now on rejects marks of epochs before epoch. It is only for a
// data-loss reset (the position was above the high watermark: the topic
// was recreated or records were lost), where the old offsets name records
// that no longer exist: keeping them would skip the new log's records up
// to the old offset, and a late mark of the old lineage would claim new
// records as processed.
func (w *Watermark) Restart(epoch offsetstore.Epoch, offset int64) {
	w.floor = epoch
	w.pending = w.pending[:0]
	w.next = offset
	w.set = true
}
