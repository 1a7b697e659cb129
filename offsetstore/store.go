package offsetstore

import (
	"context"
	"fmt"
	"maps"
	"sync"
)

// CommitStore persists committed offsets for one group generation.
//
// Commit writes every entry of the batch or returns an error. It must
// refuse (with an error wrapping [ErrStaleGeneration]) a batch from a
// generation other than its own, and it returns an error wrapping
// [ErrGenerationEnded] when the group coordinator fenced the commit: the
// caller must not retry that batch, under this or any later generation.
// Other errors are retriable. Commit is called by one goroutine at a time.
type CommitStore interface {
	Commit(ctx context.Context, batch CommitBatch) error
}

// MemoryStore is an in-memory CommitStore for tests and the stage
// harness. It is safe for concurrent use. The zero value is not usable;
// call NewMemoryStore.
type MemoryStore struct {
	mu      sync.Mutex
	gen     Generation
	offsets map[TopicPartition]int64
	commits int
	fenced  bool
}

// NewMemoryStore returns a store that accepts commits of generation gen.
func NewMemoryStore(gen Generation) *MemoryStore {
	return &MemoryStore{gen: gen, offsets: make(map[TopicPartition]int64)}
}

// Commit implements CommitStore.
func (m *MemoryStore) Commit(ctx context.Context, b CommitBatch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fenced {
		return ErrGenerationEnded
	}
	if b.gen != m.gen {
		return fmt.Errorf("%w: batch of generation %d, store of generation %d", ErrStaleGeneration, b.gen, m.gen)
	}
	for _, e := range b.entries {
		m.offsets[e.Partition] = e.Offset
	}
	m.commits++
	return nil
}

// Fence makes every later Commit fail with ErrGenerationEnded, as a group
// coordinator does once a rebalance started.
func (m *MemoryStore) Fence() {
	m.mu.Lock()
	m.fenced = true
	m.mu.Unlock()
}

// Offsets returns a copy of the committed offsets.
func (m *MemoryStore) Offsets() map[TopicPartition]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.offsets)
}

// Commits returns how many commits succeeded.
func (m *MemoryStore) Commits() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commits
}
