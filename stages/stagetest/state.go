package stagetest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// State holds the stores of stateful stages (stages.Stateful) under test,
// with the pipeline's own store code: in memory, each store backed by an
// in-memory changelog, kept from one Run to the next. Give it to a Runner
// (Runner.State) to run stateful stages; Preload state before, Get it
// after, Crash to lose the local stores (the next Run restores them from
// the changelog, as after a process crash). Changes are applied as under
// at_least_once: a Run's changes are in the changelog when it returns.
//
// A State is safe for use by one Run at a time.
type State struct {
	mu        sync.Mutex
	storage   *state.Storage
	changelog map[string][][]stages.Record // topic -> partition -> records
	manager   *state.Manager
	stores    []string
	runs      int32
}

// NewState returns an empty State.
func NewState() *State {
	return &State{storage: &state.Storage{Memory: true}, changelog: map[string][][]stages.Record{}}
}

// stateGroup is the consumer group the changelog topics are named for.
const stateGroup = "stagetest"

// Preload writes key = value into store for partition, as if an earlier
// run had (a nil value deletes the key).
func (s *State) Preload(store string, partition int32, key, value []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	topic := state.ChangelogTopic(stateGroup, store)
	s.appendLocked(topic, partition, []stages.Record{{Key: bytes.Clone(key), Value: bytes.Clone(value)}})
	s.crashLocked() // the stores restore the preloaded values
}

// Get returns key's value in store for partition as its changelog holds
// it (what a restore gives): the state a later Run starts from.
func (s *State) Get(store string, partition int32, key []byte) ([]byte, bool) {
	v, ok := s.Contents(store, partition)[string(key)]
	return v, ok
}

// Contents returns every key and value of store for partition as its
// changelog holds them.
func (s *State) Contents(store string, partition int32) map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]byte{}
	parts := s.changelog[state.ChangelogTopic(stateGroup, store)]
	if int(partition) >= len(parts) {
		return out
	}
	for _, r := range parts[partition] {
		if r.Value == nil {
			delete(out, string(r.Key))
		} else {
			out[string(r.Key)] = r.Value
		}
	}
	return out
}

// Crash throws the local stores away, and with them every change not in
// the changelog: the next Run restores from the changelog.
func (s *State) Crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.crashLocked()
}

func (s *State) crashLocked() {
	if s.manager != nil {
		_ = s.manager.Close()
		s.manager = nil
	}
	s.storage = &state.Storage{Memory: true}
}

// snapshot copies the changelogs (for a replay from the same state).
func (s *State) snapshot() map[string][][]stages.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][][]stages.Record, len(s.changelog))
	for t, parts := range s.changelog {
		out[t] = make([][]stages.Record, len(parts))
		for i, p := range parts {
			out[t][i] = slices.Clone(p)
		}
	}
	return out
}

// restoreFrom sets the changelogs to snap and crashes: the next Run
// starts from snap's state.
func (s *State) restoreFrom(snap map[string][][]stages.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changelog = snap
	s.crashLocked()
}

// unitState returns the process step's view of the State for a Run of
// stages declaring stores.
func (s *State) unitState(stores []string) *stateUnits {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.manager == nil || !slices.Equal(s.stores, stores) {
		if s.manager != nil {
			_ = s.manager.Close()
		}
		s.stores = stores
		s.manager = state.NewManager(state.Config{Group: stateGroup, Stores: stores, Storage: s.storage,
			Writer: changelogOf{s}, Reader: changelogOf{s}})
	}
	s.runs++
	return &stateUnits{m: s.manager, run: s.runs}
}

func (s *State) appendLocked(topic string, partition int32, recs []stages.Record) int64 {
	parts := s.changelog[topic]
	for int(partition) >= len(parts) {
		parts = append(parts, nil)
	}
	for _, r := range recs {
		parts[partition] = append(parts[partition], stages.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)})
	}
	s.changelog[topic] = parts
	return int64(len(parts[partition]))
}

// changelogOf is a State's changelogs as the store code's Writer and
// Reader.
type changelogOf struct{ s *State }

func (c changelogOf) Write(_ context.Context, topic string, partition int32, recs []stages.Record) (int64, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.appendLocked(topic, partition, recs), nil
}

