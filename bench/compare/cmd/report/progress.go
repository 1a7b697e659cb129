package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress is the suite's progress bar. Its unit is an estimated second
// of work: each step has a weight (its expected duration), the bar moves
// by a unit a second while a step runs (up to its weight) and jumps to
// the step's end when it finishes, so the remaining-time estimate means
// something.
type progress struct {
	w   io.Writer
	bar *progressbar.ProgressBar

	mu   sync.Mutex
	done int // units of finished steps
}

func newProgress(w io.Writer, total int) *progress {
	bar := progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
	return &progress{w: w, bar: bar}
}

// step starts a step of the given weight; call the returned function
// when it ends.
func (p *progress) step(desc string, weight int) (end func()) {
	p.bar.Describe(desc)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for moved := 0; ; {
			select {
			case <-stop:
				return
			case <-t.C:
				if moved < weight-1 {
					moved++
					p.set(p.doneUnits() + moved)
				}
			}
		}
	})
	return func() {
		close(stop)
		wg.Wait()
		p.mu.Lock()
		p.done += weight
		p.mu.Unlock()
		p.set(p.doneUnits())
	}
}

func (p *progress) doneUnits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// set moves the bar to n units, short of the end: only finish ends it.
func (p *progress) set(n int) { _ = p.bar.Set(min(n, p.bar.GetMax()-1)) }

// logf prints a line above the bar.
func (p *progress) logf(format string, args ...any) {
	_ = p.bar.Clear()
	fmt.Fprintf(p.w, format+"\n", args...)
	_ = p.bar.RenderBlank()
}

// finish completes the bar.
func (p *progress) finish() { _ = p.bar.Finish() }
