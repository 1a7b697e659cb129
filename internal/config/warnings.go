package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// Warning is a remark about a valid configuration: something run
// accepts and does, but not what the file's other settings promise. It
// never fails a load; lint prints it.
type Warning struct {
	File string
	Position
	// Key is the dotted path of the key concerned, such as
	// "pipeline[2]".
	Key string
	// Msg says what the setting does; Hint what to do if that is not
	// what was meant.
	Msg, Hint string
}

// String formats the warning on one line: file:line:col: warning: key:
// message (hint: ...).
func (w Warning) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d:%d: warning: ", w.File, w.Line, w.Col)
	if w.Key != "" {
		b.WriteString(w.Key + ": ")
	}
	b.WriteString(w.Msg)
	if w.Hint != "" {
		b.WriteString(" (hint: " + w.Hint + ")")
	}
	return b.String()
}

// Warnings returns the warnings about c, in file order. With guarantee:
// exactly_once, each stage whose spec does not declare ExactlyOnce (see
// stages.Spec) is one: its effects outside its output records (printed
// lines, a Go stage's own calls) are repeated after a crash or an
// aborted transaction. So is a state section no stage uses, and
// state.dir with state.store: memory.
func (c *Config) Warnings() []Warning {
	out := slices.Clone(c.warnings)
	if c.Pipeline.Guarantee == pipeline.ExactlyOnce {
		out = append(out, c.exactlyOnceWarnings()...)
	}
	slices.SortStableFunc(out, func(a, b Warning) int {
		switch {
		case a.Position.before(b.Position):
			return -1
		case b.Position.before(a.Position):
			return 1
		}
		return 0
	})
	return out
}

// exactlyOnceWarnings are the stages outside exactly-once.
func (c *Config) exactlyOnceWarnings() []Warning {
	var out []Warning
	for _, s := range c.Stages {
		if s.Spec.ExactlyOnce {
			continue
		}
		what := "stage " + s.Spec.Name
		if s.Name != s.Spec.Name {
			what += fmt.Sprintf(" (%q)", s.Name)
		}
		out = append(out, Warning{
			File: c.File, Position: s.Pos, Key: s.Key,
			Msg: what + " does not take part in exactly-once: its effects outside the output records are at-least-once: " +
				"repeated after a crash or abort",
			Hint: "guarantee: exactly_once covers the records stages return and write to Kafka through the pipeline; " +
				"'processor stages' shows which stages take part",
		})
	}
	return out
}
