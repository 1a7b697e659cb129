package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// stateBase is a valid configuration with a stage that declares the
// store "counts".
const stateBase = `kafka:
  brokers: [localhost:9092]
consumer:
  group: g
  topics: [orders]
pipeline:
  - stage: counter
`

// TestStateSection: the state section loads into pipeline.Config.State,
// and the stores the stages declare are known once loaded.
func TestStateSection(t *testing.T) {
	dir := t.TempDir()
	cfg, errs := parse(t, stateBase+"state:\n  dir: "+dir+"\n  store: disk\n  cache_bytes: 16MiB\n", nil)
	if errs != nil {
		t.Fatal(errs)
	}
	want := pipeline.StateConfig{Dir: dir, Store: pipeline.StoreDisk, CacheBytes: 16 * pipeline.MiB}
	if cfg.Pipeline.State != want {
		t.Errorf("state %+v, want %+v", cfg.Pipeline.State, want)
	}
	if got := cfg.Stores(); !slices.Equal(got, []string{"counts"}) || !slices.Equal(cfg.Stages[0].Stores, got) {
		t.Errorf("stores %v (stage: %v), want [counts]", got, cfg.Stages[0].Stores)
	}
	if ws := cfg.Warnings(); len(ws) != 0 {
		t.Errorf("warnings: %v", ws)
	}
	cfg, errs = parse(t, stateBase, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	if def := cfg.Pipeline.WithDefaults().State; def.Store != pipeline.StoreDisk || !strings.HasSuffix(def.Dir, filepath.Join("fencepost", "g")) {
		t.Errorf("defaults %+v", def)
	}
}

// TestStateErrors: what the state section and stages with state must
// satisfy is refused at the key's position, with a hint.
func TestStateErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	checkCases(t, []errorCase{
		{"unknown store kind", stateBase + "state:\n  store: rocks\n",
			[]want{{"9:3", "state.store", `"rocks": use "disk" or "memory"`}}, "use disk"},
		{"unknown key", stateBase + "state:\n  path: /x\n",
			[]want{{"9:3", "state.path", "unknown key"}}, "valid keys under state: dir, store, cache_bytes, write_buffer_bytes"},
		{"a zero cache", stateBase + "state:\n  cache_bytes: 0\n",
			[]want{{"9:3", "state.cache_bytes", "0 would mean the default, 64MiB"}}, "leave the key out"},
		{"a negative cache", stateBase + "state:\n  cache_bytes: -1\n",
			[]want{{"9:16", "state.cache_bytes", "not a size"}}, ""},
		{"a size without a unit we know", stateBase + "state:\n  cache_bytes: 64MB\n",
			[]want{{"9:16", "state.cache_bytes", `"MB" is ambiguous`}}, ""},
		{"a write buffer too small", stateBase + "state:\n  write_buffer_bytes: 64KiB\n",
			[]want{{"9:3", "state.write_buffer_bytes", "must be from 256KiB to 1GiB"}}, "leave it out for 16MiB"},
		{"a zero write buffer", stateBase + "state:\n  write_buffer_bytes: 0\n",
			[]want{{"9:3", "state.write_buffer_bytes", "0 would mean the default, 16MiB"}}, "leave the key out"},
		{"dir under a file", stateBase + "state:\n  dir: " + filepath.Join(file, "state") + "\n",
			[]want{{"9:3", "state.dir", file + " is not a directory"}}, "name a directory"},
		{"dir of the wrong type", stateBase + "state:\n  dir: [a, b]\n",
			[]want{{"9:8", "state.dir", "want a string, found a list"}}, ""},
		{"a section of the wrong type", stateBase + "state: disk\n",
			[]want{{"8:8", "state", "want a mapping, found a string"}}, ""},
		{"a bad store name", stateBase + "    stores: [a/b]\n",
			[]want{{"7:5", "pipeline[0]", `stage counter: store name "a/b"`}}, "change it"},
		{"a store declared twice", stateBase + "  - stage: counter\n    name: again\n",
			[]want{{"8:5", "pipeline[1]", `stage again declares store "counts", as stage counter does (line 7)`}}, "another store name"},
		{"ordering by key", strings.Replace(stateBase, "  group: g", "  group: g\n  ordering: key", 1),
			[]want{{"5:3", "consumer.ordering", "stages with state (stores counts) need ordering: partition"}}, "remove ordering"},
		{"two topics", strings.Replace(stateBase, "[orders]", "[orders, refunds]", 1),
			[]want{{"5:3", "consumer.topics", "read one topic"}}, "one pipeline per topic"},
	})
}

// TestStateWarnings: a state section no stage uses, and state.dir with
// store: memory, are warned about at their keys.
func TestStateWarnings(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	for _, c := range []struct{ name, src, want string }{
		{"no stage with state", base + "state:\n  store: memory\n", "test.yaml:8:1: warning: state: no stage declares a store"},
		{"dir with memory", stateBase + "state:\n  store: memory\n  dir: " + dir + "\n", "test.yaml:10:3: warning: state.dir: state.store: memory keeps nothing on disk"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, errs := parse(t, c.src, nil)
			if errs != nil {
				t.Fatal(errs)
			}
			ws := cfg.Warnings()
			if len(ws) != 1 || !strings.HasPrefix(ws[0].String(), c.want) || ws[0].Hint == "" {
				t.Errorf("warnings %v, want one starting %q", ws, c.want)
			}
		})
	}
}
