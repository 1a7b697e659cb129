package commit

import "github.com/fencepost-dev/fencepost/internal/engine/offsets"

// Job asks the commit step to write Request to Store. The store belongs
// to Request's generation.
type Job struct {
	Request offsets.CommitRequest
	Store   offsets.CommitStore
	// Abort asks the store (an offsets.TransactionStore) to abort its
	// open transaction instead of committing; Request then names only
	// the generation.
	Abort bool
}

// Result answers one Job. Err is nil on success; it wraps
// offsets.ErrGenerationEnded when the group fenced the commit.
type Result struct {
	Request offsets.CommitRequest
	Err     error
}
