package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/report"
)

// The tuning search: the phase "search" runs one engine's
// configuration over a grid of its throughput knobs, every trial on the
// pipeline benchmark's loaded input, so that the report's "tuned"
// configurations are the best found, and shows the whole search.
//
// A search is a sweep, then a combination: every trial of the sweep
// changes one knob of the engine's starting point (its base) or sets a
// combination worth trying as a whole (for Benthos, its defaults and the
// report's former "tuned" configuration), and the last trial, "best of
// each", takes from every knob the value whose trial beat the base by
// the most (records/s, over the steady window with -warmup), if any did.

// knob is one setting a search varies.
type knob struct {
	Name string // as the engine's documentation names it
	// Where it goes: Env, an environment variable that the search
	// configuration reads (Benthos: ${VAR:default}; GOGC for any Go
	// engine); Prop, a Kafka Streams property (a key=value argument);
	// Consumer, a key of fencepost's consumer section; JVM, a java
	// option prefix (-Xmx) or "gc" (the collector's -XX:+Use...GC).
	Env, Prop, Consumer, JVM string
}

// trial is one point of a search: the knobs it sets beyond the base.
type trial struct {
	Name  string            // "checkpoint_limit 100000"
	Knob  string            // the one knob a sweep trial varies; "" for a combination
	Set   map[string]string // knob name -> value
	Notes string            // why it is tried
}

// space is one engine's search.
type space struct {
	Engine pipebench.Engine
	Config string // the search configuration (configs/), with the knobs' defaults
	// ExactlyOnce reads the output read_committed (the Kafka Streams
	// exactly_once_v2 search).
	ExactlyOnce bool
	// Variant names the search beside its engine ("at_least_once").
	Variant string
	Knobs   []knob
	Base    trial // the starting point: each engine's defaults but for the commit interval
	Trials  []trial
}

// knobByName returns sp's knob called name.
func (sp space) knobByName(name string) (knob, bool) {
	for _, k := range sp.Knobs {
		if k.Name == name {
			return k, true
		}
	}
	return knob{}, false
}

// sweep is a trial per value of one knob.
func sweep(name string, values ...string) []trial {
	ts := make([]trial, len(values))
	for i, v := range values {
		ts[i] = trial{Name: name + " " + v, Knob: name, Set: map[string]string{name: v}}
	}
	return ts
}

