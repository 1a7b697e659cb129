//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/partitioner"
)

// stagesSetup is what every run of `statebench stages` shares.
type stagesSetup struct {
	spec      eventsSpec
	windowMs  int64
	graceMs   int64
	warmup    int64 // input records committed before the steady window opens
	processor string
	jar       string
	inEnd     map[int32]int64 // the events topic's end offsets
	want      map[winKey]int64
	late      int
	joined    int
	timeout   time.Duration
}

// The topics of `statebench stages`: both jobs read the same events, the
// join the same table.
const (
	eventsTopic = "events"
	usersTopic  = "users"
)

func stagesMain(args []string) error {
	fs := flag.NewFlagSet("stages", flag.ContinueOnError)
	kafka := fs.String("kafka", "apache", "broker: apache (Apache Kafka 4.1.1, one node), embedded (fencepost variants only: Kafka Streams cannot run there) or external (-brokers; the topics must not exist)")
	brokers := fs.String("brokers", "", "bootstrap addresses of -kafka external")
	records := fs.Int("records", 4_000_000, "events (JSON, keyed by user)")
	users := fs.Int("users", 10_000, "users in the table; the events are of 10% more users, whose events the inner join drops")
	partitions := fs.Int("partitions", 4, "partitions of the events and the users table")
	rate := fs.Int("rate", 5000, "events per second of event time (windows of a minute hold 60 times as many)")
	warmup := fs.Int64("warmup", -1, "input records committed before the steady window opens (-1: a quarter of -records)")
	runs := fs.Int("runs", 3, "rounds; each runs every job, guarantee and variant once, in turn")
	jobs := fs.String("jobs", "window,join", "jobs: window (windowed count, emit on close), join (stream-table join)")
	guarantees := fs.String("guarantees", "at_least_once,exactly_once", "guarantees (exactly_once is exactly_once_v2 for Kafka Streams)")
	jar := fs.String("streams-jar", "", "the Kafka Streams app's jar (empty: build bench/compare/streams-state with Maven)")
	timeout := fs.Duration("timeout", 15*time.Minute, "longest a run may take")
	dir := fs.String("dir", "", "work directory (state directories, configurations, logs; empty: a temporary one)")
	keep := fs.Bool("keep", false, "keep the work directory")
	var specs multiFlag
	fs.Var(&specs, "v", "a variant (repeatable): fencepost[:k=v;...] (dotted configuration keys, env.NAME) or streams[:k=v;...] "+
		"(Kafka Streams properties, jvm=, preset=defaults); default: fencepost and streams (tuned); see stagesrun.go")
	if err := fs.Parse(args); err != nil {
		return err
	}
	vs, err := parseVariants(specs)
	if err != nil {
		return err
	}
	for i := range vs {
		if vs[i].name == "streams defaults" {
			vs[i].name = "streams, tuned"
		}
	}
	js, err := listFlag("jobs", *jobs, "window", "join")
	if err != nil {
		return err
	}
	gs, err := listFlag("guarantees", *guarantees, "at_least_once", "exactly_once")
	if err != nil {
		return err
	}
	if *kafka == "embedded" && slices.ContainsFunc(vs, func(v variant) bool { return v.engine == "streams" }) {
		return errors.New("-kafka embedded: Kafka Streams cannot run against the embedded broker (bench/README.md, \"State\"): use -kafka apache, or fencepost variants only")
	}
	if *warmup < 0 {
		*warmup = int64(*records / 4)
	}
	s := &stagesSetup{
		spec: eventsSpec{records: *records, users: *users, partitions: *partitions, rate: *rate, start: defaultStart,
			lateEvery: 997, lateBy: 65_000, jitter: 5_000},
		windowMs: 60_000, graceMs: 10_000, warmup: *warmup, jar: *jar, timeout: *timeout,
	}
	ctx, cancel := interrupted()
	defer cancel()
	began := time.Now()
	e, err := newEnv(ctx, *kafka, *brokers, *dir, *keep)
	if err != nil {
		return err
	}
	defer e.close()
	if s.processor, err = buildProcessor(ctx, e.dir); err != nil {
		return err
	}
	if slices.ContainsFunc(vs, func(v variant) bool { return v.engine == "streams" }) && s.jar == "" {
		if s.jar, err = buildStreamsJar(ctx, e.dir); err != nil {
			return err
		}
	}
	if err := e.loadStages(ctx, s); err != nil {
		return err
	}
	s.want, s.late = s.spec.expectedWindows(s.windowMs, s.graceMs)
	s.joined = s.spec.expectedJoined()
	logf("expected: %d windows (%d late events dropped), %d joined events", len(s.want), s.late, s.joined)

	results := map[cellKey][]stagesRun{}
	n := 0
	for r := range *runs {
		for _, job := range js {
			for _, g := range gs {
				for i, v := range vs {
					if err := ctx.Err(); err != nil {
						return err
					}
					n++
					tag := fmt.Sprintf("%s-r%d-v%d-%s", job, r+1, i, map[string]string{"at_least_once": "alo", "exactly_once": "eo"}[g])
					res, err := e.stagesOnce(ctx, s, job, g, v, tag)
					if err != nil {
						return fmt.Errorf("round %d, %s, %s, %s: %w", r+1, job, g, v.name, err)
					}
					k := cellKey{job, g, i}
					results[k] = append(results[k], res)
					logf("round %d %-6s %-13s %-24s %s", r+1, job, g, v.name, res.line())
				}
			}
		}
	}
	printStagesReport(os.Stdout, e, s, js, gs, vs, results, time.Since(began))
	return nil
}

