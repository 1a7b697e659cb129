package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/stateref"
	"github.com/fencepost-dev/fencepost/internal/wait"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// Writer writes a partition's changes to its changelog partition.
type Writer interface {
	// Write writes records to partition of topic (under exactly_once, in
	// the open transaction) and returns the offset after the last one,
	// or -1 when the broker did not say. An error marked
	// stages.Unavailable is an outage: the same write is tried again.
	Write(ctx context.Context, topic string, partition int32, records []stages.Record) (next int64, err error)
}

// ChangelogTopic is the changelog topic of a group's store.
func ChangelogTopic(group, store string) string { return group + "-" + store + "-changelog" }

// Config configures a Manager.
type Config struct {
	Group  string
	Stores []string
	// Tables are read-only stores that mirror a compacted topic (store
	// name -> topic): the topic is their changelog, never written; they
	// catch up with it before every unit, so a table update is seen by
	// the records processed after it was read.
	Tables map[string]string
	// Globals are read-only tables every member reads whole (store name
	// -> topic), GlobalPartitions their topics' partition counts. Units
	// that use one catch it up before they run, at most once per
	// GlobalEvery (default 100ms) across units.
	Globals          map[string]string
	GlobalPartitions map[string]int32
	GlobalEvery      time.Duration
	// Sources, if set, says which stores (and tables) the units of each
	// source topic use (the stateful stages of the segment that runs on it); units of
	// a topic not in it have no state. nil: every unit uses every store.
	Sources map[string][]string
	Storage *Storage
	Writer  Writer
	Reader  Reader
	// Transactional: exactly_once (changes are staged in the open
	// transaction and applied when it commits).
	Transactional bool
	Log           *zap.Logger
	// Backoff is the first wait before a failed changelog write or
	// restore is tried again (doubling up to 5s). Default 100ms.
	Backoff time.Duration
	// Counters, if set, is where the Manager counts; the caller reads it.
	Counters *Counters
}

// Counters are a Manager's figures, safe to read from any goroutine.
type Counters struct {
	// Restoring is how many store partitions are restoring now, and
	// RestoreLeft how many changelog offsets they have left.
	Restoring, RestoreLeft atomic.Int64
	// Restored counts the changelog records and bytes (keys and values)
	// restored; Restores the restores that ended.
	Restored, RestoredBytes, Restores atomic.Int64
	// Rebuilt counts the restores that wiped a local store first (empty
	// of a checkpoint, foreign or corrupt) and so read the whole
	// changelog.
	Rebuilt atomic.Int64
	// Changes counts the changes written to changelogs.
	Changes atomic.Int64
}

// Manager owns a run's stores: it opens and restores a partition's stores
// before the partition's first unit of each incarnation, hands a unit its
// stores, writes their changes to the changelog when the unit ends, and
// applies or drops them as transactions commit or abort.
//
// Units of one partition never run at once (the pipeline orders stateful
// partitions), so a partition's stores are used by one unit at a time;
// mu guards only the map of partitions, which units of different
// partitions share.
type Manager struct {
	cfg Config

	mu    sync.Mutex
	parts map[offsetstore.TopicPartition]*partState
	// globals are the global tables opened (guarded by mu).
	globals map[string]*GlobalTable
}

// partState is one input partition's stores.
type partState struct {
	stores map[string]*Partition
	// incarnation is the unit incarnation the stores were last restored
	// for: a partition assigned anew, reset or rewound restores again.
	incarnation Incarnation
	restored    bool
	// written is, per store, the changelog offset after this partition's
	// changes in the open transaction (exactly_once).
	written map[string]int64
	// active counts the partition's units between Begin and End;
	// revoked: the member gave the partition up while one ran (its
	// stores close when the last one ends). Both guarded by Manager.mu.
	active  int
	revoked bool
}

// Incarnation identifies a stretch of a partition's processing: its
// group generation and its epoch.
type Incarnation struct {
	Generation int32
	Epoch      offsetstore.Epoch
}

// NewManager returns a Manager.
func NewManager(cfg Config) *Manager {
	if cfg.Backoff <= 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Counters == nil {
		cfg.Counters = &Counters{}
	}
	if cfg.GlobalEvery <= 0 {
		cfg.GlobalEvery = 100 * time.Millisecond
	}
	return &Manager{cfg: cfg, parts: map[offsetstore.TopicPartition]*partState{}, globals: map[string]*GlobalTable{}}
}

