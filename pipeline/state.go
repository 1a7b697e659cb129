package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/createtopics"
	"github.com/segmentio/kafka-go/protocol/describeconfigs"
	meta "github.com/segmentio/kafka-go/protocol/metadata"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/internal/produce"
	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
)

// StateConfig says where stateful stages (stages.Stateful) keep their
// stores. A pipeline without stateful stages ignores it.
type StateConfig struct {
	// Dir is the state directory: a store's local files for partition p
	// are under Dir/<store>/<p>. Default: fencepost/<group> under the
	// user's state directory ($XDG_STATE_HOME, else ~/.local/state).
	// One running processor per directory.
	Dir string `yaml:"dir"`
	// Store is StoreDisk (the default: pebble on local disk) or
	// StoreMemory (pebble in memory: nothing kept across restarts, every
	// assignment restores from the changelog).
	Store string `yaml:"store"`
	// CacheBytes is the block cache every store shares. Default 64 MiB.
	CacheBytes ByteSize `yaml:"cache_bytes"`
	// WriteBufferBytes is how large one store partition's memtable grows
	// (from 256 KiB, doubling as it fills); a store partition written
	// fast holds up to twice this. Larger: faster writes
	// (fewer, larger sorted files to merge), more memory. Default 16 MiB.
	WriteBufferBytes ByteSize `yaml:"write_buffer_bytes"`
}

// The values of state.store.
const (
	StoreDisk   = "disk"
	StoreMemory = "memory"
)

func (s StateConfig) withDefaults(group string) StateConfig {
	if s.Store == "" {
		s.Store = StoreDisk
	}
	if s.CacheBytes == 0 {
		s.CacheBytes = 64 << 20
	}
	if s.WriteBufferBytes == 0 {
		s.WriteBufferBytes = state.DefaultWriteBufferBytes
	}
	if s.Dir == "" && s.Store == StoreDisk {
		base := os.Getenv("XDG_STATE_HOME")
		if base == "" {
			if home, err := os.UserHomeDir(); err == nil {
				base = filepath.Join(home, ".local", "state")
			} else {
				base = os.TempDir()
			}
		}
		s.Dir = filepath.Join(base, "fencepost", group)
	}
	return s
}

func (s StateConfig) validate(bad func(key, format string, args ...any), badValue func(key, value, format string, args ...any)) {
	if s.Store != "" && s.Store != StoreDisk && s.Store != StoreMemory {
		badValue("state.store", s.Store, "%q: use %q or %q", s.Store, StoreDisk, StoreMemory)
	}
	if s.CacheBytes < 0 {
		bad("state.cache_bytes", "must not be negative")
	}
	if s.WriteBufferBytes < 0 || (s.WriteBufferBytes > 0 && s.WriteBufferBytes < 256<<10) || s.WriteBufferBytes > 1<<30 {
		bad("state.write_buffer_bytes", "must be from 256KiB to 1GiB")
	}
}

// stores returns the stores the pipeline's stages declare, checked: valid
// names, each declared by one stage only.
func (p *Pipeline) stores() ([]string, error) {
	var names []string
	by := map[string]string{}
	p.tables, p.globals = map[string]string{}, map[string]string{}
	for _, st := range p.stages {
		var declared []string
		if sf, ok := st.Stage.(stages.Stateful); ok {
			declared = sf.Stores()
		}
		if tr, ok := st.Stage.(stages.TableReader); ok {
			for _, n := range slices.Sorted(maps.Keys(tr.Tables())) {
				declared = append(declared, n)
				p.tables[n] = tr.Tables()[n]
			}
		}
		if gr, ok := st.Stage.(stages.GlobalTableReader); ok {
			for _, n := range slices.Sorted(maps.Keys(gr.GlobalTables())) {
				declared = append(declared, n)
				p.globals[n] = gr.GlobalTables()[n]
			}
		}
		for _, n := range declared {
			if err := stages.ValidStoreName(n); err != nil {
				return nil, fmt.Errorf("stage %s: %w", st.Name, err)
			}
			if other, dup := by[n]; dup {
				return nil, fmt.Errorf("stages %s and %s both declare store %q: each store belongs to one stage", other, st.Name, n)
			}
			by[n] = st.Name
			names = append(names, n)
		}
	}
	return names, nil
}

