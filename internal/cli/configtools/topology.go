package configtools

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/fencepost-dev/fencepost/internal/config"
	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// writeTopology prints the sub-pipelines of cfg's pipeline (segs, from
// cfg.Topology), indented under the file's lint line: for each, the
// topics it reads, its stages (with the stage when the entry is named
// otherwise), the stores it keeps and their changelog topics, the tables
// it reads, the topics its stages write and the repartition topic it
// ends with. run logs the same, a line per sub-pipeline.
func writeTopology(w io.Writer, cfg *config.Config, segs []pipeline.Segment) {
	group := cfg.Pipeline.Consumer.Group
	kinds, outputs := map[string]string{}, map[string][]string{}
	for _, s := range cfg.Stages {
		kinds[s.Name] = s.Spec.Name
		outputs[s.Name] = s.Outputs
	}
	plural := "s, cut at each repartition"
	if len(segs) == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "  topology of group %s: %d sub-pipeline%s\n", group, len(segs), plural)
	row := func(label, format string, args ...any) {
		fmt.Fprintf(w, "       %-13s%s\n", label, fmt.Sprintf(format, args...))
	}
	for i, s := range segs {
		fmt.Fprintf(w, "    %d. reads %s\n", i+1, strings.Join(s.Sources, ", "))
		var names, written []string
		for _, n := range s.Stages {
			if k, ok := kinds[n]; ok && k != n {
				n += " (" + k + ")"
			}
			names = append(names, n)
		}
		for _, n := range s.Stages {
			for _, t := range outputs[n] {
				if !slices.Contains(written, t) {
					written = append(written, t)
				}
			}
		}
		if len(names) == 0 {
			names = []string{"(none: consume and commit only)"}
		}
		row("stages", "%s", strings.Join(names, ", "))
		for _, n := range s.Stores {
			row("store", "%s, changelog %s", n, state.ChangelogTopic(group, n))
		}
		for _, n := range slices.Sorted(maps.Keys(s.Tables)) {
			row("table", "%s, topic %s (the partitions this instance is assigned)", n, s.Tables[n])
		}
		for _, n := range slices.Sorted(maps.Keys(s.Globals)) {
			row("global table", "%s, topic %s (every partition)", n, s.Globals[n])
		}
		if len(written) > 0 {
			row("writes", "%s", strings.Join(written, ", "))
		}
		if s.Repartition != "" {
			row("repartition", "%s (read by sub-pipeline %d)", s.Repartition, i+2)
		}
	}
}
