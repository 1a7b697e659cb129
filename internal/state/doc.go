// Package state keeps the stores of stateful stages: one pebble database
// per store and input partition (on disk under state.dir, or in memory),
// the changes not yet applied to it, its checkpoint (the changelog offset
// it reflects, written atomically with the data), and its restore from
// the store's changelog topic.
//
// The changelog is the truth; a local store is a cache of it. A change
// reaches pebble only once it is in the changelog: at_least_once applies
// a call's changes after the changelog write was acknowledged
// (Partition.Applied), exactly_once stages them in the open transaction
// (Partition.Stage) and applies them when it commits (Partition.Commit) or
// drops them when it aborts (Partition.Discard). So a crash at any point
// leaves pebble at or behind the changelog, and a restore from its
// checkpoint catches up.
package state

import "encoding/binary"

func putOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b, uint64(off)) }
