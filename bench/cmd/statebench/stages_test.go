//go:build unix

package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/twmb/franz-go/pkg/kadm"
)

func TestFencepostConfig(t *testing.T) {
	rt := runTopics{brokers: []string{"b:9092"}, group: "g", input: "events", table: "users", output: "out", stateDir: "/s", windowMs: 60_000, graceMs: 10_000}
	for _, c := range []struct {
		name     string
		job      string
		settings [][2]string
		check    func(t *testing.T, cfg map[string]any, env []string)
		err      string
	}{
		{"window, defaults", "window", nil, func(t *testing.T, cfg map[string]any, env []string) {
			st := cfg["pipeline"].([]any)[0].(map[string]any)
			w := st["window"].(map[string]any)
			if st["stage"] != "aggregate" || st["emit"] != "on_close" || w["size"] != "60000ms" || w["grace"] != "10000ms" ||
				cfg["guarantee"] != "exactly_once" || len(env) != 0 {
				t.Fatalf("got %v, env %v", cfg, env)
			}
		}, ""},
		{"join, settings", "join", [][2]string{{"consumer.concurrency", "4"}, {"consumer.commit_interval", "1s"}, {"state.cache_bytes", "32MiB"}, {"env.GOGC", "200"}},
			func(t *testing.T, cfg map[string]any, env []string) {
				st := cfg["pipeline"].([]any)[0].(map[string]any)
				c := cfg["consumer"].(map[string]any)
				if st["stage"] != "join" || st["table"] != "users" || st["as"] != "profile" || st["type"] != "inner" ||
					c["concurrency"] != uint64(4) || c["commit_interval"] != "1s" || c["group"] != "g" ||
					cfg["state"].(map[string]any)["cache_bytes"] != "32MiB" || !slices.Equal(env, []string{"GOGC=200"}) {
					t.Fatalf("got %v, env %v", cfg, env)
				}
			}, ""},
		{"a new section", "join", [][2]string{{"http.debug", "true"}}, func(t *testing.T, cfg map[string]any, _ []string) {
			if cfg["http"].(map[string]any)["debug"] != true {
				t.Fatalf("got %v", cfg)
			}
		}, ""},
		{"inside a value", "join", [][2]string{{"guarantee.x", "1"}}, nil, "not a section"},
		{"a whole section", "join", [][2]string{{"consumer", "1"}}, nil, "is a section"},
		{"the pipeline", "join", [][2]string{{"pipeline", "[]"}}, nil, "is a section"},
		{"an empty part", "join", [][2]string{{"consumer..x", "1"}}, nil, "empty part"},
		{"an unknown job", "flink", nil, nil, "want window or join"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, env, err := fencepostConfig(c.job, rt, "exactly_once", c.settings)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var cfg map[string]any
			if err := yaml.Unmarshal(b, &cfg); err != nil {
				t.Fatalf("%v in\n%s", err, b)
			}
			c.check(t, cfg, env)
		})
	}
}

func TestStreamsSettings(t *testing.T) {
	for _, c := range []struct {
		name, guarantee string
		settings        [][2]string
		jvm             string
		props           map[string]string // a subset
		absent          []string
	}{
		{"tuned, at_least_once", "at_least_once", nil, "-Xmx512m -XX:+UseSerialGC",
			map[string]string{"processing.guarantee": "at_least_once", "num.stream.threads": "2", "producer.batch.size": "65536", "commit.interval.ms": "100"}, nil},
		{"tuned, exactly_once", "exactly_once", nil, "-Xmx512m -XX:+UseParallelGC",
			map[string]string{"processing.guarantee": "exactly_once_v2", "producer.batch.size": "262144", "topology.optimization": "all"}, nil},
		{"defaults", "exactly_once", [][2]string{{"preset", "defaults"}}, "-Xmx512m -XX:+UseG1GC",
			map[string]string{"processing.guarantee": "exactly_once_v2", "commit.interval.ms": "100"}, []string{"num.stream.threads", "preset", "topology.optimization"}},
		{"overrides", "at_least_once", [][2]string{{"commit.interval.ms", "1000"}, {"jvm", "-Xmx1g"}}, "-Xmx1g",
			map[string]string{"commit.interval.ms": "1000", "num.stream.threads": "2"}, []string{"jvm"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			jvm, props := streamsSettings(c.guarantee, variant{engine: "streams", settings: c.settings})
			if strings.Join(jvm, " ") != c.jvm {
				t.Fatalf("jvm %v, want %s", jvm, c.jvm)
			}
			for k, v := range c.props {
				if props[k] != v {
					t.Fatalf("%s=%q, want %q (all: %v)", k, props[k], v, props)
				}
			}
			for _, k := range c.absent {
				if _, ok := props[k]; ok {
					t.Fatalf("%s set: %v", k, props)
				}
			}
		})
	}
}

