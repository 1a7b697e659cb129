package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/createtopics"
	meta "github.com/segmentio/kafka-go/protocol/metadata"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/stages"
)

// KeyFunc gives a record its new key at a repartition (WithRepartition).
// An error fails the record (it is dead-lettered, or stops its partition,
// as the dead-letter policy says); wrap it with stages.Permanent when a
// retry cannot help.
type KeyFunc func(r stages.Record) ([]byte, error)

// cut is a repartition: the stages before it (from the previous cut) run
// on its source, the stages after it on its topic.
type cut struct {
	at    int // index in Pipeline.stages of the first stage after it
	name  string
	topic string // <group>-<name>-repartition, set by New
	key   KeyFunc
}

// WithRepartition re-keys the records that reach it and sends them
// through the repartition topic <group>-<name>-repartition: each record
// gets the key key gives it and is written to that topic (on the
// partition the kafka.partitioner places the key: murmur2 by default, as
// Java clients and Kafka Streams do), and the stages added after it run on
// that topic's records, on whichever member of the group owns the new
// key's partition. So a stateful stage after it sees every record of a
// key in one partition, in the order written.
//
// The repartition topic is created at start when missing (the consumed
// topic's partition count), and consumed in the same group under the same
// guarantee: at exactly_once its writes are in the transaction with the
// outputs and the offsets. The stages before the first repartition run on
// the consumed topics. name must be unique in the pipeline and is part of
// a topic name ([a-zA-Z0-9._-]).
func WithRepartition(name string, key KeyFunc) Option {
	return func(p *Pipeline) { p.cuts = append(p.cuts, cut{at: len(p.stages), name: name, key: key}) }
}

// RepartitionTopic is the repartition topic WithRepartition(name, ...)
// makes for a group.
func RepartitionTopic(group, name string) string { return group + "-" + name + "-repartition" }

// ChangelogTopic is the changelog topic of a group's store: every change
// of the store, keyed, compacted, as many partitions as the topic its
// segment reads (Segment.Stores).
func ChangelogTopic(group, store string) string { return state.ChangelogTopic(group, store) }

// checkCuts names the repartition topics and adds them to the consumed
// topics.
func (p *Pipeline) checkCuts() error {
	seen := map[string]bool{}
	for i := range p.cuts {
		c := &p.cuts[i]
		if err := stages.ValidStoreName(c.name); err != nil {
			return fmt.Errorf("repartition: %w", errors.New(strings.Replace(err.Error(), "store name", "name", 1)))
		}
		if seen[c.name] {
			return fmt.Errorf("repartition %q: two repartitions have that name; each needs its own", c.name)
		}
		if c.key == nil {
			return fmt.Errorf("repartition %q: no key function", c.name)
		}
		seen[c.name] = true
		c.topic = RepartitionTopic(p.cfg.Consumer.Group, c.name)
		p.cfg.Consumer.Topics = append(p.cfg.Consumer.Topics, c.topic)
	}
	return nil
}

// segment is the stages that run on one source: segment 0 on the
// consumed topics, segment i on the topic of cut i-1.
type segment struct {
	source string // "" for the consumed topics
	stages []process.NamedStage
	out    *cut // the repartition the segment ends with, nil for the last
}

func (p *Pipeline) segments() []segment {
	var segs []segment
	from, source := 0, ""
	for i := range p.cuts {
		c := &p.cuts[i]
		segs = append(segs, segment{source: source, stages: p.stages[from:c.at], out: c})
		from, source = c.at, c.topic
	}
	return append(segs, segment{source: source, stages: p.stages[from:]})
}

// inputTopics are the consumed topics the application named (without the
// repartition topics).
func (p *Pipeline) inputTopics() []string {
	return p.cfg.Consumer.Topics[:len(p.cfg.Consumer.Topics)-len(p.cuts)]
}

// repartitioner is the stage a segment ends with: it re-keys its records
// and writes them to the repartition topic; nothing goes further in the
// segment.
type repartitioner struct {
	key KeyFunc
	out stages.Producer
}