// listFlag splits a comma-separated flag and checks each item against the
// known ones.
func listFlag(name, value string, known ...string) ([]string, error) {
	var out []string
	for _, x := range strings.Split(value, ",") {
		x = strings.TrimSpace(x)
		if x == "" {
			continue
		}
		if !slices.Contains(known, x) {
			return nil, fmt.Errorf("-%s: %q is not one of %s", name, x, strings.Join(known, ", "))
		}
		out = append(out, x)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-%s: name at least one of %s", name, strings.Join(known, ", "))
	}
	return out, nil
}

// loadStages creates and loads the events and the users table (placing
// keys by murmur2, as Java clients do), and records the events' end
// offsets.
func (e *env) loadStages(ctx context.Context, s *stagesSetup) error {
	for _, t := range []struct {
		name      string
		compacted bool
	}{{eventsTopic, false}, {usersTopic, true}} {
		if err := e.createTopic(ctx, t.name, s.spec.partitions, t.compacted); err != nil {
			if errors.Is(err, errExists) {
				return fmt.Errorf("topic %s exists: statebench stages loads its own topics (use a fresh broker)", t.name)
			}
			return err
		}
	}
	began := time.Now()
	sp := s.spec
	if err := e.produceRecords(ctx, sp.partitions, sp.users, func(u int) *kgo.Record {
		k, v := row(u)
		return &kgo.Record{Topic: usersTopic, Key: k, Value: v, Timestamp: time.UnixMilli(sp.tableTime())}
	}); err != nil {
		return fmt.Errorf("loading the users table: %w", err)
	}
	if err := e.produceRecords(ctx, sp.partitions, sp.records+sp.partitions, func(i int) *kgo.Record {
		if i >= sp.records {
			k, v, ts := sp.closer(i - sp.records)
			return &kgo.Record{Topic: eventsTopic, Key: k, Value: v, Timestamp: time.UnixMilli(ts)}
		}
		k, v, ts, _ := sp.event(i)
		return &kgo.Record{Topic: eventsTopic, Key: k, Value: v, Timestamp: time.UnixMilli(ts)}
	}); err != nil {
		return fmt.Errorf("loading the events: %w", err)
	}
	ends, err := e.adm.ListEndOffsets(ctx, eventsTopic)
	if err != nil {
		return err
	}
	s.inEnd = map[int32]int64{}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { s.inEnd[o.Partition] = o.Offset; total += o.Offset })
	if total != int64(sp.records+sp.partitions) {
		return fmt.Errorf("the events topic holds %d records, want %d", total, sp.records+sp.partitions)
	}
	logf("loaded %d users and %d events (+%d closing records) in %d partitions in %v", sp.users, sp.records, sp.partitions,
		sp.partitions, time.Since(began).Round(time.Second))
	return nil
}

// produceRecords writes n records, record(i) each, to partitions placed
// by murmur2 on their keys, and waits for every acknowledgement.
func (e *env) produceRecords(ctx context.Context, partitions, n int, record func(i int) *kgo.Record) error {
	return e.produceAll(ctx, n, func(i int) *kgo.Record {
		r := record(i)
		r.Partition = partitioner.Murmur2(r.Key, partitions)
		return r
	})
}
