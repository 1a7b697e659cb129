// Package countstage has the count-by-key stages of the state
// benchmarks: one keeps its counts in a store (stages.Stateful), the
// other does the same work in a map of its own, with no store, as the
// baseline that shows what state costs on the record path.
//
// A count is an 8-byte big-endian integer, the format of Kafka Streams'
// Long serde, so that the store a Kafka Streams groupByKey().count()
// writes to its changelog and the one this stage writes are the same
// bytes: both engines restore the same changelog topic.
package countstage

import (
	"context"
	"encoding/binary"
	"sync"

	"github.com/fencepost-dev/fencepost/stages"
)

// Store is the name of the counts' store: its changelog is
// <group>-counts-changelog, the name Kafka Streams gives the changelog of
// a count materialized as "counts" when its application.id is the group.
const Store = "counts"

// Encode returns n as a stored count.
func Encode(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// Decode reads a stored count (0 for a value that is not 8 bytes).
func Decode(b []byte) int64 {
	if len(b) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// Stateful counts its records per key in the store "counts" and returns
// no records.
type Stateful struct{}

// Stores implements stages.Stateful.
func (Stateful) Stores() []string { return []string{Store} }

// Process implements stages.Stage.
func (Stateful) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	st, err := stages.StoreFor(ctx, Store)
	if err != nil {
		return nil, err
	}
	var buf [8]byte
	for _, r := range in {
		v, _, err := st.Get(r.Key)
		if err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint64(buf[:], uint64(Decode(v)+1))
		if err := st.Put(r.Key, buf[:]); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// Stateless does Stateful's work (a lookup, a decode, an encode and a
// write of each record's count) in a map of its own: nothing durable,
// nothing restored, no changelog.
type Stateless struct {
	mu     sync.Mutex
	counts map[string][]byte
}

// Process implements stages.Stage.
func (s *Stateless) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string][]byte{}
	}
	var buf [8]byte
	for _, r := range in {
		v := s.counts[string(r.Key)]
		binary.BigEndian.PutUint64(buf[:], uint64(Decode(v)+1))
		if v == nil {
			v = make([]byte, 8)
		}
		copy(v, buf[:])
		s.counts[string(r.Key)] = v
	}
	return nil, nil
}
