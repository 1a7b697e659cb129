package config

import (
	"fmt"
	"sort"
	"strings"
)

// Position is a place in a configuration file: a 1-based line and column
// (columns count characters, not bytes).
type Position struct {
	Line, Col int
}

func (p Position) before(q Position) bool {
	return p.Line < q.Line || p.Line == q.Line && p.Col < q.Col
}

// Error is one problem in a configuration file.
type Error struct {
	File string
	Position
	// Key is the dotted path of the key concerned, such as
	// "consumer.group" or "pipeline[2].if"; empty if none.
	Key string
	// Msg says what is wrong. It never holds the value of a secret.
	Msg string
	// Hint says what to do about it; it may be empty.
	Hint string
	// value is the value Msg is about, if any (see
	// pipeline.FieldError.Value).
	value string
}

// Error formats the problem on one line: file:line:col: key: message
// (hint: ...).
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Col)
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	if e.Hint != "" {
		b.WriteString(" (hint: " + e.Hint + ")")
	}
	return b.String()
}

// Errors is every problem found in a configuration file, in file order.
// Loading returns it as its error; get it back with errors.As.
type Errors []*Error

// Error lists the problems, one a line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

func (es Errors) sort() {
	sort.SliceStable(es, func(i, j int) bool { return es[i].Position.before(es[j].Position) })
}

// problems collects the errors of one file.
type problems struct {
	file string
	errs Errors
}

func (p *problems) add(pos Position, key, msg, hint string) {
	p.addValue(pos, key, "", msg, hint)
}

// addValue adds a problem about value, which msg may quote (%q).
func (p *problems) addValue(pos Position, key, value, msg, hint string) {
	if hint == "" {
		hint = "configs/README.md describes every section; the examples there show them in use"
	}
	p.errs = append(p.errs, &Error{File: p.file, Position: pos, Key: key, Msg: msg, Hint: hint, value: value})
}

// didYouMean suggests the candidate closest to s, if one is close.
func didYouMean(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("did you mean %q? ", best)
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
