package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParsePhases(t *testing.T) {
	tests := []struct {
		list    string
		want    []string
		wantErr bool
	}{
		{"pipeline,latency,raw,partitions,brokers3", allPhases, false},
		{" raw , brokers3 ", []string{"raw", "brokers3"}, false},
		{"pipeline,", []string{"pipeline"}, false},
		{"scale", nil, true},
		{",", nil, true},
	}
	for _, tc := range tests {
		got, err := parsePhases(tc.list)
		if (err != nil) != tc.wantErr {
			t.Errorf("parsePhases(%q) error %v, want error: %v", tc.list, err, tc.wantErr)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("parsePhases(%q) = %v, want %v", tc.list, got, tc.want)
		}
		for _, p := range tc.want {
			if !got[p] {
				t.Errorf("parsePhases(%q) lacks %q", tc.list, p)
			}
		}
	}
}

func TestSlugAndQuote(t *testing.T) {
	slugs := map[string]string{
		"fencepost, defaults":     "fencepost-defaults",
		"Benthos, low latency":    "benthos-low-latency",
		"  odd -- name!  ":        "odd-name",
		"fetch_concurrency=2 (x)": "fetch-concurrency-2-x",
	}
	for in, want := range slugs {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
	quoted := []struct {
		args []string
		want string
	}{
		{[]string{"-run", "^$", "-count", "3"}, `-run '^$' -count 3`},
		{[]string{"-bench", "a/b|c"}, `-bench 'a/b|c'`},
		{[]string{"it's"}, `'it'\''s'`},
		{[]string{""}, `''`},
	}
	for _, tc := range quoted {
		if got := shellQuote(tc.args); got != tc.want {
			t.Errorf("shellQuote(%q) = %s, want %s", tc.args, got, tc.want)
		}
	}
}

func TestFindLayout(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "go.mod"), "module "+rootModule+"\n\ngo 1.26.0\n")
	write(filepath.Join(root, "bench", "compare", "go.mod"), "// comment\nmodule "+compareModule+"\n")
	deep := filepath.Join(root, "bench", "compare", "cmd", "report")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{root, deep, filepath.Join(root, "bench")} {
		l, err := findLayout(from)
		if err != nil || l.root != root || l.compare != filepath.Join(root, "bench", "compare") {
			t.Errorf("findLayout(%s) = %+v, %v", from, l, err)
		}
	}
	if _, err := findLayout(t.TempDir()); err == nil {
		t.Error("findLayout outside the repository found one")
	}
}

func TestVariantFilter(t *testing.T) {
	names := []string{"fencepost, defaults", "fencepost, tuned", "fencepost, exactly-once", "Benthos, defaults", "Benthos, low latency"}
	tests := []struct {
		list      string
		want      []string // names picked
		unmatched []string
		wantErr   bool
	}{
		{"", names, nil, false},
		{" , ", names, nil, false},
		{"fencepost", names[:3], nil, false},
		{"fencepost-defaults,fencepost-exactly-once", []string{"fencepost, defaults", "fencepost, exactly-once"}, nil, false},
		{"benthos-low", []string{"Benthos, low latency"}, nil, false},
		{"benthos-lo", nil, []string{"benthos-lo"}, false}, // whole words only
		{"benthos-low-latency,kgo", []string{"Benthos, low latency"}, []string{"kgo"}, false},
		{"fencepost defaults", nil, nil, true},
		{"Fencepost", nil, nil, true},
	}
	for _, tc := range tests {
		f, err := parseVariants(tc.list)
		if (err != nil) != tc.wantErr {
			t.Errorf("parseVariants(%q) error %v, want error: %v", tc.list, err, tc.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		var got []string
		for _, n := range names {
			if f.picks(n) {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("-variants %q picks %q, want %q", tc.list, got, tc.want)
		}
		if u := f.unmatched(names); !slices.Equal(u, tc.unmatched) {
			t.Errorf("-variants %q: unmatched %q, want %q", tc.list, u, tc.unmatched)
		}
	}
}

func TestVariantsOfTheSuite(t *testing.T) {
	s := &suite{lay: layout{compare: "/repo/bench/compare"}, phases: map[string]bool{"pipeline": true, "latency": true}}
	eos := 0
	for _, v := range s.allPipelineVariants() {
		if v.ExactlyOnce != strings.Contains(v.Config, "exactly-once") {
			t.Errorf("pipeline variant %q: ExactlyOnce %v with config %s", v.Name, v.ExactlyOnce, v.Config)
		}
		if v.ExactlyOnce {
			eos++
		}
	}
	for _, v := range s.allLatencyVariants() {
		if v.ExactlyOnce != strings.Contains(v.Config, "exactly-once") {
			t.Errorf("latency variant %q: ExactlyOnce %v with config %s", v.Name, v.ExactlyOnce, v.Config)
		}
		if v.ExactlyOnce {
			eos++
		}
	}
	if eos != 2 {
		t.Errorf("%d exactly-once variants, want one in each phase", eos)
	}
	s.pick, _ = parseVariants("fencepost-defaults,fencepost-exactly-once")
	if got := len(s.pipelineVariants()); got != 2 {
		t.Errorf("picked %d pipeline variants, want 2", got)
	}
	if got := len(s.latencyVariants()); got != 2 {
		t.Errorf("picked %d latency variants, want 2", got)
	}
	s.phases = map[string]bool{"pipeline": true, "latency": true}
	if err := s.checkVariants(); err != nil {
		t.Errorf("checkVariants: %v", err)
	}
	if s.needsBenthos() {
		t.Error("fencepost variants only, but the suite would build Benthos")
	}
	s.pick = nil
	if !s.needsBenthos() {
		t.Error("every variant, but the suite would not build Benthos")
	}
	s.pick, _ = parseVariants("fencepost-low-latency")
	if err := s.checkVariants(); err == nil {
		t.Error("checkVariants accepts a filter that leaves the pipeline phase with nothing to run")
	}
}
