package configtools

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
	_ "github.com/fencepost-dev/fencepost/stages/builtin" // the table documents the built-in stages
)

var update = flag.Bool("update", false, "rewrite the generated parts of the docs")

// TestPluginsDocTable: the table of built-in stages in docs/plugins.md is
// what "processor stages --format markdown" prints from the specs: one
// source. With -update it rewrites the table.
func TestPluginsDocTable(t *testing.T) {
	const file, begin, end = "../../../docs/plugins.md", "<!-- stages:begin -->\n", "<!-- stages:end -->"
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	writeMarkdown(&table, stages.Default.Specs())
	text := string(doc)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the %q ... %q markers", file, begin, end)
	}
	current := text[i+len(begin) : j]
	if current == table.String() {
		return
	}
	if *update {
		if err := os.WriteFile(file, []byte(text[:i+len(begin)]+table.String()+text[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the stage table in %s is not what the specs say; run: go test ./internal/cli/configtools -run TestPluginsDocTable -update\nwant:\n%s", file, table.String())
}