// storeSources says which stores the units of each source topic use: the
// stores of the stateful stages of the segment that runs on it.
func (p *Pipeline) storeSources() map[string][]string {
	out := map[string][]string{}
	for _, seg := range p.segments() {
		var names []string
		for _, st := range seg.stages {
			if sf, ok := st.Stage.(stages.Stateful); ok {
				names = append(names, sf.Stores()...)
			}
			if tr, ok := st.Stage.(stages.TableReader); ok {
				names = append(names, slices.Sorted(maps.Keys(tr.Tables()))...)
			}
			if gr, ok := st.Stage.(stages.GlobalTableReader); ok {
				names = append(names, slices.Sorted(maps.Keys(gr.GlobalTables()))...)
			}
		}
		if len(names) == 0 {
			continue
		}
		sources := []string{seg.source}
		if seg.source == "" {
			sources = p.inputTopics()
		}
		for _, t := range sources {
			out[t] = names
		}
	}
	return out
}

// checkStateful refuses what stateful stages cannot run with.
func (p *Pipeline) checkStateful() error {
	if len(p.storeNames) == 0 {
		return nil
	}
	if p.cfg.Consumer.Ordering == OrderByKey {
		return fmt.Errorf("consumer.ordering: key: stages with state (stores %v) need ordering: partition (a partition's store is used by one batch at a time)", p.storeNames)
	}
	seg := p.segments()[0]
	for _, st := range seg.stages {
		if _, ok := st.Stage.(stages.Stateful); ok && len(p.inputTopics()) != 1 {
			return fmt.Errorf("consumer.topics: stage %s keeps state, and runs on the consumed topics: it needs exactly one "+
				"(a store's changelog partition is its input partition; found %d), or a repartition before it", st.Name, len(p.inputTopics()))
		}
	}
	return nil
}

// changelogTopics are the changelog topics of the pipeline's stores (not
// of its tables: their topics are the application's).
func (p *Pipeline) changelogTopics() []string {
	var out []string
	for _, n := range p.storeNames {
		_, table := p.tables[n]
		_, global := p.globals[n]
		if !table && !global {
			out = append(out, state.ChangelogTopic(p.cfg.Consumer.Group, n))
		}
	}
	return out
}

