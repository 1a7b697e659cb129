package offsets

import (
	"sync/atomic"

	"github.com/fencepost-dev/fencepost/offsetstore"
)

// requestSeq numbers requests so a result can be matched to the exact request
// it answers.
var requestSeq atomic.Uint64

// RequestID identifies one request: every request built gets a new ID, so an
// answer is matched to its request by identity, not by shape.
type RequestID uint64

// request is what every request is: an identity, the group generation it
// belongs to, and one entry per partition. Immutable: its fields are
// unexported and the constructors own (or copy) the entries.
type request[E any] struct {
	id      RequestID
	gen     Generation
	entries []E
}

// newRequest gives a request of entries (owned from now on) a new identity.
func newRequest[E any](gen Generation, entries []E) request[E] {
	return request[E]{id: RequestID(requestSeq.Add(1)), gen: gen, entries: entries}
}

// ID identifies the request; the zero ID belongs to no request.
func (b request[E]) ID() RequestID { return b.id }

// Generation is the group generation the request belongs to.
func (b request[E]) Generation() Generation { return b.gen }

// Len is the number of partitions in the request.
func (b request[E]) Len() int { return len(b.entries) }

// At returns entry i, 0 <= i < Len().
func (b request[E]) At(i int) E { return b.entries[i] }

// FetchEntry is one partition of a [FetchRequest]: fetch from Position.
type FetchEntry struct {
	Partition offsetstore.TopicPartition
	Position  Position
	// LeaderEpoch is the leader epoch the metadata gave the partition's
	// leader, sent as CurrentLeaderEpoch (KIP-320); -1 when unknown. The
	// zero value is leader epoch 0, a real one: set it.
	LeaderEpoch int32
}

// FetchRequest is what one fetcher fetches in one request: partitions led by
// one broker, each at its position. It is immutable; the coordinator
// builds it and the fetcher only reads it. The fetcher answers with one
// result per entry, in the same order.
type FetchRequest struct {
	request[FetchEntry]
	broker   int32
	fetcher  int
	maxBytes int32
}

// NewFetchRequest builds a request for one fetcher (a broker and one of its
// fetchers: the concurrent requests to that broker) from entries (copied).
// maxBytes is the response size the request may ask for.
func NewFetchRequest(broker int32, fetcher int, gen Generation, maxBytes int32, entries []FetchEntry) FetchRequest {
	return FetchRequest{request: newRequest(gen, append([]FetchEntry(nil), entries...)), broker: broker, fetcher: fetcher, maxBytes: maxBytes}
}

// FetchRequestBuilder collects the entries of one FetchRequest; Build hands
// them to the request without copying. The zero value is ready to use; a
// builder is reused after Build.
type FetchRequestBuilder struct {
	entries []FetchEntry
}

// Grow makes room for n more entries.
func (b *FetchRequestBuilder) Grow(n int) {
	if cap(b.entries)-len(b.entries) < n {
		e := make([]FetchEntry, len(b.entries), len(b.entries)+n)
		copy(e, b.entries)
		b.entries = e
	}
}

// Add appends an entry.
func (b *FetchRequestBuilder) Add(e FetchEntry) { b.entries = append(b.entries, e) }

// Len is the number of entries added since the last Build.
func (b *FetchRequestBuilder) Len() int { return len(b.entries) }

// Build returns the request of the entries added so far and empties the
// builder. The request owns the entries; the builder never touches them
// again.
func (b *FetchRequestBuilder) Build(broker int32, fetcher int, gen Generation, maxBytes int32) FetchRequest {
	fb := FetchRequest{request: newRequest(gen, b.entries), broker: broker, fetcher: fetcher, maxBytes: maxBytes}
	b.entries = nil
	return fb
}

// Broker is the leader the request is routed to.
func (b FetchRequest) Broker() int32 { return b.broker }

// Fetcher is which of the broker's concurrent fetchers (0 to
// consumer.fetch_concurrency-1) the request is for.
func (b FetchRequest) Fetcher() int { return b.fetcher }

// MaxBytes is the most response bytes the fetch may request; the byte
// budget for fetched-but-unfinished records set it.
func (b FetchRequest) MaxBytes() int32 { return b.maxBytes }

// PositionAt returns the position of entry i, 0 <= i < Len().
func (b FetchRequest) PositionAt(i int) Position { return b.entries[i].Position }

// ResolveEntry is one partition of a [ResolveRequest]: look up what Request
// needs, for the partition's Epoch (its incarnation, not Kafka's leader
// epoch).
type ResolveEntry struct {
	Partition offsetstore.TopicPartition
	Request   offsetstore.StartRequest
	Epoch     offsetstore.Epoch
	// Leader is the broker the metadata says leads the partition, -1 if
	// unknown; LeaderEpoch is its leader epoch, sent as
	// CurrentLeaderEpoch in ListOffsets and OffsetForLeaderEpoch, -1 if
	// unknown. The zero values name broker 0 and leader epoch 0: set
	// them.
	Leader      int32
	LeaderEpoch int32
	// ValidateLeaderEpoch, when >= 0, is the leader epoch of the record
	// just before Request's offset (the last record fetched or
	// committed): the resolver asks the leader where that leader epoch
	// ends (OffsetForLeaderEpoch) so the coordinator can tell whether the
	// log diverged below the offset (KIP-320). -1: no such check.
	ValidateLeaderEpoch int32
}

// ResolveRequest is one lookup of log bounds (ListOffsets) for partitions
// whose start requests must be resolved or whose committed offsets must be
// validated. Immutable; the resolver answers with one result per entry,
// in order.
type ResolveRequest struct {
	request[ResolveEntry]
}

// NewResolveRequest builds a resolve request from entries (copied).
func NewResolveRequest(gen Generation, entries []ResolveEntry) ResolveRequest {
	return ResolveRequest{newRequest(gen, append([]ResolveEntry(nil), entries...))}
}

// CommitEntry is one partition's offset to commit: the next offset to
// process, as Kafka expects.
type CommitEntry struct {
	Partition offsetstore.TopicPartition
	Offset    int64
	// LeaderEpoch is the leader epoch of the record at Offset-1 (the last
	// one processed), -1 when unknown. OffsetCommit v7+ stores it with
	// the offset, so the next owner can check the offset against the log
	// (OffsetForLeaderEpoch) before fetching from it; the group member
	// sends OffsetCommit v7 or later, and commits it.
	LeaderEpoch int32
}

// CommitRequest is one commit: offsets processed in one generation. It is
// immutable, and it carries the generation it must be committed under; a
// [CommitStore] refuses a request whose generation is not its own.
type CommitRequest struct {
	request[CommitEntry]
}

// NewCommitRequest builds a commit request from entries (copied).
func NewCommitRequest(gen Generation, entries []CommitEntry) CommitRequest {
	return CommitRequest{newRequest(gen, append([]CommitEntry(nil), entries...))}
}

// Entries returns a copy of the entries.
func (b CommitRequest) Entries() []CommitEntry { return append([]CommitEntry(nil), b.entries...) }
