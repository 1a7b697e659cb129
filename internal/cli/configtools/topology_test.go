package configtools

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
	_ "github.com/fencepost-dev/fencepost/stages/builtin" // the stages of the configurations below
)

// head is the start of every configuration below: one consumed topic.
const head = "kafka:\n  brokers: ['localhost:9092']\nconsumer:\n  group: shop\n  topics: [orders]\n"

// TestLintPrintsTopology: after its checks, lint prints the
// sub-pipelines a file's stages are cut into, with the topics each reads
// and writes, its stages, stores with their changelogs, tables and the
// repartition topic it ends with; a pipeline that run would refuse is a
// problem.
func TestLintPrintsTopology(t *testing.T) {
	cases := []struct {
		name     string
		pipeline string
		code     int
		want     string // everything after the file name
	}{
		{"stateless", `
  - stage: json
  - stage: filter
    name: big
    if: json.total > 100
  - stage: produce
    topic: big-orders
`, ExitOK, `: ok
  topology of group shop: 1 sub-pipeline
    1. reads orders
       stages       json, big (filter), produce
       writes       big-orders
`},
		{"consume and commit only", " []\n", ExitOK, `: ok
  topology of group shop: 1 sub-pipeline
    1. reads orders
       stages       (none: consume and commit only)
`},
		{"aggregate with a key: a repartition", `
  - stage: json
  - stage: aggregate
    name: per_user
    store: totals
    key: json.user
    fields: {orders: count()}
  - stage: produce
    topic: totals
`, ExitOK, `: ok
  topology of group shop: 2 sub-pipelines, cut at each repartition
    1. reads orders
       stages       json
       repartition  shop-by-totals-repartition (read by sub-pipeline 2)
    2. reads shop-by-totals-repartition
       stages       per_user (aggregate), produce
       store        totals, changelog shop-totals-changelog
       writes       totals
`},
		{"aggregate without repartition", `
  - stage: aggregate
    key: json.user
    repartition: false
    fields: {orders: count()}
`, ExitOK, `: ok
  topology of group shop: 1 sub-pipeline
    1. reads orders
       stages       aggregate
       store        aggregate, changelog shop-aggregate-changelog
`},
		{"joins: a table by a new key, and a global one", `
  - stage: json
  - stage: join
    name: with_user
    table: users
    key: json.user
    as: user
  - stage: join
    name: with_region
    table: regions
    key: json.region
    global: true
    as: region
  - stage: dedupe
    within: 1h
`, ExitOK, `: ok
  topology of group shop: 2 sub-pipelines, cut at each repartition
    1. reads orders
       stages       json
       repartition  shop-join-users-repartition (read by sub-pipeline 2)
    2. reads shop-join-users-repartition
       stages       with_user (join), with_region (join), dedupe
       store        dedupe, changelog shop-dedupe-changelog
       table        table-users, topic users (the partitions this instance is assigned)
       global table table-regions, topic regions (every partition)
`},
		{"two joins of one table: run would refuse it", `
  - stage: join
    name: first
    table: users
    key: json.user
  - stage: join
    name: second
    table: users
    key: json.friend
`, ExitFailure, `: pipeline: repartition "join-users": two repartitions have that name; each needs its own
    hint: run refuses it too: change the stages' names or options it names
`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), "c.yaml", head+"pipeline:"+c.pipeline)
			code, out, errOut := runCLI(context.Background(), stages.Default, "lint", file)
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s%s", code, c.code, out, errOut)
			}
			if got, ok := strings.CutPrefix(out, file); !ok || got != c.want {
				t.Errorf("lint printed:\n%s\nwant:\n%s%s", out, file, c.want)
			}
		})
	}
}

// TestLintTopologyOfAStageThatNeedsACluster: a stage that cannot be
// built without a cluster (stages.ErrNoProducer) leaves the topology
// unknown, which is not a problem of the file.
func TestLintTopologyOfAStageThatNeedsACluster(t *testing.T) {
	reg := &stages.Registry{}
	if err := reg.Register(stages.Spec{Name: "remote", Summary: "Needs a cluster.",
		New: func(stages.Options, stages.Env) (stages.Stage, error) {
			return nil, fmt.Errorf("remote: %w (it dials its own service)", stages.ErrNoProducer)
		}}); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, t.TempDir(), "c.yaml", head+"pipeline:\n  - stage: remote\n")
	code, out, errOut := runCLI(context.Background(), reg, "lint", file)
	want := file + ": ok\n  topology: not known without a cluster: stage remote (line 7): remote: no producer available (it dials its own service)\n"
	if code != ExitOK || out != want {
		t.Errorf("exit %d, want %d; lint printed:\n%s%s\nwant:\n%s", code, ExitOK, out, errOut, want)
	}
}
