package offsets

import "context"

// CommitStore persists committed offsets for one group generation.
//
// Commit writes every entry of the batch or returns an error. It must
// refuse (with an error wrapping [ErrStaleGeneration]) a batch from a
// generation other than its own, and it returns an error wrapping
// [ErrGenerationEnded] when the group coordinator fenced the commit: the
// caller must not retry that batch, under this or any later generation.
// Other errors are retriable. Commit is called by one goroutine at a time.
type CommitStore interface {
	Commit(ctx context.Context, batch CommitRequest) error
}
