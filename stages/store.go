package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/fencepost-dev/fencepost/internal/stateref"
)

// Store is a stage's keyed state for the input partition of the records
// in the current Process call. A stage gets it with StoreFor, inside
// Process, for a store it declared (Stateful).
//
// Contract:
//   - Scope: one store per declared name per input partition. The state
//     moves with its partition: after a rebalance, the member that owns
//     the partition sees what the previous owner wrote.
//   - Read your writes: a Put or Delete is visible to the next Get or Scan
//     in the same call and in every later call for the partition.
//   - Failures: the writes of a Process call that fails are taken back
//     before its records run again (alone, retried) or are dead-lettered,
//     so a retried record does not count twice. A call that returns a
//     *RecordErrors keeps its writes: the records it does not name count
//     as finished and do not run again. Write nothing for a record you
//     name in it.
//   - Durability: every change is in the store's changelog topic
//     (<group>-<name>-changelog) before the offsets of the records that
//     caused it are committed (at_least_once), or in the same transaction
//     as the outputs and the offsets (exactly_once). After a crash the
//     store is restored from the changelog: under exactly_once it holds
//     exactly the changes of the committed records; under at_least_once
//     the records processed again after a crash change it again.
//   - Ownership: Get returns a copy the caller owns. Put copies key and
//     value: the caller may reuse them. A nil value is not allowed (use
//     Delete; an empty value is fine).
//   - A call that fails takes its writes back: its records run again,
//     alone, so they do not count twice. A call that returns a
//     *RecordErrors naming its failed records keeps its writes (the
//     other records count as finished): fail a record before writing
//     for it.
//   - The Store is valid only during the Process call that got it.
//
// Errors: ErrNoStore when the name was not declared or the pipeline has
// no state configured; an error from the local storage (disk full, I/O)
// is returned as is and fails the call like any stage error.
type Store interface {
	// Get returns the value of key and whether it exists.
	Get(key []byte) (value []byte, ok bool, err error)
	// Put sets key to value (not nil).
	Put(key, value []byte) error
	// Delete removes key (nothing happens when it does not exist).
	Delete(key []byte) error
	// Scan calls fn for every key that starts with prefix, in key order,
	// with what Put and Delete left (the call's own writes included).
	// key and value are valid only during fn. An error from fn ends the
	// scan and is returned.
	Scan(prefix []byte, fn func(key, value []byte) error) error
}

// FromScanner is implemented by a Store that can start a scan at a key,
// as the pipeline's stores can. Call ScanFrom, which uses it when there.
type FromScanner interface {
	// ScanFrom is Scan of the keys with prefix that are not below start.
	ScanFrom(prefix, start []byte, fn func(key, value []byte) error) error
}

// ScanFrom calls fn for every key of st that starts with prefix and is
// not below start (start need not have the prefix), in key order, as
// Scan does. A store that is a FromScanner seeks to start: what is
// before it, deleted keys included, is not read. So a queue kept in a
// store, such as a time index whose earliest entries are deleted as
// they fall due, is read from its head, not from its prefix across
// every deletion the storage still holds. Any other store is scanned
// from the prefix, skipping the keys before start.
func ScanFrom(st Store, prefix, start []byte, fn func(key, value []byte) error) error {
	if f, ok := st.(FromScanner); ok {
		return f.ScanFrom(prefix, start, fn)
	}
	return st.Scan(prefix, func(key, value []byte) error {
		if bytes.Compare(key, start) < 0 {
			return nil
		}
		return fn(key, value)
	})
}

// Stateful is implemented by stages that keep state: Stores names the
// stores the stage uses (each a changelog topic <group>-<name>-changelog;
// names are [a-zA-Z0-9._-], unique in the pipeline). The pipeline opens
// them for each input partition before the partition's records reach
// the stage, and hands a stateful stage only batches of one partition,
// in offset order.
type Stateful interface {
	Stores() []string
}

// ErrNoStore is returned by StoreFor for a store the stage did not
// declare (Stateful), or when the pipeline runs without state.
var ErrNoStore = errors.New("no such store: declare it in the stage's Stores, and configure state")

// StoreFor returns the store named name for the partition of the records
// in the Process call whose context is ctx. See Store for the contract.
func StoreFor(ctx context.Context, name string) (Store, error) {
	s, err := stateref.Find(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%w: %q (%v)", ErrNoStore, name, err)
	}
	st, ok := s.(Store)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoStore, name)
	}
	return st, nil
}

