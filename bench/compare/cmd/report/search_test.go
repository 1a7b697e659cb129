package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"
)

func TestBestOfEach(t *testing.T) {
	sp := space{Base: trial{Name: "base"}, Trials: []trial{
		{Name: "defaults", Set: map[string]string{"a": "0"}}, // a combination: never picked
		{Name: "a 1", Knob: "a", Set: map[string]string{"a": "1"}},
		{Name: "a 2", Knob: "a", Set: map[string]string{"a": "2"}},
		{Name: "b 1", Knob: "b", Set: map[string]string{"b": "1"}},
		{Name: "c 1", Knob: "c", Set: map[string]string{"c": "1"}},
		{Name: "d 1", Knob: "d", Set: map[string]string{"d": "1"}},
	}}
	tests := []struct {
		name   string
		scores map[string]float64 // missing: not exact, cannot win
		want   map[string]string  // nil: no combination
	}{
		{"the best value of every knob that beat the base",
			map[string]float64{"base": 10, "defaults": 99, "a 1": 12, "a 2": 15, "b 1": 11, "c 1": 9, "d 1": 10},
			map[string]string{"a": "2", "b": "1"}},
		{"one knob improved: that trial already ran", map[string]float64{"base": 10, "a 1": 12, "b 1": 9}, nil},
		{"none improved", map[string]float64{"base": 10, "a 1": 10, "b 1": 9}, nil},
		{"a trial that was not exact does not count", map[string]float64{"base": 10, "a 1": 12, "c 1": 13}, map[string]string{"a": "1", "c": "1"}},
		{"no base figure", map[string]float64{"a 1": 12, "b 1": 13}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := bestOfEach(sp, func(tr trial) (float64, bool) { v, ok := tc.scores[tr.Name]; return v, ok })
			if tc.want == nil {
				if ok {
					t.Fatalf("combination %+v, want none", got)
				}
				return
			}
			if !ok || len(got.Set) != len(tc.want) {
				t.Fatalf("combination %+v (%v), want settings %v", got, ok, tc.want)
			}
			for k, v := range tc.want {
				if got.Set[k] != v {
					t.Errorf("%s = %q, want %q (combination %+v)", k, got.Set[k], v, got)
				}
			}
			if got.Knob != "" {
				t.Errorf("the combination has knob %q; it must not count as a sweep trial", got.Knob)
			}
		})
	}
}