func (c changelogOf) Read(_ context.Context, topic string, partition int32, offset int64) (state.Chunk, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	var recs []stages.Record
	if parts := c.s.changelog[topic]; int(partition) < len(parts) {
		recs = parts[partition]
	}
	end := int64(len(recs))
	if offset > end {
		return state.Chunk{End: end}, state.ErrOutOfRange
	}
	out := make([]stages.Record, 0, end-offset)
	for i := offset; i < end; i++ {
		r := recs[i]
		r.Offset = i
		out = append(out, r)
	}
	return state.Chunk{Records: out, Next: end, End: end}, nil
}

// stateUnits adapts the manager to the process step; each Run is an
// incarnation of its own, so a Run after a Crash restores.
type stateUnits struct {
	m   *state.Manager
	run int32
}

func (u *stateUnits) Begin(ctx context.Context, tp offsetstore.TopicPartition, _ offsets.Generation, epoch offsetstore.Epoch) (context.Context, error) {
	return u.m.Begin(ctx, tp, state.Incarnation{Generation: u.run, Epoch: epoch})
}

func (u *stateUnits) End(ctx context.Context, tp offsetstore.TopicPartition, finished bool) error {
	return u.m.End(ctx, tp, finished)
}

// declaredStores returns the stores the stages declare, checked as the
// pipeline checks them.
func declaredStores(named []NamedStage) ([]string, error) {
	var out []string
	by := map[string]string{}
	for _, n := range named {
		sf, ok := n.Stage.(stages.Stateful)
		if !ok {
			continue
		}
		for _, name := range sf.Stores() {
			if err := stages.ValidStoreName(name); err != nil {
				return nil, fmt.Errorf("stage %s: %w", n.Name, err)
			}
			if other, dup := by[name]; dup {
				return nil, fmt.Errorf("stages %s and %s both declare store %q", other, n.Name, name)
			}
			by[name] = n.Name
			out = append(out, name)
		}
	}
	return out, nil
}

// CheckReplay runs records through the stages twice from the same state
// (the State's, or an empty one when st is nil) and fails t unless both
// runs give the same outputs, dead letters and state: a stateful stage
// must be deterministic, since after a crash or an aborted transaction
// the pipeline runs the same records again over the restored state. It
// returns the first run's result; st (when given) holds the state after
// it.
func (rn Runner) CheckReplay(t T, st *State, records []stages.Record, named ...NamedStage) Result {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	if st == nil {
		st = NewState()
	}
	rn.State = st
	before := st.snapshot()
	first := rn.RunContext(t.Context(), t, records, named...)
	after := st.snapshot()
	st.restoreFrom(before)
	second := rn.RunContext(t.Context(), t, records, named...)
	replayed := st.snapshot()
	st.restoreFrom(after)
	if d := differ("outputs", first.Outputs, second.Outputs); d != "" {
		t.Errorf("stagetest: not deterministic on replay: %s", d)
	}
	if d := differ("dead letters", first.DeadLetters, second.DeadLetters); d != "" {
		t.Errorf("stagetest: not deterministic on replay: %s", d)
	}
	for _, topic := range slices.Sorted(maps.Keys(after)) {
		a, b := fold(after[topic]), fold(replayed[topic])
		for p := range max(len(a), len(b)) {
			var x, y map[string]string
			if p < len(a) {
				x = a[p]
			}
			if p < len(b) {
				y = b[p]
			}
			if !maps.Equal(x, y) {
				t.Errorf("stagetest: not deterministic on replay: %s partition %d holds %v after one run and %v after the replay", topic, p, x, y)
			}
		}
	}
	return first
}

func fold(parts [][]stages.Record) []map[string]string {
	out := make([]map[string]string, len(parts))
	for i, recs := range parts {
		m := map[string]string{}
		for _, r := range recs {
			if r.Value == nil {
				delete(m, string(r.Key))
			} else {
				m[string(r.Key)] = string(r.Value)
			}
		}
		if len(m) > 0 {
			out[i] = m
		}
	}
	return out
}

func differ(what string, a, b []stages.Record) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d %s, then %d on the replay", len(a), what, len(b))
	}
	for i := range a {
		if !equal(a[i], b[i]) {
			return fmt.Sprintf("%s %d differ: key %q value %q, then key %q value %q on the replay", what, i, a[i].Key, a[i].Value, b[i].Key, b[i].Value)
		}
	}
	return ""
}
