package report

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"
)

// ratios writes, for each fencepost variant of p, its records per
// CPU-second (steady, with a warm-up) over each peer variant's.
func (w *writer) ratios(p *Pipeline) {
	var ours, peers []PipelineVariant
	for _, v := range p.Variants {
		switch {
		case len(v.Runs) == 0:
		case v.Engine == pipebench.Fencepost:
			ours = append(ours, v)
		default:
			peers = append(peers, v)
		}
	}
	if len(ours) == 0 || len(peers) == 0 {
		return
	}
	head := []string{"records/CPU-s of … over …"}
	for _, pv := range peers {
		head = append(head, pv.Name)
	}
	var rows [][]string
	for _, o := range ours {
		om := o.Medians()
		row := []string{o.Name}
		for _, pv := range peers {
			row = append(row, ratio(om.SteadyRecordsPerCPUSec/pv.Medians().SteadyRecordsPerCPUSec))
		}
		rows = append(rows, row)
	}
	what := "whole runs"
	if p.Warmup > 0 {
		what = "steady windows"
	}
	w.p("Records per CPU-second against each peer variant (medians, %s):", what)
	w.table(head, rows)
}

// searches writes every tuning search: a table per engine, its trials
// sorted by records/s (steady, with a warm-up), the best marked.
func (w *writer) searches(r *Report) {
	if len(r.Search) == 0 {
		return
	}
	w.p("## Tuning searches")
	w.p("Each search starts from a base configuration and runs trials that change one knob (a sweep) or set a whole "+
		"combination, each on the pipeline benchmark's input (%d run(s) each, medians), then a last trial, *best of each*, "+
		"that takes every knob's value from the sweep trial that beat the base by the most records/s (if two or more knobs "+
		"improved). A trial whose output was not exact in every run cannot win. Knobs, starting points and the reasons for "+
		"each value: `bench/compare/cmd/report/spaces.go`; the results read: bench/README.md, \"Tuning the peers\".", r.Runs)
	for _, sec := range r.Search {
		w.search(sec)
	}
}

func (w *writer) search(sec *Search) {
	steady := sec.Warmup > 0
	title := fmt.Sprintf("### %s (`%s`, %d records", sec.Engine, sec.Config, sec.Records)
	if steady {
		title += fmt.Sprintf(", steady after %d", sec.Warmup)
	}
	w.p("%s)", title)
	type row struct {
		t *SearchTrial
		m Medians
	}
	var rows []row
	for _, t := range sec.Trials {
		if len(t.Variant.Runs) > 0 {
			rows = append(rows, row{t, t.Variant.Medians()})
		}
	}
	if len(rows) == 0 {
		w.p("No trial ran.")
		return
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		return -cmpFloat(a.m.SteadyRecordsPerSec, b.m.SteadyRecordsPerSec)
	})
	var base Medians
	bestCPU := math.Inf(-1)
	for _, r := range rows {
		if r.t.Base {
			base = r.m
		}
		if _, exact := r.t.Variant.Worst(); exact == len(r.t.Variant.Runs) {
			bestCPU = max(bestCPU, r.m.SteadyRecordsPerCPUSec)
		}
	}
	var out [][]string
	marked := false
	for i, r := range rows {
		worst, exact := r.t.Variant.Worst()
		name := r.t.Name
		if !marked && exact == len(r.t.Variant.Runs) {
			name, marked = "**"+name+"** (most records/s)", true
		}
		if r.m.SteadyRecordsPerCPUSec == bestCPU {
			name += " (most records/CPU-s)"
		}
		out = append(out, []string{fmt.Sprint(i + 1), name, r.t.Settings, rate(r.m.SteadyRecordsPerSec), rate(r.m.SteadyRecordsPerCPUSec),
			ratio(r.m.SteadyRecordsPerSec / base.SteadyRecordsPerSec), mib(r.m.MaxRSS),
			fmt.Sprintf("%d of %d exact (worst %d/%d/%d)", exact, len(r.t.Variant.Runs), worst.Duplicates, worst.Missing, worst.Wrong)})
	}
	unit := "records/s"
	if steady {
		unit = "steady records/s"
	}
	w.table([]string{"rank", "trial", "settings", unit, strings.Replace(unit, "/s", "/CPU-s", 1), "vs base", "peak RSS", "output (dup/missing/wrong)"}, out)
	if len(rows) > 0 {
		w.p("Configuration: `bench/compare/configs/%s`; settings are what each trial sets on top of it.", filepath.Base(sec.Config))
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