func TestCommittedProgress(t *testing.T) {
	end := map[int32]int64{0: 10, 1: 20, 2: 0}
	offs := func(at map[int32]int64) kadm.OffsetResponses {
		o := kadm.OffsetResponses{}
		for p, n := range at {
			o.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: "events", Partition: p, At: n}})
		}
		return o
	}
	for _, c := range []struct {
		name    string
		at      map[int32]int64
		sum     int64
		reached bool
	}{
		{"none yet", map[int32]int64{}, 0, false},
		{"some", map[int32]int64{0: 10, 1: 5}, 15, false},
		{"all (an empty partition needs none)", map[int32]int64{0: 10, 1: 20}, 30, true},
		{"past the end counts to it", map[int32]int64{0: 12, 1: 20, 2: 0}, 30, true},
		{"no offset yet (-1)", map[int32]int64{0: -1, 1: 20}, 20, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sum, reached := committedProgress(offs(c.at), "events", end)
			if sum != c.sum || reached != c.reached {
				t.Fatalf("got %d %v, want %d %v", sum, reached, c.sum, c.reached)
			}
		})
	}
}

func TestPairRatiosAndOutputs(t *testing.T) {
	run := func(records int64, secs float64, digest uint64, exact bool) stagesRun {
		r := stagesRun{steadyRecords: records, steady: time.Duration(secs * float64(time.Second)), steadyCPU: time.Second, complete: true,
			check: outputCheck{expected: 1, records: 1, distinct: 1, digest: digest}}
		if !exact {
			r.check.missing = 1
		}
		return r
	}
	a := []stagesRun{run(100, 1, 7, true), run(100, 2, 7, true), run(100, 4, 7, true)}
	b := []stagesRun{run(100, 2, 7, true), run(100, 2, 7, true)}
	m, each := pairRatios(a, b, stagesRun.rate)
	if m != 1.5 || !slices.Equal(each, []float64{2, 1}) {
		t.Fatalf("ratios %v, median %v", each, m)
	}
	vs := []variant{{name: "f"}, {name: "s"}}
	for _, c := range []struct {
		name string
		runs [][]stagesRun
		want string
	}{
		{"all exact, one digest", [][]stagesRun{a, b}, "exact and the same"},
		{"digests differ", [][]stagesRun{a, {run(1, 1, 8, true)}}, "2 digests differ"},
		{"one not exact", [][]stagesRun{a, {run(1, 1, 7, true), run(1, 1, 7, false)}}, "s round 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := outputsAgree(vs, c.runs); !strings.Contains(got, c.want) {
				t.Fatalf("got %q, want it to say %q", got, c.want)
			}
		})
	}
}

func TestListFlag(t *testing.T) {
	if got, err := listFlag("jobs", " window, join,", "window", "join"); err != nil || !slices.Equal(got, []string{"window", "join"}) {
		t.Fatalf("got %v %v", got, err)
	}
	for _, bad := range []string{"", ",", "window,flink"} {
		if _, err := listFlag("jobs", bad, "window", "join"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseStatCPU(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       time.Duration
		err        bool
	}{
		{"plain", "42 (java) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 30 0 100 0 0", 3250 * time.Millisecond, false},
		{"name with spaces and parentheses", "7 (my (odd) name) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0", 70 * time.Millisecond, false},
		{"no name", "42 java S 1", 0, true},
		{"too short", "42 (java) S 1 42", 0, true},
		{"not a number", "42 (java) S 1 42 42 0 -1 4194560 100 0 0 0 x 75", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseStatCPU(c.line)
			if (err != nil) != c.err || got != c.want {
				t.Fatalf("got %v, %v; want %v (error: %v)", got, err, c.want, c.err)
			}
		})
	}
}
