package run

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
)

// tally counts records per key in its store "tally".
type tally struct{}

func (tally) Stores() []string { return []string{"tally"} }

func (tally) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	st, err := stages.StoreFor(ctx, "tally")
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

func tallyRegistry() *stages.Registry {
	reg := &stages.Registry{}
	if err := reg.Register(stages.Spec{
		Name: "tally", Summary: "Count records per key.",
		New: func(stages.Options, stages.Env) (stages.Stage, error) { return tally{}, nil },
	}); err != nil {
		panic(err)
	}
	return reg
}

// TestRunSaysWhereStateLives: a run whose stages keep state names the
// stores and the state directory in its start line, logs the changelog
// topics, and keeps each partition's store under the directory.
func TestRunSaysWhereStateLives(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	src := strings.Replace(embeddedConfig, "RATE", "400", 1)
	src = strings.Replace(src, "  - stage: count\n", "  - stage: tally\n", 1)
	src += "state:\n  dir: " + dir + "\n"
	cfg := writeFile(t, t.TempDir(), "c.yaml", src)
	code, _, errOut := runCLI(context.Background(), tallyRegistry(), "run", "-c", cfg, "--max-records", "100", "--http", "off", "--for", "60s")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	starting := regexp.MustCompile(`starting\s+\{.*"stores": \["tally"\], "state": "` + regexp.QuoteMeta(dir) + `"\}`)
	if !starting.MatchString(errOut) {
		t.Errorf("the start line does not name the stores and %s:\n%s", dir, errOut)
	}
	if !strings.Contains(errOut, `state: stores ready`) || !strings.Contains(errOut, `"changelogs": ["inproc-tally-changelog"]`) {
		t.Errorf("no line naming the changelog topics:\n%s", errOut)
	}
	parts, err := os.ReadDir(filepath.Join(dir, "tally"))
	if err != nil || len(parts) == 0 {
		t.Errorf("no partition stores under %s: %v %v", dir, parts, err)
	}
	// without stages with state, the start line says nothing of state
	var n atomic.Int64
	cfg = writeFile(t, t.TempDir(), "c.yaml", strings.Replace(embeddedConfig, "RATE", "400", 1))
	code, _, errOut = runCLI(context.Background(), countRegistry(&n), "run", "-c", cfg, "--max-records", "20", "--http", "off", "--for", "60s")
	if code != ExitOK || strings.Contains(errOut, `"state"`) || strings.Contains(errOut, "state: stores ready") {
		t.Errorf("exit %d; a run without state mentions it:\n%s", code, errOut)
	}
}