func (r *repartitioner) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	out := make([]stages.Record, 0, len(in))
	var failed stages.RecordErrors
	for i, rec := range in {
		k, err := r.key(rec)
		if err == nil && k == nil {
			err = stages.Permanent(errors.New("the repartition key is null: the record has no partition to go to"))
		}
		if err != nil {
			failed.Fail(i, err)
			continue
		}
		out = append(out, stages.Record{Offset: rec.Offset, Key: k, Value: rec.Value, Headers: rec.Headers, Timestamp: rec.Timestamp})
	}
	if err := r.out.Produce(ctx, out); err != nil {
		return nil, err
	}
	if failed.Failed() {
		return nil, &failed
	}
	return nil, nil
}

// createRepartitions creates the missing repartition topics with the
// consumed topics' partition count (the largest, when several) and
// refuses existing ones with another count.
func (r *runner) createRepartitions(ctx context.Context) error {
	p := r.p
	if len(p.cuts) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.Kafka.DialTimeout)
	defer cancel()
	m, err := r.transport.RoundTrip(cctx, r.conn.addr(), &meta.Request{TopicNames: p.cfg.Consumer.Topics})
	if err != nil {
		return fmt.Errorf("repartition: reading the topics' metadata: %w", err)
	}
	resp, ok := m.(*meta.Response)
	if !ok {
		return fmt.Errorf("repartition: unexpected metadata response %T", m)
	}
	counts := map[string]int{}
	for _, t := range resp.Topics {
		if t.ErrorCode == 0 {
			counts[t.Name] = len(t.Partitions)
		}
	}
	want := 0
	for _, t := range p.inputTopics() {
		want = max(want, counts[t])
	}
	if want == 0 {
		return nil // checkCluster says which consumed topic is missing
	}
	req := &createtopics.Request{TimeoutMs: int32(p.cfg.Kafka.DialTimeout.Milliseconds())}
	var errs []error
	for _, c := range p.cuts {
		switch got, ok := counts[c.topic]; {
		case !ok:
			req.Topics = append(req.Topics, createtopics.RequestTopic{Name: c.topic, NumPartitions: int32(want), ReplicationFactor: -1})
		case got != want:
			errs = append(errs, fmt.Errorf("repartition topic %q has %d partitions, the consumed topics %d: they must match "+
				"(delete it to have it created again)", c.topic, got, want))
		}
	}
	if len(errs) > 0 || len(req.Topics) == 0 {
		return errors.Join(errs...)
	}
	cm, err := r.transport.RoundTrip(cctx, r.conn.addr(), req)
	if err != nil {
		return fmt.Errorf("repartition: creating topics: %w", err)
	}
	cresp, ok := cm.(*createtopics.Response)
	if !ok {
		return fmt.Errorf("repartition: unexpected create topics response %T", cm)
	}
	for _, t := range cresp.Topics {
		if t.ErrorCode != 0 && t.ErrorCode != int16(kafka.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("repartition: creating topic %q: %w (check the principal may create topics, or create it with %d partitions)",
				t.Name, kafka.Error(t.ErrorCode), want))
			continue
		}
		p.log.Info("created repartition topic", zap.String("topic", t.Name), zap.Int("partitions", want))
	}
	if len(errs) == 0 {
		// the transport caches metadata: make it see the new topics
		_, _ = r.transport.RoundTrip(cctx, r.conn.addr(), &createtopics.Request{})
	}
	return errors.Join(errs...)
}

