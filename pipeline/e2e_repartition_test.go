package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/partitioner"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
	_ "github.com/fencepost-dev/fencepost/stages/builtin" // the repartition stage
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// keyCounter counts its records per key in the store "bykey".
type keyCounter struct{}

func (keyCounter) Stores() []string { return []string{"bykey"} }

func (keyCounter) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	st, err := stages.StoreFor(ctx, "bykey")
	if err != nil {
		return nil, err
	}
	counts := stages.Typed[int]{Store: st, Codec: stages.JSONCodec[int]{}}
	for _, r := range in {
		n, _, err := counts.Get(r.Key)
		if err != nil {
			return nil, err
		}
		if err := counts.Put(r.Key, n+1); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// userOf is the repartition key: the value's part before the first ':'.
func userOf(r stages.Record) ([]byte, error) {
	u, _, ok := bytes.Cut(r.Value, []byte(":"))
	if !ok {
		return nil, stages.Permanent(fmt.Errorf("value %q has no user", r.Value))
	}
	return u, nil
}

// TestRepartitionGroupsByTheNewKey: records spread over the input
// partitions are re-keyed by user and counted per user after the
// repartition, at both guarantees. Every user's count is exact and lives
// in the store of the partition murmur2 gives the user (as a Java
// producer would place it), and a record without a user is dead-lettered
// without holding the others back.
func TestRepartitionGroupsByTheNewKey(t *testing.T) {
	// the Go API's WithRepartition, or the built-in repartition stage
	goAPI := func(*testing.T) []pipeline.Option {
		return []pipeline.Option{pipeline.WithRepartition("by-user", userOf)}
	}
	builtinStage := func(t *testing.T) []pipeline.Option {
		st, err := stagetest.Build("repartition", stages.Options{"key": `value contains ":" ? split(value, ":")[0] : nil`, "topic": "by-user"}, stages.Env{})
		if err != nil {
			t.Fatal(err)
		}
		return []pipeline.Option{pipeline.WithStage("rekey", st)}
	}
	for _, tc := range []struct {
		name string
		g    pipeline.Guarantee
		cut  func(*testing.T) []pipeline.Option
	}{
		{"api/at_least_once", pipeline.AtLeastOnce, goAPI}, {"api/exactly_once", pipeline.ExactlyOnce, goAPI},
		{"stage/at_least_once", pipeline.AtLeastOnce, builtinStage}, {"stage/exactly_once", pipeline.ExactlyOnce, builtinStage},
	} {
		g := tc.g
		t.Run(tc.name, func(t *testing.T) {
			c := kafkatest.New(t, 1).Kafka
			const partitions, users, per = 3, 11, 200
			in, group, dead := c.Name("orders"), c.Name("g-rekey"), c.Name("dead")
			c.CreateTopic(t, in, partitions)
			c.CreateTopic(t, dead, 1)
			want := map[string]int{}
			for p := range int32(partitions) {
				value := func(i int) []byte {
					if i == 7 {
						return []byte("no user here")
					}
					return fmt.Appendf(nil, "u%d:order-%d-%d", (i*int(p+1))%users, p, i)
				}
				if err := c.ProduceE(in, p, per, 50, value); err != nil {
					t.Fatal(err)
				}
				for i := range per {
					if i != 7 {
						u := fmt.Sprintf("u%d", (i*int(p+1))%users)
						want[fmt.Sprintf("p%d/%s", partitioner.Murmur2([]byte(u), partitions), u)]++
					}
				}
			}
			cfg := fastConfig(c, group, in)
			cfg.Guarantee = g
			cfg.State.Dir = t.TempDir()
			cfg.DeadLetter = pipeline.DeadLetterConfig{Topic: dead, Policy: pipeline.DeadLetterTopic}
			r := start(t, cfg, append(tc.cut(t), pipeline.WithStage("count", keyCounter{}))...)
			waitFor(t, 30*time.Second, "every input offset committed", func() bool {
				got := c.Committed(t, group, in)
				return got[0] == per && got[1] == per && got[2] == per
			})
			// the repartitioned records are processed after their
			// transaction (or write) is done: wait for the counts
			var got map[string]int
			waitFor(t, 30*time.Second, "every count in the changelog", func() bool {
				got = changelogFold(t, c, pipeline.ChangelogTopic(group, "bykey"))
				return maps.Equal(got, want)
			})
			if err := r.shutdown(t); err != nil {
				t.Fatal(err)
			}
			if got := changelogFold(t, c, pipeline.ChangelogTopic(group, "bykey")); !maps.Equal(got, want) {
				t.Fatalf("after the stop the changelog folds to %v, want %v", got, want)
			}
			if n := readCommitted(t, c, dead, partitions)["no user here"]; n != partitions {
				t.Fatalf("%d dead letters, want %d (one record without a user per partition)", n, partitions)
			}
		})
	}
}

// TestTopology: a grouping stage and a repartition stage cut the stages
// into segments, each with its sources, stores, tables and the
// repartition topic it writes.
func TestTopology(t *testing.T) {
	cfg := pipeline.Config{Kafka: pipeline.KafkaConfig{Brokers: []string{"localhost:9092"}},
		Consumer: pipeline.ConsumerConfig{Group: "shop", Topics: []string{"orders"}}}
	rekey, err := stagetest.Build("repartition", stages.Options{"key": "value", "topic": "by-user"}, stages.Env{})
	if err != nil {
		t.Fatal(err)
	}
	join, err := stagetest.Build("join", stages.Options{"table": "users", "key": "key"}, stages.Env{})
	if err != nil {
		t.Fatal(err)
	}
	global, err := stagetest.Build("join", stages.Options{"table": "regions", "key": "key", "global": true, "as": "region"}, stages.Env{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(cfg, pipeline.WithStage("rekey", rekey), pipeline.WithStage("count", keyCounter{}),
		pipeline.WithStage("join", join), pipeline.WithStage("region", global))
	if err != nil {
		t.Fatal(err)
	}
	got := p.Topology()
	want := []pipeline.Segment{
		{Sources: []string{"orders"}, Stages: []string{"rekey"}, Repartition: "shop-by-user-repartition"},
		{Sources: []string{"shop-by-user-repartition"}, Stages: []string{"count"}, Stores: []string{"bykey"}, Repartition: "shop-join-users-repartition"},
		{Sources: []string{"shop-join-users-repartition"}, Stages: []string{"join", "region"}, Tables: map[string]string{"table-users": "users"},
			Globals: map[string]string{"table-regions": "regions"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("topology:\n got %+v\nwant %+v", got, want)
	}
}

// TestRunLogsTopology: Run logs the topology before it connects, a line
// per segment with its sources, stages, stores and their changelog
// topics, tables and repartition topic, also when it then fails to reach
// the brokers.
func TestRunLogsTopology(t *testing.T) {
	cfg := pipeline.Config{Kafka: pipeline.KafkaConfig{Brokers: []string{"127.0.0.1:1"}, DialTimeout: time.Second},
		Consumer: pipeline.ConsumerConfig{Group: "shop", Topics: []string{"orders"}}}
	rekey, err := stagetest.Build("repartition", stages.Options{"key": "value", "topic": "by-user"}, stages.Env{})
	if err != nil {
		t.Fatal(err)
	}
	join, err := stagetest.Build("join", stages.Options{"table": "users"}, stages.Env{})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	p, err := pipeline.New(cfg, pipeline.WithStage("rekey", rekey), pipeline.WithStage("count", keyCounter{}),
		pipeline.WithStage("join", join), pipeline.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Run(ctx); err == nil {
		t.Fatal("Run succeeded without a broker")
	}
	var lines []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "msg=topology") {
			lines = append(lines, l[strings.Index(l, "msg=topology"):])
		}
	}
	want := []string{
		"msg=topology segment=1 segments=2 sources=[orders] stages=[rekey] repartition=shop-by-user-repartition",
		"msg=topology segment=2 segments=2 sources=[shop-by-user-repartition] stages=\"[count join]\" stores=[bykey] " +
			"changelogs=[shop-bykey-changelog] tables=map[table-users:users]",
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("topology lines:\n%s\nwant:\n%s\nthe log:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"), log.String())
	}
}
