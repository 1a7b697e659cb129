package pipeline

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// memoryStore is an in-memory offsets.CommitStore for the
// coordinator's tests: a group's offsets, fenced like a coordinator's.
// It is safe for concurrent use. Make one with newMemoryStore.
type memoryStore struct {
	mu      sync.Mutex
	gen     offsets.Generation
	offsets map[offsetstore.TopicPartition]int64
	commits int
	fenced  bool
}

// newMemoryStore returns a store that accepts commits of generation gen.
func newMemoryStore(gen offsets.Generation) *memoryStore {
	return &memoryStore{gen: gen, offsets: make(map[offsetstore.TopicPartition]int64)}
}

// Commit implements offsets.CommitStore.
func (m *memoryStore) Commit(ctx context.Context, b offsets.CommitRequest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fenced {
		return offsets.ErrGenerationEnded
	}
	if b.Generation() != m.gen {
		return fmt.Errorf("%w: batch of generation %d, store of generation %d", offsets.ErrStaleGeneration, b.Generation(), m.gen)
	}
	for _, e := range b.Entries() {
		m.offsets[e.Partition] = e.Offset
	}
	m.commits++
	return nil
}

// Fence makes every later Commit fail with ErrGenerationEnded, as a group
// coordinator does once a rebalance started.
func (m *memoryStore) Fence() {
	m.mu.Lock()
	m.fenced = true
	m.mu.Unlock()
}

// Offsets returns a copy of the committed offsets.
func (m *memoryStore) Offsets() map[offsetstore.TopicPartition]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.offsets)
}

// Commits returns how many commits succeeded.
func (m *memoryStore) Commits() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commits
}