// stateTopics are the topics the stores restore from: the changelogs
// and the tables' topics.
func (p *Pipeline) stateTopics() []string {
	out := p.changelogTopics()
	for _, m := range []map[string]string{p.tables, p.globals} {
		for _, n := range slices.Sorted(maps.Keys(m)) {
			if t := m[n]; !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// checkChangelogs creates the missing changelog topics (compacted, with
// the input topic's partition count) and refuses ones that exist with
// another partition count or without compaction.
func (r *runner) checkChangelogs(ctx context.Context) error {
	p := r.p
	if len(p.storeNames) == 0 {
		return nil
	}
	// a store's changelog has its source topic's partitions: the
	// consumed topic's, or (after a repartition) the repartition
	// topic's, created with the same count
	input := p.cfg.Consumer.Topics[0]
	names := append([]string{input}, p.stateTopics()...)
	cctx, cancel := context.WithTimeout(ctx, p.cfg.Kafka.DialTimeout)
	defer cancel()
	m, err := r.transport.RoundTrip(cctx, r.conn.addr(), &meta.Request{TopicNames: names})
	if err != nil {
		return fmt.Errorf("state: reading the changelog topics' metadata: %w", err)
	}
	resp, ok := m.(*meta.Response)
	if !ok {
		return fmt.Errorf("state: unexpected metadata response %T", m)
	}
	counts := map[string]int{}
	for _, t := range resp.Topics {
		if t.ErrorCode == 0 {
			counts[t.Name] = len(t.Partitions)
		}
	}
	want := counts[input]
	var create, check []string
	var errs []error
	for _, n := range p.changelogTopics() {
		switch got, ok := counts[n]; {
		case !ok:
			create = append(create, n)
		case got != want:
			errs = append(errs, fmt.Errorf("state: changelog topic %q has %d partitions, the input topic %q has %d: they must match "+
				"(delete the changelog topic to have it created again, with `processor state reset`, or give the store another name)", n, got, input, want))
		default:
			check = append(check, n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(p.tables)) {
		switch got, ok := counts[p.tables[n]]; {
		case !ok:
			errs = append(errs, fmt.Errorf("table %s: topic %q does not exist (create it, or check the name)", n, p.tables[n]))
		case got != want:
			errs = append(errs, fmt.Errorf("table %s: topic %q has %d partitions, the input topic %q has %d: a table must be "+
				"partitioned as the stream it is joined with (repartition the stream, or recreate the table's topic)", n, p.tables[n], got, input, want))
		}
	}
	r.globalPartitions = map[string]int32{}
	for _, n := range slices.Sorted(maps.Keys(p.globals)) {
		got, ok := counts[p.globals[n]]
		if !ok {
			errs = append(errs, fmt.Errorf("global table %s: topic %q does not exist (create it, or check the name)", n, p.globals[n]))
		}
		r.globalPartitions[n] = int32(got)
	}
	if len(check) > 0 {
		errs = append(errs, r.checkCompacted(cctx, check))
	}
	if len(create) > 0 && len(errs) == 0 {
		errs = append(errs, r.createChangelogs(cctx, create, want))
	}
	return errors.Join(errs...)
}

// checkCompacted refuses changelog topics that are not compacted. A topic
// Metadata listed may still be unknown to the broker DescribeConfigs
// reaches: another instance created it a moment before, and that broker
// has not applied the creation yet (seen on a 3-node Apache Kafka 3.9.1,
// where the kill loop's third instance stopped at start with
// UNKNOWN_TOPIC_OR_PARTITION). Such an answer is asked again every
// 100 ms until ctx (kafka.dial_timeout) ends.
func (r *runner) checkCompacted(ctx context.Context, topics []string) error {
	for {
		unknown, err := r.describeCleanupPolicy(ctx, topics)
		if !unknown {
			return err
		}
		r.p.log.Debug("state: a changelog topic is not known yet to the broker asked; asking again", zap.Error(err))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// describeCleanupPolicy reads the topics' cleanup.policy and returns an
// error for each topic that is not compacted or could not be read;
// unknown is true if one of them was answered UNKNOWN_TOPIC_OR_PARTITION.
func (r *runner) describeCleanupPolicy(ctx context.Context, topics []string) (unknown bool, err error) {
	req := &describeconfigs.Request{}
	for _, t := range topics {
		req.Resources = append(req.Resources, describeconfigs.RequestResource{ResourceType: 2, ResourceName: t, ConfigNames: []string{"cleanup.policy"}})
	}
	m, err := r.transport.RoundTrip(ctx, r.conn.addr(), req)
	if err != nil {
		return false, fmt.Errorf("state: reading the changelog topics' cleanup.policy: %w", err)
	}
	resp, ok := m.(*describeconfigs.Response)
	if !ok {
		return false, fmt.Errorf("state: unexpected describe configs response %T", m)
	}
	var errs []error
	for _, res := range resp.Resources {
		if res.ErrorCode != 0 {
			unknown = unknown || res.ErrorCode == int16(kafka.UnknownTopicOrPartition)
			errs = append(errs, fmt.Errorf("state: reading the configuration of changelog topic %q: %w", res.ResourceName, kafka.Error(res.ErrorCode)))
			continue
		}
		for _, e := range res.ConfigEntries {
			if e.ConfigName == "cleanup.policy" && !slices.Contains(strings.Split(e.ConfigValue, ","), "compact") {
				errs = append(errs, fmt.Errorf("state: changelog topic %q has cleanup.policy=%s: it must be compacted, or old state is deleted "+
					"(set cleanup.policy=compact on it)", res.ResourceName, e.ConfigValue))
			}
		}
	}
	return unknown, errors.Join(errs...)
}

func (r *runner) createChangelogs(ctx context.Context, topics []string, partitions int) error {
	req := &createtopics.Request{TimeoutMs: int32(r.p.cfg.Kafka.DialTimeout.Milliseconds())}
	for _, t := range topics {
		req.Topics = append(req.Topics, createtopics.RequestTopic{Name: t, NumPartitions: int32(partitions), ReplicationFactor: -1,
			Configs: []createtopics.RequestConfig{{Name: "cleanup.policy", Value: "compact"}}})
	}
	m, err := r.transport.RoundTrip(ctx, r.conn.addr(), req)
	if err != nil {
		return fmt.Errorf("state: creating changelog topics %v: %w", topics, err)
	}
	resp, ok := m.(*createtopics.Response)
	if !ok {
		return fmt.Errorf("state: unexpected create topics response %T", m)
	}
	var errs []error
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 && t.ErrorCode != int16(kafka.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("state: creating changelog topic %q: %w (check the principal may create topics, or create it: "+
				"compacted, %d partitions)", t.Name, kafka.Error(t.ErrorCode), partitions))
			continue
		}
		r.p.log.Info("state: created changelog topic", zap.String("topic", t.Name), zap.Int("partitions", partitions))
	}
	return errors.Join(errs...)
}

// newStorage returns where the run's stores live.
func (p *Pipeline) newStorage() *state.Storage {
	s := p.cfg.State
	st := &state.Storage{Dir: s.Dir, Memory: s.Store == StoreMemory, Cache: pebble.NewCache(int64(s.CacheBytes)),
		WriteBufferBytes: int64(s.WriteBufferBytes),
		Log:              func(msg string) { p.log.Warn("state: pebble", zap.String("message", msg)) }}
	return st
}

// unitState adapts the state manager to the process step.
type unitState struct{ m *state.Manager }

func (u unitState) Begin(ctx context.Context, tp offsetstore.TopicPartition, gen offsets.Generation, epoch offsetstore.Epoch) (context.Context, error) {
	return u.m.Begin(ctx, tp, state.Incarnation{Generation: int32(gen), Epoch: epoch})
}

func (u unitState) End(ctx context.Context, tp offsetstore.TopicPartition, finished bool) error {
	return u.m.End(ctx, tp, finished)
}

// buildState builds the run's state manager: the local storage, a
// read_committed fetcher for restores, and the changelog writer (the
// run's transactional producer under exactly_once, an idempotent one
// otherwise).
func (r *runner) buildState(w *workers, client *kafkawire.Client, brokers *fetch.Brokers) error {
	p, cfg := r.p, r.p.cfg
	sf, err := fetch.NewFetcher(fetch.Config{
		Dialer: r.conn.fetchDialer(), Brokers: brokers,
		// A restore or a table's catch-up reads up to an end it knows
		// and never waits for new records: a read at the end must
		// answer at once, not after fetch_max_wait (a join caught its
		// table up before every batch, and waited that long each time
		// the table had nothing new).
		MaxWait: changelogMaxWait, MinBytes: 1,
		PartitionMaxBytes: int32(cfg.Consumer.MaxPartitionFetchBytes), ReadCommitted: changelogReadCommitted,
	})
	if err != nil {
		return err
	}
	w.stateFetcher = sf
	w.reader = &changelogReader{fetcher: sf, meta: fetch.NewMetadata(client, p.stateTopics(), brokers),
		maxBytes: int32(min(cfg.Consumer.MaxPartitionFetchBytes, 1<<30)), idle: map[int32][]*fetch.Stream{}}
	prod := w.txn
	if prod == nil {
		prod = produce.New(client, produce.Config{MaxBatchBytes: int(cfg.Kafka.MaxBatchBytes)})
	}
	w.storage = p.newStorage()
	where := w.storage.Dir
	if w.storage.Memory {
		where = "memory"
	}
	p.log.Info("state: stores ready", zap.Strings("stores", p.storeNames), zap.String("where", where),
		zap.Strings("changelogs", p.changelogTopics()))
	w.state = state.NewManager(state.Config{
		Group: cfg.Consumer.Group, Stores: p.storeNames, Tables: p.tables, Sources: p.storeSources(), Storage: w.storage,
		Globals: p.globals, GlobalPartitions: r.globalPartitions,
		Writer: changelogWriter{write: prod.ProduceTo}, Reader: w.reader,
		Transactional: w.txn != nil, Log: p.log, Counters: &p.stats.state,
	})
	return nil
}