// stateful reports whether units of topic use stores.
func (m *Manager) stateful(topic string) bool {
	return m.cfg.Sources == nil || len(m.cfg.Sources[topic]) > 0
}

// storesOf returns the stores units of topic use.
func (m *Manager) storesOf(topic string) []string {
	if m.cfg.Sources == nil {
		return m.cfg.Stores
	}
	return m.cfg.Sources[topic]
}

func (m *Manager) part(tp offsetstore.TopicPartition) *partState {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.parts[tp]
	if ps == nil {
		ps = &partState{stores: map[string]*Partition{}, written: map[string]int64{}}
		m.parts[tp] = ps
	}
	return ps
}

// Begin readies tp's stores for a unit of incarnation inc (restoring them
// first when the incarnation is new) and returns the context the unit's
// chain runs in. Transient failures are retried until ctx ends; an error
// is returned only when ctx ended or the local storage failed.
func (m *Manager) Begin(ctx context.Context, tp offsetstore.TopicPartition, inc Incarnation) (context.Context, error) {
	if !m.stateful(tp.Topic) {
		return ctx, nil
	}
	ps := m.part(tp)
	m.mu.Lock()
	current := ps.restored && ps.incarnation == inc
	ps.active++
	ps.revoked = false
	m.mu.Unlock()
	ok := false
	defer func() {
		if !ok {
			m.unitEnded(tp, ps)
		}
	}()
	globals := map[string]*GlobalTable{}
	for _, name := range m.storesOf(tp.Topic) {
		if _, global := m.cfg.Globals[name]; global {
			g, err := m.global(ctx, name)
			if err != nil {
				return ctx, err
			}
			globals[name] = g
			continue
		}
		if _, table := m.cfg.Tables[name]; table || !current {
			if err := m.restore(ctx, ps, name, tp.Partition); err != nil {
				return ctx, err
			}
		}
	}
	if !current {
		m.mu.Lock()
		ps.incarnation, ps.restored = inc, true
		m.mu.Unlock()
	}
	ok = true
	ctx = stateref.With(ctx, func(name string) (any, error) {
		if g := globals[name]; g != nil {
			return g, nil
		}
		p := ps.stores[name]
		if p == nil {
			return nil, fmt.Errorf("the stage did not declare store %q", name)
		}
		if topic, table := m.cfg.Tables[name]; table {
			return readOnly{p, topic}, nil
		}
		return p, nil
	})
	return stateref.WithJournal(ctx, journal(ps.stores)), nil
}

