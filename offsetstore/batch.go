package offsetstore

import "sync/atomic"

// batchSeq numbers batches so a result can be matched to the exact batch
// it answers.
var batchSeq atomic.Uint64

// BatchID identifies one batch: every batch built gets a new ID, so an
// answer is matched to its request by identity, not by shape.
type BatchID uint64

// batch is what every batch is: an identity, the group generation it
// belongs to, and one entry per partition. Immutable: its fields are
// unexported and the constructors own (or copy) the entries.
type batch[E any] struct {
	id      BatchID
	gen     Generation
	entries []E
}

// newBatch gives a batch of entries (owned from now on) a new identity.
func newBatch[E any](gen Generation, entries []E) batch[E] {
	return batch[E]{id: BatchID(batchSeq.Add(1)), gen: gen, entries: entries}
}

// ID identifies the batch; the zero ID belongs to no batch.
func (b batch[E]) ID() BatchID { return b.id }

// Generation is the group generation the batch belongs to.
func (b batch[E]) Generation() Generation { return b.gen }

// Len is the number of partitions in the batch.
func (b batch[E]) Len() int { return len(b.entries) }

// At returns entry i, 0 <= i < Len().
func (b batch[E]) At(i int) E { return b.entries[i] }

// FetchEntry is one partition of a [FetchBatch]: fetch from Position.
type FetchEntry struct {
	Partition TopicPartition
	Position  Position
}

// FetchBatch is what one fetcher fetches in one request: partitions led by
// one broker, each at its position. It is immutable; the coordinator
// builds it and the fetcher only reads it. The fetcher answers with one
// result per entry, in the same order.
type FetchBatch struct {
	batch[FetchEntry]
	broker   int32
	fetcher  int
	maxBytes int32
}

// NewFetchBatch builds a batch for one fetcher (a broker and one of its
// fetchers: the concurrent requests to that broker) from entries (copied).
// maxBytes is the response size the request may ask for.
func NewFetchBatch(broker int32, fetcher int, gen Generation, maxBytes int32, entries []FetchEntry) FetchBatch {
	return FetchBatch{batch: newBatch(gen, append([]FetchEntry(nil), entries...)), broker: broker, fetcher: fetcher, maxBytes: maxBytes}
}

// FetchBatchBuilder collects the entries of one FetchBatch; Build hands
// them to the batch without copying. The zero value is ready to use; a
// builder is reused after Build.
type FetchBatchBuilder struct {
	entries []FetchEntry
}

// Grow makes room for n more entries.
func (b *FetchBatchBuilder) Grow(n int) {
	if cap(b.entries)-len(b.entries) < n {
		e := make([]FetchEntry, len(b.entries), len(b.entries)+n)
		copy(e, b.entries)
		b.entries = e
	}
}

// Add appends an entry.
func (b *FetchBatchBuilder) Add(e FetchEntry) { b.entries = append(b.entries, e) }

// Len is the number of entries added since the last Build.
func (b *FetchBatchBuilder) Len() int { return len(b.entries) }

// Build returns the batch of the entries added so far and empties the
// builder. The batch owns the entries; the builder never touches them
// again.
func (b *FetchBatchBuilder) Build(broker int32, fetcher int, gen Generation, maxBytes int32) FetchBatch {
	fb := FetchBatch{batch: newBatch(gen, b.entries), broker: broker, fetcher: fetcher, maxBytes: maxBytes}
	b.entries = nil
	return fb
}

// Broker is the leader the batch is routed to.
func (b FetchBatch) Broker() int32 { return b.broker }

// Fetcher is which of the broker's concurrent fetchers (0 to
// consumer.fetch_concurrency-1) the batch is for.
func (b FetchBatch) Fetcher() int { return b.fetcher }

// MaxBytes is the most response bytes the fetch may request; the byte
// budget for fetched-but-unfinished records set it.
func (b FetchBatch) MaxBytes() int32 { return b.maxBytes }

// PositionAt returns the position of entry i, 0 <= i < Len().
func (b FetchBatch) PositionAt(i int) Position { return b.entries[i].Position }

// ResolveEntry is one partition of a [ResolveBatch]: look up what Request
// needs, for the partition's Epoch.
type ResolveEntry struct {
	Partition TopicPartition
	Request   StartRequest
	Epoch     Epoch
}

// ResolveBatch is one lookup of log bounds (ListOffsets) for partitions
// whose start requests must be resolved or whose committed offsets must be
// validated. Immutable; the resolver answers with one result per entry,
// in order.
type ResolveBatch struct {
	batch[ResolveEntry]
}

// NewResolveBatch builds a resolve batch from entries (copied).
func NewResolveBatch(gen Generation, entries []ResolveEntry) ResolveBatch {
	return ResolveBatch{newBatch(gen, append([]ResolveEntry(nil), entries...))}
}

// CommitEntry is one partition's offset to commit: the next offset to
// process, as Kafka expects.
type CommitEntry struct {
	Partition TopicPartition
	Offset    int64
}

// CommitBatch is one commit: offsets processed in one generation. It is
// immutable, and it carries the generation it must be committed under; a
// [CommitStore] refuses a batch whose generation is not its own.
type CommitBatch struct {
	batch[CommitEntry]
}

// NewCommitBatch builds a commit batch from entries (copied).
func NewCommitBatch(gen Generation, entries []CommitEntry) CommitBatch {
	return CommitBatch{newBatch(gen, append([]CommitEntry(nil), entries...))}
}

// Entries returns a copy of the entries.
func (b CommitBatch) Entries() []CommitEntry { return append([]CommitEntry(nil), b.entries...) }
