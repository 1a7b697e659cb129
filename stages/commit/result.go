package commit

import "github.com/fencepost-dev/fencepost/offsetstore"

// Request asks the commit stage to commit Batch to Store. The store
// belongs to Batch's generation.
type Request struct {
	Batch offsetstore.CommitBatch
	Store offsetstore.CommitStore
}

// Result answers one Request. Err is nil on success; it wraps
// offsetstore.ErrGenerationEnded when the group fenced the commit.
type Result struct {
	Batch offsetstore.CommitBatch
	Err   error
}
