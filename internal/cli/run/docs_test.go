package run

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// exportedMetrics returns the names of every fencepost_ metric the
// processor exports (histograms by their base name): the observer's,
// each told something once, and the scrape-time ones.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	m := newMetrics()
	m.StageDone(pipeline.StageDone{Stage: "s"})
	m.stageCounter("s")("e").Add(1)
	m.FetchDone(pipeline.FetchDone{})
	m.CommitDone(pipeline.CommitDone{})
	m.CommitDone(pipeline.CommitDone{Err: errors.New("failed")})
	m.OffsetsCommitted([]pipeline.CommittedOffset{{RecordTime: time.Now()}})
	m.Rebalanced(pipeline.Rebalance{})
	m.Rebalanced(pipeline.Rebalance{Ended: true})
	m.reset(offsetstore.ResetEvent{})
	m.stopped(pipeline.PartitionStopped{})
	m.produceDone("t", nil, 0, nil, true)
	m.produceDone("t", nil, 0, errors.New("failed"), true)
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	descs := make(chan *prometheus.Desc, 100)
	newStatsCollector(nil, nil, "").Describe(descs)
	close(descs)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		names[fqName.FindStringSubmatch(d.String())[1]] = true
	}
	return names
}

// TestOperationsDocMetrics: docs/operations.md explains every metric the
// processor exports, and the alert rules, queries and the Grafana
// dashboard name only metrics that exist.
func TestOperationsDocMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	if len(exported) < 30 {
		t.Fatalf("only %d metrics found: %v", len(exported), exported)
	}
	doc, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	dash, err := os.ReadFile("../../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dash, &parsed); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	exprs := 0
	for _, p := range parsed.Panels {
		exprs += len(p.Targets)
	}
	if exprs < 20 {
		t.Errorf("the dashboard has %d queries", exprs)
	}
	name := regexp.MustCompile(`fencepost_[a-z_]+[a-z]`)
	for file, text := range map[string]string{"operations.md": string(doc), "grafana-dashboard.json": string(dash)} {
		for _, n := range name.FindAllString(text, -1) {
			base := n
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if !exported[base] && !exported[n] {
				t.Errorf("%s names %s, which the processor does not export", file, n)
			}
		}
	}
	for n := range exported {
		if !strings.Contains(string(doc), "`"+n+"`") && !strings.Contains(string(doc), "`"+n+"{") {
			t.Errorf("docs/operations.md does not explain %s", n)
		}
	}
}