// merged is base's settings with over's on top.
func merged(base, over map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// variant turns trial t of sp into the pipeline variant that runs it,
// writing its configuration file into dir when the engine needs one of
// its own (fencepost).
func (sp space) variant(t trial, configDir, dir string) (pipebench.Variant, error) {
	set := merged(sp.Base.Set, t.Set)
	v := pipebench.Variant{Name: searchName(sp, t), Engine: sp.Engine, Config: filepath.Join(configDir, sp.Config), ExactlyOnce: sp.ExactlyOnce}
	var consumer []string
	gc, heap := "", ""
	for _, name := range sortedKeys(set) {
		k, ok := sp.knobByName(name)
		if !ok {
			return v, fmt.Errorf("search %s: trial %q sets %q, which is no knob of it", sp.Engine, t.Name, name)
		}
		val := set[name]
		switch {
		case k.Env != "":
			v.Env = append(v.Env, k.Env+"="+val)
		case k.Prop != "":
			v.Args = append(v.Args, k.Prop+"="+val)
		case k.Consumer != "":
			consumer = append(consumer, fmt.Sprintf("  %s: %s", k.Consumer, val))
		case k.JVM == "gc":
			gc = "-XX:+Use" + val + "GC"
		case k.JVM != "":
			heap = k.JVM + val
		}
	}
	if sp.Engine == pipebench.KafkaStreams && (gc != "" || heap != "") {
		v.JVM = jvmOptions(heap, gc)
	}
	if len(consumer) > 0 {
		path, err := withConsumerKeys(v.Config, filepath.Join(dir, slug(v.Name)+".yaml"), consumer)
		if err != nil {
			return v, err
		}
		v.Config = path
	}
	return v, nil
}

// jvmOptions are pipebench.DefaultJVM with the heap and collector
// options replaced by the ones given (empty: DefaultJVM's).
func jvmOptions(heap, gc string) []string {
	var out []string
	for _, o := range pipebench.DefaultJVM {
		switch {
		case strings.HasPrefix(o, "-Xmx") && heap != "":
			out = append(out, heap)
		case strings.HasPrefix(o, "-XX:+Use") && strings.HasSuffix(o, "GC") && gc != "":
			out = append(out, gc)
		default:
			out = append(out, o)
		}
	}
	return out
}

// withConsumerKeys writes a copy of the fencepost configuration from to
// the file to, with lines (indented "key: value") added at the top of
// its consumer section, and returns to.
func withConsumerKeys(from, to string, lines []string) (string, error) {
	data, err := os.ReadFile(from)
	if err != nil {
		return "", err
	}
	const section = "\nconsumer:\n"
	i := strings.Index(string(data), section)
	if i < 0 {
		return "", fmt.Errorf("%s has no top-level consumer section to set %s in", from, strings.Join(lines, ", "))
	}
	at := i + len(section)
	out := string(data[:at]) + strings.Join(lines, "\n") + "\n" + string(data[at:])
	return to, os.WriteFile(to, []byte(out), 0o644)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// title names the search: "Kafka Streams, at_least_once", "Benthos".
func (sp space) title() string {
	if sp.Variant == "" {
		return sp.Engine.String()
	}
	return sp.Engine.String() + ", " + sp.Variant
}

// searchName is a trial's name in the report: "Benthos search: checkpoint_limit 100000".
func searchName(sp space, t trial) string { return sp.title() + " search: " + t.Name }

// bestOfEach is the combination trial: for every knob, the value of the
// sweep trial that beat the base by the most (by score), if one did.
// ok is false if no trial beat the base, or the combination is one trial
// already run.
func bestOfEach(sp space, score func(trial) (float64, bool)) (trial, bool) {
	base, ok := score(sp.Base)
	if !ok {
		return trial{}, false
	}
	best := map[string]trial{}
	bestScore := map[string]float64{}
	for _, t := range sp.Trials {
		if t.Knob == "" {
			continue
		}
		sc, ok := score(t)
		if !ok || sc <= base || sc <= bestScore[t.Knob] {
			continue
		}
		best[t.Knob], bestScore[t.Knob] = t, sc
	}
	if len(best) == 0 {
		return trial{}, false
	}
	set := map[string]string{}
	var parts []string
	for _, k := range sortedKeys(best) {
		for name, v := range best[k].Set {
			set[name] = v
		}
		parts = append(parts, best[k].Name)
	}
	if len(best) == 1 {
		return trial{}, false // the one winning sweep trial already ran
	}
	return trial{Name: "best of each (" + strings.Join(parts, ", ") + ")", Set: set,
		Notes: "every knob at the value that beat the base by the most in its sweep"}, true
}

// search runs the search of every engine -search names on in.
func (s *suite) search(ctx context.Context, env pipebench.Env, in pipebench.Input) error {
	dir := filepath.Join(s.work, "search-configs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, sp := range s.searchSpaces() {
		sec := &report.Search{Engine: sp.title(), Config: sp.Config, Records: in.Records, Warmup: in.Warmup, ExactlyOnce: sp.ExactlyOnce}
		s.rep.Search = append(s.rep.Search, sec)
		results := map[string]*report.SearchTrial{}
		runTrials := func(ts []trial) error {
			var rows []*report.SearchTrial
			var vs []pipebench.Variant
			for _, t := range ts {
				v, err := sp.variant(t, filepath.Join(s.lay.compare, "configs"), dir)
				if err != nil {
					return err
				}
				row := &report.SearchTrial{Name: t.Name, Settings: settingsText(sp, t), Notes: t.Notes, Base: t.Name == sp.Base.Name}
				row.Variant.Variant = v
				rows, vs = append(rows, row), append(vs, v)
				results[t.Name] = row
				sec.Trials = append(sec.Trials, row)
			}
			for run := 1; run <= s.opts.runs; run++ {
				for i, v := range vs {
					end := s.prog.step(fmt.Sprintf("search: %s, run %d of %d", v.Name, run, s.opts.runs), s.pipelineWeight(v.Engine))
					res, err := env.Run(ctx, v, in, fmt.Sprintf("search-%s-r%d", slug(v.Name), run))
					end()
					if err != nil {
						return fmt.Errorf("search %s, run %d: %w", v.Name, run, err)
					}
					rows[i].Variant.Runs = append(rows[i].Variant.Runs, res)
					s.prog.logf("search %-60s run %d: %8.0f records/s %8.0f records/CPU-s (steady %8.0f, %8.0f)  peak RSS %4d MiB  output: %d/%d/%d/%d",
						v.Name, run, res.RecordsPerSec(), res.RecordsPerCPUSec(), res.SteadyRecordsPerSec(), res.SteadyRecordsPerCPUSec(),
						res.MaxRSS>>20, res.Correct.Records, res.Correct.Duplicates, res.Correct.Missing, res.Correct.Wrong)
				}
			}
			return nil
		}
		if err := runTrials(append([]trial{sp.Base}, sp.Trials...)); err != nil {
			return err
		}
		score := func(t trial) (float64, bool) {
			r, ok := results[t.Name]
			if !ok || len(r.Variant.Runs) == 0 {
				return 0, false
			}
			m := r.Variant.Medians()
			if _, exact := r.Variant.Worst(); exact != len(r.Variant.Runs) {
				return 0, false // a trial that lost or repeated records does not win
			}
			return m.SteadyRecordsPerSec, true
		}
		if combo, ok := bestOfEach(sp, score); ok {
			if err := runTrials([]trial{combo}); err != nil {
				return err
			}
		}
	}
	return nil
}

// settingsText is what trial t sets beyond the engine's own defaults, for
// the table: the base's settings with t's on top.
func settingsText(sp space, t trial) string {
	set := merged(sp.Base.Set, t.Set)
	var parts []string
	for _, k := range sortedKeys(set) {
		parts = append(parts, "`"+k+"="+set[k]+"`")
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, " ")
}

// searchSpaces are the searches -search names, in its order.
func (s *suite) searchSpaces() []space {
	var out []space
	for _, name := range s.searchEngines() {
		switch name {
		case "benthos":
			out = append(out, benthosSpace())
		case "fencepost":
			out = append(out, fencepostSpace())
		case "streams":
			out = append(out, streamsSpace(false), streamsSpace(true))
		case "streams-alos":
			out = append(out, streamsSpace(false))
		case "streams-eos":
			out = append(out, streamsSpace(true))
		case "streams-combos":
			out = append(out, streamsCombosSpace())
		}
	}
	return out
}

// searchEngineNames are the values -search takes.
var searchEngineNames = []string{"benthos", "fencepost", "streams", "streams-alos", "streams-eos", "streams-combos"}

func (s *suite) searchEngines() []string {
	var out []string
	for _, e := range strings.Split(s.opts.search, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// checkSearch fails on a -search value that names no search.
func (s *suite) checkSearch() error {
	if !s.phases["search"] {
		return nil
	}
	engines := s.searchEngines()
	if len(engines) == 0 {
		return fmt.Errorf("-only search needs -search with one or more of %s", strings.Join(searchEngineNames, ", "))
	}
	for _, e := range engines {
		if !slices.Contains(searchEngineNames, e) {
			return fmt.Errorf("-search: %q is not one of %s", e, strings.Join(searchEngineNames, ", "))
		}
	}
	return nil
}

// searchNeeds reports whether the search runs an engine.
func (s *suite) searchNeeds(e pipebench.Engine) bool {
	if !s.phases["search"] {
		return false
	}
	for _, sp := range s.searchSpaces() {
		if sp.Engine == e {
			return true
		}
	}
	return false
}