func TestSearchVariant(t *testing.T) {
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := "kafka:\n  brokers: [x]\n\nconsumer:\n  group: g\n  topics: [t]\n\npipeline: []\n"
	if err := os.WriteFile(filepath.Join(cfgDir, "fencepost-search.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}

	fp := fencepostSpace()
	v, err := fp.variant(trial{Name: "concurrency 8", Knob: "concurrency", Set: map[string]string{"concurrency": "8", "GOGC": "200"}}, cfgDir, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(v.Config)
	if err != nil {
		t.Fatal(err)
	}
	if want := "\nconsumer:\n  concurrency: 8\n  group: g\n"; !strings.Contains(string(data), want) {
		t.Errorf("fencepost trial config:\n%s\nwant it to contain %q", data, want)
	}
	if !slices.Equal(v.Env, []string{"GOGC=200"}) {
		t.Errorf("fencepost trial env %v, want [GOGC=200]", v.Env)
	}

	b := benthosSpace()
	v, err = b.variant(trial{Name: "threads 1", Knob: "pipeline.threads", Set: map[string]string{"pipeline.threads": "1"}}, cfgDir, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"BENTHOS_THREADS=1", "BENTHOS_CHECKPOINT_LIMIT=100000", "BENTHOS_BATCH_COUNT=250", "BENTHOS_MAX_IN_FLIGHT=64"} {
		if !slices.Contains(v.Env, want) {
			t.Errorf("Benthos trial env %v lacks %s (the trial over the base)", v.Env, want)
		}
	}
	if slices.Contains(v.Env, "BENTHOS_THREADS=2") {
		t.Errorf("Benthos trial env %v keeps the base's threads", v.Env)
	}
	if v.Config != filepath.Join(cfgDir, "benthos-search.yaml") {
		t.Errorf("Benthos trial config %s", v.Config)
	}

	s := streamsSpace(true)
	v, err = s.variant(trial{Name: "x", Set: map[string]string{"num.stream.threads": "2", "gc": "Parallel", "heap": "1g"}}, cfgDir, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !v.ExactlyOnce || !slices.Equal(v.Args, []string{"num.stream.threads=2"}) {
		t.Errorf("Streams trial: exactly-once %v, args %v", v.ExactlyOnce, v.Args)
	}
	if got, want := strings.Join(v.JVM, " "), "-Xmx1g -XX:+UseParallelGC -XX:+ExitOnOutOfMemoryError"; got != want {
		t.Errorf("Streams trial JVM %q, want %q", got, want)
	}
	if _, err := s.variant(trial{Name: "bad", Set: map[string]string{"no.such": "1"}}, cfgDir, dir); err == nil {
		t.Error("a trial setting an unknown knob: no error")
	}
}

func TestSearchSpacesAreSound(t *testing.T) {
	for _, sp := range []space{benthosSpace(), fencepostSpace(), streamsSpace(false), streamsSpace(true), streamsCombosSpace()} {
		names := map[string]bool{sp.Base.Name: true}
		for _, tr := range append([]trial{sp.Base}, sp.Trials...) {
			if tr.Name != sp.Base.Name && names[tr.Name] {
				t.Errorf("%s: two trials named %q", sp.Engine, tr.Name)
			}
			names[tr.Name] = true
			for k := range tr.Set {
				if _, ok := sp.knobByName(k); !ok {
					t.Errorf("%s: trial %q sets %q, no knob", sp.Engine, tr.Name, k)
				}
			}
		}
	}
	if n := len(benthosSpace().Trials) + 1; n < 20 {
		t.Errorf("the Benthos search has %d trials; want at least 20", n)
	}
	if sp := streamsSpace(false); sp.Engine != pipebench.KafkaStreams || sp.ExactlyOnce {
		t.Errorf("streamsSpace(false) = %v, exactly-once %v", sp.Engine, sp.ExactlyOnce)
	}
}

func TestWithConsumerKeysNeedsTheSection(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "a.yaml")
	if err := os.WriteFile(from, []byte("kafka:\n  brokers: [x]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := withConsumerKeys(from, filepath.Join(dir, "b.yaml"), []string{"  concurrency: 8"}); err == nil || !strings.Contains(err.Error(), "consumer section") {
		t.Errorf("no consumer section: %v", err)
	}
}

func TestStreamsTunedVariants(t *testing.T) {
	s := &suite{lay: layout{compare: t.TempDir()}, work: t.TempDir()}
	vs := s.streamsVariants()
	if len(vs) != 4 {
		t.Fatalf("%d Kafka Streams variants, want 4", len(vs))
	}
	for i, want := range []struct {
		name string
		eos  bool
	}{{"Kafka Streams, tuned, at_least_once", false}, {"Kafka Streams, tuned, exactly_once_v2", true}} {
		v := vs[2+i]
		if v.Name != want.name || v.ExactlyOnce != want.eos {
			t.Errorf("variant %d: %q exactly-once %v, want %q %v", 2+i, v.Name, v.ExactlyOnce, want.name, want.eos)
		}
		gc := map[bool]string{false: "-XX:+UseSerialGC", true: "-XX:+UseParallelGC"}[want.eos]
		if !slices.Contains(v.Args, "num.stream.threads=2") || !slices.Contains(v.JVM, gc) {
			t.Errorf("%s: args %v, JVM %v; want the tuned settings", v.Name, v.Args, v.JVM)
		}
	}
}

// Every exactly-once variant names an at-least-once baseline of its own
// engine that the same phase has.
func TestExactlyOnceBaselinesExist(t *testing.T) {
	s := &suite{lay: layout{compare: t.TempDir()}, work: t.TempDir(), phases: map[string]bool{"pipeline": true, "latency": true, "streams": true}}
	var pv []pipebench.Variant
	for _, v := range s.allLatencyVariants() {
		pv = append(pv, v.Variant)
	}
	for _, vs := range [][]pipebench.Variant{s.allPipelineVariants(), pv} {
		byName := map[string]pipebench.Variant{}
		for _, v := range vs {
			byName[v.Name] = v
		}
		for _, v := range vs {
			if !v.ExactlyOnce {
				continue
			}
			base, ok := byName[v.Baseline]
			if !ok || base.ExactlyOnce || base.Engine != v.Engine {
				t.Errorf("%s: baseline %q is not an at-least-once variant of the same engine in its phase", v.Name, v.Baseline)
			}
		}
	}
}