var storeName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,200}$`)

// ValidStoreName reports, as an error saying what to change, whether name
// can name a store: it becomes part of a topic name.
func ValidStoreName(name string) error {
	if !storeName.MatchString(name) || name == "." || name == ".." {
		return fmt.Errorf("store name %q: use 1 to 200 of the characters a-z A-Z 0-9 . _ - (it is part of the changelog topic's name)", name)
	}
	return nil
}

// Codec turns values of type V into bytes and back, for Typed.
type Codec[V any] interface {
	Encode(V) ([]byte, error)
	Decode([]byte) (V, error)
}

// JSONCodec encodes values as JSON (encoding/json).
type JSONCodec[V any] struct{}

// Encode returns v as JSON.
func (JSONCodec[V]) Encode(v V) ([]byte, error) { return json.Marshal(v) }

// Decode parses b as JSON into a V.
func (JSONCodec[V]) Decode(b []byte) (V, error) {
	var v V
	err := json.Unmarshal(b, &v)
	return v, err
}

// Typed is a Store whose values are V, through a Codec. Keys stay bytes.
// A value the codec cannot decode is an error naming the key.
type Typed[V any] struct {
	Store Store
	Codec Codec[V]
}

// Get returns the value of key and whether it exists.
func (t Typed[V]) Get(key []byte) (V, bool, error) {
	var zero V
	b, ok, err := t.Store.Get(key)
	if err != nil || !ok {
		return zero, ok, err
	}
	v, err := t.Codec.Decode(b)
	if err != nil {
		return zero, false, fmt.Errorf("decoding the stored value of key %q: %w", key, err)
	}
	return v, true, nil
}

// Put sets key to v.
func (t Typed[V]) Put(key []byte, v V) error {
	b, err := t.Codec.Encode(v)
	if err != nil {
		return fmt.Errorf("encoding the value of key %q: %w", key, err)
	}
	if b == nil {
		b = []byte{}
	}
	return t.Store.Put(key, b)
}

// Delete removes key.
func (t Typed[V]) Delete(key []byte) error { return t.Store.Delete(key) }

// Repartitioner is implemented by a stage after which the pipeline
// repartitions: the stage gives each record its new key (the Key of the
// records it returns), the pipeline writes them to a repartition topic
// placed by that key, and the stages after it run on that topic, on the
// member that owns the key's partition. So a stateful stage after it sees
// every record of a key in one partition. The built-in "repartition"
// stage is one; see pipeline.WithRepartition for the topic and its
// guarantees.
type Repartitioner interface {
	Stage
	// RepartitionName names the repartition topic
	// (<group>-<name>-repartition): [a-zA-Z0-9._-], unique in the
	// pipeline.
	RepartitionName() string
}

// TableReader is implemented by stages that read tables: compacted topics
// mirrored into read-only stores (a Put or Delete fails). Partition p of
// a table's topic fills the store of input partition p, so the topic
// must be partitioned as the stage's input (the same partition count,
// keys placed the same way; the pipeline checks the count at start). A
// table catches up with its topic before each Process call of its
// partition: an update is seen by the records processed after it was
// read. Get a table's store with StoreFor, by its name.
type TableReader interface {
	// Tables maps store names to the topics they mirror.
	Tables() map[string]string
}

// Grouper is implemented by a stage that groups records by a key of its
// own (a count per user of records keyed by order): unless the input is
// partitioned by that key already, the pipeline repartitions the records
// by it before the stage, as a Repartitioner before it would, so the
// stage sees every record of a key in one partition.
type Grouper interface {
	Stage
	// GroupKey returns the repartition topic's name (see
	// Repartitioner.RepartitionName) and the key of a record; ok is
	// false when the input is partitioned as the stage needs (no
	// repartition).
	GroupKey() (name string, key func(Record) ([]byte, error), ok bool)
}

// GlobalTableReader is implemented by stages that read global tables:
// compacted topics every member mirrors whole into one read-only store
// (every partition, so any key is found, whatever the partitioning), kept
// current by catching up with the topic before Process calls (at most
// every 100ms). Unlike a TableReader's, the topic may be partitioned in
// any way; the cost is that every member stores and reads all of it.
type GlobalTableReader interface {
	// GlobalTables maps store names to the topics they mirror.
	GlobalTables() map[string]string
}
