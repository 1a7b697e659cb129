package offsetstore_test

import (
	"fmt"

	"github.com/fencepost-dev/fencepost/offsetstore"
)

// A start request is not an offset: it becomes a Position only when the
// coordinator resolves it.
func ExampleStartRequest() {
	for _, r := range []offsetstore.StartRequest{offsetstore.ByPolicy(), offsetstore.Latest(), offsetstore.Committed(42)} {
		off, ok := r.Offset()
		fmt.Println(r, off, ok)
	}
	// Output:
	// policy 0 false
	// latest 0 false
	// committed(42) 42 true
}
