package offsetstore_test

import (
	"fmt"

	"github.com/fencepost-dev/fencepost/offsetstore"
)

// Batches finish out of order; the committable offset is the end of the
// contiguous processed run, and a reset's jump is skipped only once
// everything before it is done.
func ExampleWatermark() {
	w := offsetstore.NewWatermark(7, 1, 100) // generation 7, epoch 1, starting at 100
	show := func(what string) {
		off, _ := w.Committable()
		fmt.Printf("%-28s committable %d\n", what, off)
	}
	_ = w.Mark(7, 1, offsetstore.Span{Start: 110, End: 120})
	show("110..119 done")
	_ = w.Mark(7, 1, offsetstore.Span{Start: 100, End: 110})
	show("100..109 done")
	w.Skip(offsetstore.Span{Start: 130, End: 200}) // a reset jumped from 130 to 200
	show("reset skips 130..199")
	_ = w.Mark(7, 2, offsetstore.Span{Start: 120, End: 130})
	show("120..129 done")
	if err := w.Mark(6, 1, offsetstore.Span{Start: 200, End: 210}); err != nil {
		fmt.Println("old generation:", err)
	}
	// Output:
	// 110..119 done                committable 100
	// 100..109 done                committable 120
	// reset skips 130..199         committable 120
	// 120..129 done                committable 200
	// old generation: stale group generation
}

// A start request is not an offset: it becomes a Position only when the
// coordinator resolves it.
func ExampleStartRequest() {
	for _, r := range []offsetstore.StartRequest{offsetstore.ByPolicy(), offsetstore.Latest(), offsetstore.Committed(42)} {
		off, ok := r.Offset()
		fmt.Println(r, off, ok)
	}
	if _, err := offsetstore.NewPosition(-1, 1, 1); err != nil {
		fmt.Println("position -1:", err != nil)
	}
	// Output:
	// policy 0 false
	// latest 0 false
	// committed(42) 42 true
	// position -1: true
}