// global opens (the first time) and catches up the global table name,
// retrying what the broker refuses for now until ctx ends.
func (m *Manager) global(ctx context.Context, name string) (*GlobalTable, error) {
	m.mu.Lock()
	g := m.globals[name]
	if g == nil {
		var err error
		id := Identity{Group: m.cfg.Group, Store: name, Changelog: m.cfg.Globals[name]}
		g, _, err = m.cfg.Storage.OpenGlobal(id, m.cfg.GlobalPartitions[name], m.cfg.GlobalEvery)
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		m.globals[name] = g
	}
	m.mu.Unlock()
	backoff := m.cfg.Backoff
	for {
		n, err := g.CatchUp(ctx, m.cfg.Reader)
		m.cfg.Counters.Restored.Add(n)
		if err == nil || ctx.Err() != nil {
			return g, err
		}
		m.cfg.Log.Warn("state: catching up a global table failed; trying again", zap.String("table", name),
			zap.Duration("backoff", backoff), zap.Error(err))
		if !wait.For(ctx, backoff) {
			return g, err
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// restore opens (when needed) and restores one store of a partition,
// retrying what the changelog's broker refuses for now.
func (m *Manager) restore(ctx context.Context, ps *partState, name string, partition int32) error {
	p := ps.stores[name]
	if p == nil {
		changelog := ChangelogTopic(m.cfg.Group, name)
		if topic, table := m.cfg.Tables[name]; table {
			changelog = topic
		}
		id := Identity{Group: m.cfg.Group, Store: name, Changelog: changelog, Partition: partition}
		var opened Opened
		var err error
		if p, opened, err = m.cfg.Storage.Open(id); err != nil {
			return err
		}
		if opened.Reason != "" {
			m.cfg.Log.Info("state: local store will be restored from its changelog", zap.String("store", name),
				zap.Int32("partition", partition), zap.String("found", opened.Reason), zap.String("detail", opened.Detail))
		}
		ps.stores[name] = p
	}
	backoff := m.cfg.Backoff
	c := m.cfg.Counters
	c.Restoring.Add(1)
	defer c.Restoring.Add(-1)
	for {
		began, lastLog := time.Now(), time.Now()
		var counted Restored
		var left int64
		progress := func(r Restored, end int64) {
			c.Restored.Add(r.Records - counted.Records)
			c.RestoredBytes.Add(r.Bytes - counted.Bytes)
			c.RestoreLeft.Add(max(end-r.To, 0) - left)
			counted, left = r, max(end-r.To, 0)
			if time.Since(lastLog) >= 10*time.Second {
				lastLog = time.Now()
				m.cfg.Log.Info("state: restoring", zap.String("store", name), zap.Int32("partition", partition),
					zap.Int64("at", r.To), zap.Int64("end", end), zap.Int64("records", r.Records),
					zap.Float64("records_per_second", float64(r.Records)/time.Since(began).Seconds()))
			}
		}
		// a store's changelog settles (see Restore), unless changes of
		// its own are in the open transaction: they would hold it
		_, table := m.cfg.Tables[name]
		restored, res, err := Restore(ctx, m.cfg.Storage, p, m.cfg.Reader, !table && !p.HasStaged(), progress)
		c.RestoreLeft.Add(-left)
		if restored != nil {
			ps.stores[name], p = restored, restored
		}
		if err == nil {
			c.Restores.Add(1)
			if res.Wiped {
				c.Rebuilt.Add(1)
			}
			if table && !res.Wiped && res.From > 0 {
				return nil // a table's catch-up before a unit: not news
			}
			if res.Records > 0 || res.Wiped || res.Waited > 0 {
				took := time.Since(began)
				m.cfg.Log.Info("state: restored", zap.String("store", name), zap.Int32("partition", partition),
					zap.Int64("from", res.From), zap.Int64("to", res.To), zap.Int64("records", res.Records),
					zap.Int64("bytes", res.Bytes), zap.Bool("rebuilt", res.Wiped), zap.Duration("took", took),
					zap.Duration("waited_for_open_transactions", res.Waited),
					zap.Float64("records_per_second", float64(res.Records)/max(took.Seconds(), 1e-9)))
			}
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		m.cfg.Log.Warn("state: restore failed; trying again", zap.String("store", name), zap.Int32("partition", partition),
			zap.Duration("backoff", backoff), zap.Error(err))
		if !wait.For(ctx, backoff) {
			return err
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// End writes the changes of tp's unit to the changelog once the unit's
// chain returned. finished says whether any of its records finished:
// when none did, the changes are dropped (the records run again). Under
// at_least_once the changes are applied once acknowledged; under
// exactly_once they are staged in the open transaction. Outages are
// retried until ctx ends; an error means the unit must not count as
// finished.
func (m *Manager) End(ctx context.Context, tp offsetstore.TopicPartition, finished bool) error {
	if !m.stateful(tp.Topic) {
		return nil
	}
	ps := m.part(tp)
	defer m.unitEnded(tp, ps)
	m.mu.Lock()
	if ps.revoked {
		// the revoke's final commit is done: these records are not
		// committed here, and the partition's next owner runs them again
		finished = false
	}
	m.mu.Unlock()
	for _, name := range m.storesOf(tp.Topic) {
		p := ps.stores[name]
		if p == nil {
			continue
		}
		if !finished {
			p.DiscardDirty()
			continue
		}
		recs := p.Changes()
		if len(recs) == 0 {
			continue
		}
		next, err := m.write(ctx, p, recs)
		if err != nil {
			p.DiscardDirty()
			return err
		}
		m.cfg.Counters.Changes.Add(int64(len(recs)))
		if m.cfg.Transactional {
			p.Stage()
			if next >= 0 {
				ps.written[name] = next
			}
			continue
		}
		if err := p.Applied(next); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) write(ctx context.Context, p *Partition, recs []stages.Record) (int64, error) {
	backoff := m.cfg.Backoff
	for {
		next, err := m.cfg.Writer.Write(ctx, p.id.Changelog, p.id.Partition, recs)
		if err == nil {
			return next, nil
		}
		if ctx.Err() != nil || !stages.IsUnavailable(err) || m.cfg.Transactional {
			// (a transactional write that failed aborts the
			// transaction: the records run again from its start)
			return -1, fmt.Errorf("state store %s, partition %d: writing %d change(s) to %s: %w",
				p.id.Store, p.id.Partition, len(recs), p.id.Changelog, err)
		}
		m.cfg.Log.Warn("state: changelog unavailable; trying again", zap.String("topic", p.id.Changelog),
			zap.Int32("partition", p.id.Partition), zap.Duration("backoff", backoff), zap.Error(err))
		if !wait.For(ctx, backoff) {
			return -1, ctx.Err()
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// Committed applies every partition's staged changes: their transaction
// committed. Call it only while no unit runs (the commit barrier).
func (m *Manager) Committed() error {
	var errs []error
	for _, ps := range m.snapshot() {
		for name, p := range ps.stores {
			next, ok := ps.written[name]
			if !ok {
				next = -1
			}
			if err := p.Commit(next); err != nil {
				errs = append(errs, err)
				m.cfg.Log.Warn("state: applying committed changes to the local store failed; it restores them from the changelog",
					zap.String("store", name), zap.Error(err))
				m.mu.Lock()
				ps.restored = false
				m.mu.Unlock()
			}
			delete(ps.written, name)
		}
	}
	return errors.Join(errs...)
}

// Aborted drops every partition's changes not applied: their transaction
// aborted, and the partitions are processed again from its start.
func (m *Manager) Aborted() {
	for _, ps := range m.snapshot() {
		for name, p := range ps.stores {
			p.Discard()
			delete(ps.written, name)
		}
		// restore again before the next unit: the store is at its
		// checkpoint, the changelog may be past it
		m.mu.Lock()
		ps.restored = false
		m.mu.Unlock()
	}
}

// Revoked closes the stores of partitions this member no longer owns
// (after the revoke's final commit), keeping their local files: a later
// assignment restores only the tail. A partition with a unit still
// running closes when it ends, dropping that unit's changes.
func (m *Manager) Revoked(tps []offsetstore.TopicPartition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, tp := range tps {
		ps := m.parts[tp]
		switch {
		case ps == nil:
		case ps.active > 0:
			ps.revoked = true
		default:
			m.closePart(tp, ps)
		}
	}
}

// unitEnded notes the end of a unit of tp, closing its stores if the
// partition was revoked meanwhile.
func (m *Manager) unitEnded(tp offsetstore.TopicPartition, ps *partState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps.active--
	if ps.active == 0 && ps.revoked && m.parts[tp] == ps {
		m.closePart(tp, ps)
	}
}

// closePart closes a partition's stores; m.mu is held.
func (m *Manager) closePart(tp offsetstore.TopicPartition, ps *partState) {
	for _, p := range ps.stores {
		_ = p.Close()
	}
	delete(m.parts, tp)
}

// Close closes every store, keeping local files.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for tp, ps := range m.parts {
		for _, p := range ps.stores {
			errs = append(errs, p.Close())
		}
		delete(m.parts, tp)
	}
	for name, g := range m.globals {
		errs = append(errs, g.Close())
		delete(m.globals, name)
	}
	return errors.Join(errs...)
}

func (m *Manager) snapshot() []*partState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*partState, 0, len(m.parts))
	for _, ps := range m.parts {
		out = append(out, ps)
	}
	return out
}

// journal is the stores of a unit's partition as one stateref.Journal.
type journal map[string]*Partition

func (j journal) Begin() {
	for _, p := range j {
		p.Begin()
	}
}

func (j journal) Rollback() {
	for _, p := range j {
		p.Rollback()
	}
}

func (j journal) Keep() {
	for _, p := range j {
		p.Keep()
	}
}

// readOnly is a table's store as a stage sees it: reads only.
type readOnly struct {
	*Partition
	topic string
}

func (r readOnly) Put([]byte, []byte) error {
	return fmt.Errorf("table %s mirrors topic %s: it is read-only (write to the topic)", r.id.Store, r.topic)
}

func (r readOnly) Delete([]byte) error { return r.Put(nil, nil) }
