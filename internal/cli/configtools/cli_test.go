package configtools

import (
	"context"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/cli/clitest"
)

// TestLintExitCodes: lint exits 0 only if every file is fine, 1 if any
// has a problem (each printed as file:line:col with its hint), 2 for a
// wrong command line.
func TestLintExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", clitest.GoodConfig)
	bad := writeFile(t, dir, "bad.yaml", clitest.BadConfig)
	cases := []struct {
		name string
		args []string
		code int
		out  []string // lines stdout must hold
		err  string   // text stderr must hold
	}{
		{"good file", []string{"lint", "-c", good}, ExitOK, []string{good + ": ok"}, ""},
		{"files as arguments", []string{"lint", good, good}, ExitOK, []string{good + ": ok"}, ""},
		{"bad file", []string{"lint", "-c", bad}, ExitFailure, []string{
			bad + ":2:1: consumer.group: a consumer group id is required",
			bad + ":5:9: pipeline[0].if: stage filter: option \"if\": unbalanced parentheses",
			"    hint: The condition.",
			bad + ":7:13: pipeline[1].format: \"yaml\" is not one of text, json, value",
		}, "1 of 1 configuration file(s) have problems"},
		{"one bad among good", []string{"lint", "-c", good, "-c", bad}, ExitFailure, []string{good + ": ok", bad + ":2:1:"}, "1 of 2"},
		{"missing file", []string{"lint", "-c", dir + "/absent.yaml"}, ExitFailure, []string{"no such file"}, ""},
		{"no file", []string{"lint"}, ExitUsage, nil, "name at least one file"},
		{"unknown flag", []string{"lint", "--bogus"}, ExitUsage, nil, "unknown flag"},
		{"unknown command", []string{"lnt"}, ExitUsage, nil, "unknown command"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(context.Background(), clitest.Registry(), c.args...)
			if code != c.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, out, errOut)
			}
			lines := strings.Split(out, "\n")
			for _, want := range c.out {
				found := false
				for _, l := range lines {
					found = found || strings.HasPrefix(l, want) || strings.Contains(want, "no such") && strings.Contains(l, want)
				}
				if !found {
					t.Errorf("stdout lacks a line starting %q:\n%s", want, out)
				}
			}
			if !strings.Contains(errOut, c.err) {
				t.Errorf("stderr lacks %q:\n%s", c.err, errOut)
			}
		})
	}
}

// TestStagesListing: the listing comes from the specs: every option with
// its type, required flag, default, doc and allowed values.
func TestStagesListing(t *testing.T) {
	code, out, _ := runCLI(context.Background(), clitest.Registry(), "stages")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "filter\n    Keep the records an expression accepts.\n    exactly-once: yes (") {
		t.Errorf("listing lacks the filter stage's summary and exactly-once line:\n%s", out)
	}
	if !strings.Contains(out, "stdout\n    Print records.\n    exactly-once: no (its effects outside the output records are at-least-once: repeated after a crash or abort)\n") {
		t.Errorf("listing lacks the stdout stage's exactly-once line:\n%s", out)
	}
	rows := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		rows[strings.Join(strings.Fields(l), " ")] = true
	}
	for _, want := range []string{
		"option type required default description",
		"if expr yes - The condition.",
		`format string no "text" How to print. One of: text, json, value.`,
		"every int no 1 Print one record in every n.",
	} {
		if !rows[want] {
			t.Errorf("listing lacks the row %q:\n%s", want, out)
		}
	}
	if code, out, _ := runCLI(context.Background(), clitest.Registry(), "stages", "stdout"); code != ExitOK || strings.Contains(out, "filter") {
		t.Errorf("stages stdout: exit %d\n%s", code, out)
	}
	if code, _, errOut := runCLI(context.Background(), clitest.Registry(), "stages", "nope"); code != ExitFailure || !strings.Contains(errOut, `no stage "nope"`) {
		t.Errorf("stages nope: exit %d %s", code, errOut)
	}
}

// TestLintExactlyOnceWarnings: with guarantee: exactly_once, lint warns
// (exit 0, the file ok) about each stage that does not take part in
// exactly-once, at its position; with at_least_once, or with only stages
// that take part, it prints no warning.
func TestLintExactlyOnceWarnings(t *testing.T) {
	const head = "kafka: {brokers: [\"localhost:9092\"]}\nconsumer: {group: g, topics: [orders]}\n"
	const printing = "pipeline:\n  - stage: filter\n    if: x\n  - stage: stdout\n    name: sample\n"
	const qualifying = "pipeline:\n  - stage: filter\n    if: x\n"
	dir := t.TempDir()
	for _, c := range []struct {
		name, src string
		want      []string // lines stdout must hold, in order (the file's name first)
	}{
		{"exactly_once with a printing stage", head + "guarantee: exactly_once\n" + printing, []string{
			":7:5: warning: pipeline[1]: stage stdout (\"sample\") does not take part in exactly-once: " +
				"its effects outside the output records are at-least-once: repeated after a crash or abort",
			"    hint: guarantee: exactly_once covers the records stages return",
			": ok, 1 warning",
		}},
		{"at_least_once with a printing stage", head + "guarantee: at_least_once\n" + printing, []string{": ok"}},
		{"exactly_once with qualifying stages only", head + "guarantee: exactly_once\n" + qualifying, []string{": ok"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := writeFile(t, dir, strings.ReplaceAll(c.name, " ", "_")+".yaml", c.src)
			code, out, errOut := runCLI(context.Background(), clitest.Registry(), "lint", "-c", f)
			if code != ExitOK {
				t.Fatalf("exit %d, want %d (warnings do not fail)\nstdout:\n%s\nstderr:\n%s", code, ExitOK, out, errOut)
			}
			// the lines up to the file's own, without the topology
			out, _, _ = strings.Cut(out, "\n  topology of group")
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != len(c.want) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(c.want), out)
			}
			for i, w := range c.want {
				if !strings.HasPrefix(w, " ") {
					w = f + w
				}
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("line %d:\n got %s\nwant it to start with %s", i, lines[i], w)
				}
			}
			if len(c.want) == 1 && lines[0] != f+": ok" {
				t.Errorf("got %q, want %q", lines[0], f+": ok")
			}
		})
	}
}