// chains builds the process step's chains: segment 0's, and one route per
// repartition topic. The repartitioners write through the run's
// transactional outputs under exactly_once, through producers of their
// own otherwise (closed by the returned func).
func (r *runner) chains(base process.Chain) (process.Chain, map[string]*process.Chain, func(), error) {
	segs := r.p.segments()
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			_ = c()
		}
	}
	build := func(s segment) (process.Chain, error) {
		ch := base
		ch.Stages = slices.Clone(s.stages)
		if s.out == nil {
			return ch, nil
		}
		var prod stages.Producer
		if r.out != nil {
			var err error
			if prod, err = r.out.Producer(s.out.topic); err != nil {
				return ch, err
			}
		} else {
			pr := newProducer(r.conn, s.out.topic, r.p.cfg.Kafka.MetadataMaxAge, r.p.cfg.Kafka.MaxBatchBytes)
			closers = append(closers, pr.Close)
			prod = pr
		}
		ch.Stages = append(ch.Stages, process.NamedStage{Name: "repartition:" + s.out.name, Stage: &repartitioner{key: s.out.key, out: prod}})
		return ch, nil
	}
	first, err := build(segs[0])
	if err != nil {
		return first, nil, closeAll, err
	}
	var routes map[string]*process.Chain
	for _, s := range segs[1:] {
		ch, err := build(s)
		if err != nil {
			return first, nil, closeAll, err
		}
		if routes == nil {
			routes = map[string]*process.Chain{}
		}
		routes[s.source] = &ch
	}
	return first, routes, closeAll, nil
}

// Segment describes one part of a pipeline's topology: the stages that
// run on one source.
type Segment struct {
	// Sources are the topics the segment's records come from: the
	// consumed topics for the first, a repartition topic for the others.
	Sources []string
	// Stages are the names of its stages, in order.
	Stages []string
	// Stores are the stores its stages keep (changelog
	// <group>-<store>-changelog), Tables the tables they read (store ->
	// topic).
	Stores []string
	Tables map[string]string
	// Globals are the global tables they read (store -> topic): every
	// member reads all of each.
	Globals map[string]string
	// Repartition is the repartition topic the segment writes to, ""
	// for the last segment.
	Repartition string
}

// Topology returns the pipeline's segments: one, or one more per
// repartition (WithRepartition, a stages.Repartitioner or a
// stages.Grouper). Run logs it at start, a line per segment.
func (p *Pipeline) Topology() []Segment {
	var out []Segment
	for _, seg := range p.segments() {
		s := Segment{Sources: []string{seg.source}}
		if seg.source == "" {
			s.Sources = slices.Clone(p.inputTopics())
		}
		for _, st := range seg.stages {
			s.Stages = append(s.Stages, st.Name)
			if sf, ok := st.Stage.(stages.Stateful); ok {
				s.Stores = append(s.Stores, sf.Stores()...)
			}
			if tr, ok := st.Stage.(stages.TableReader); ok && len(tr.Tables()) > 0 {
				if s.Tables == nil {
					s.Tables = map[string]string{}
				}
				maps.Copy(s.Tables, tr.Tables())
			}
			if gr, ok := st.Stage.(stages.GlobalTableReader); ok && len(gr.GlobalTables()) > 0 {
				if s.Globals == nil {
					s.Globals = map[string]string{}
				}
				maps.Copy(s.Globals, gr.GlobalTables())
			}
		}
		if seg.out != nil {
			s.Repartition = seg.out.topic
		}
		out = append(out, s)
	}
	return out
}

// logTopology logs the segments, one line each: its sources, stages,
// stores with their changelog topics, tables and the repartition topic it
// writes (what processor lint prints).
func (p *Pipeline) logTopology() {
	top := p.Topology()
	for i, s := range top {
		fields := []zap.Field{zap.Int("segment", i+1), zap.Int("segments", len(top)), zap.Strings("sources", s.Sources),
			zap.Strings("stages", s.Stages)}
		if len(s.Stores) > 0 {
			changelogs := make([]string, len(s.Stores))
			for j, n := range s.Stores {
				changelogs[j] = state.ChangelogTopic(p.cfg.Consumer.Group, n)
			}
			fields = append(fields, zap.Strings("stores", s.Stores), zap.Strings("changelogs", changelogs))
		}
		if len(s.Tables) > 0 {
			fields = append(fields, zap.Any("tables", s.Tables))
		}
		if len(s.Globals) > 0 {
			fields = append(fields, zap.Any("global_tables", s.Globals))
		}
		if s.Repartition != "" {
			fields = append(fields, zap.String("repartition", s.Repartition))
		}
		p.log.Info("topology", fields...)
	}
}
