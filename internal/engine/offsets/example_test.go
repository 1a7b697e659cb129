package offsets_test

import (
	"fmt"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
)

// Batches finish out of order; the committable offset is the end of the
// contiguous processed run, and a reset's jump is skipped only once
// everything before it is done.
func ExampleWatermark() {
	w := offsets.NewWatermark(7, 1, 100) // generation 7, epoch 1, starting at 100
	show := func(what string) {
		off, _ := w.Committable()
		fmt.Printf("%-28s committable %d\n", what, off)
	}
	_ = w.Mark(7, 1, offsets.Span{Start: 110, End: 120})
	show("110..119 done")
	_ = w.Mark(7, 1, offsets.Span{Start: 100, End: 110})
	show("100..109 done")
	w.Skip(offsets.Span{Start: 130, End: 200}) // a reset jumped from 130 to 200
	show("reset skips 130..199")
	_ = w.Mark(7, 2, offsets.Span{Start: 120, End: 130})
	show("120..129 done")
	if err := w.Mark(6, 1, offsets.Span{Start: 200, End: 210}); err != nil {
		fmt.Println("old generation:", err)
	}
	// Output:
	// 110..119 done                committable 100
	// 100..109 done                committable 120
	// reset skips 130..199         committable 120
	// 120..129 done                committable 200
	// old generation: stale group generation
}

// A Position is always a real offset: -1 ("latest" in the wire protocol)
// is refused, since logical positions are start requests.
func ExampleNewPosition() {
	if _, err := offsets.NewPosition(-1, 1, 1); err != nil {
		fmt.Println("position -1:", err)
	}
	p, _ := offsets.NewPosition(40, 3, 7)
	fmt.Println(p)
	// Output:
	// position -1: offset must be >= 0 (logical positions such as earliest or latest are start requests, not offsets): -1
	// 40@e3/g7
}
