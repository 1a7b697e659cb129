package config

import (
	"fmt"
	"sort"
	"strings"
)

// LookupFunc returns an environment variable's value and whether it is
// set, like os.LookupEnv.
type LookupFunc func(name string) (string, bool)

// posMap maps positions in interpolated text back to the source text.
// Each mark starts a run of output: copied source (literal) or an
// inserted value, which maps to its ${ reference as a whole.
type posMap struct {
	marks []mark
}

type mark struct {
	out, in Position
	literal bool
}

// source returns the source position of interpolated-text position p.
func (m *posMap) source(p Position) Position {
	i := sort.Search(len(m.marks), func(i int) bool { return p.before(m.marks[i].out) }) - 1
	if i < 0 {
		return p
	}
	mk := m.marks[i]
	switch {
	case !mk.literal:
		return mk.in
	case p.Line == mk.out.Line:
		return Position{mk.in.Line, mk.in.Col + p.Col - mk.out.Col}
	default:
		return Position{mk.in.Line + p.Line - mk.out.Line, p.Col}
	}
}

// interpolator copies source text to out, replacing references.
type interpolator struct {
	lookup  LookupFunc
	out     strings.Builder
	outPos  Position
	inPos   Position
	inRun   bool // a literal run is open in pm
	pm      posMap
	missing *problems
}

func (ip *interpolator) copyRune(r rune) {
	if !ip.inRun {
		ip.pm.marks = append(ip.pm.marks, mark{out: ip.outPos, in: ip.inPos, literal: true})
		ip.inRun = true
	}
	ip.out.WriteRune(r)
	ip.outPos = advance(ip.outPos, r)
	ip.inPos = advance(ip.inPos, r)
}

func (ip *interpolator) insert(value string, refStart Position, refRunes []rune) {
	ip.pm.marks = append(ip.pm.marks, mark{out: ip.outPos, in: refStart})
	ip.inRun = false
	for _, r := range value {
		ip.out.WriteRune(r)
		ip.outPos = advance(ip.outPos, r)
	}
	for _, r := range refRunes {
		ip.inPos = advance(ip.inPos, r)
	}
}

func advance(p Position, r rune) Position {
	if r == '\n' {
		return Position{p.Line + 1, 1}
	}
	return Position{p.Line, p.Col + 1}
}

// interpolate replaces ${VAR} and ${VAR:-default} references in src (see
// the package documentation). Every unset variable and malformed
// reference is added to probs, at its source position; it returns the
// text and the map of its positions back to src.
func interpolate(src []byte, lookup LookupFunc, probs *problems) (string, *posMap) {
	ip := &interpolator{lookup: lookup, outPos: Position{1, 1}, inPos: Position{1, 1}, missing: probs}
	lines := strings.SplitAfter(string(src), "\n")
	for _, line := range lines {
		ip.line([]rune(line))
	}
	return ip.out.String(), &ip.pm
}

// line interpolates one source line (with its newline, if any). Quotes
// are tracked within the line only, to tell a comment's # from a #
// inside a quoted value.
func (ip *interpolator) line(rs []rune) {
	var quote rune
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		prev := ' '
		if i > 0 {
			prev = rs[i-1]
		}
		switch {
		case quote != 0:
			if r == quote && (quote == '\'' || prev != '\\') {
				quote = 0
			}
		case (r == '"' || r == '\'') && strings.ContainsRune(" \t[{,:", prev):
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			for _, c := range rs[i:] {
				ip.copyRune(c)
			}
			return
		}
		if r != '$' || i+1 >= len(rs) {
			ip.copyRune(r)
			continue
		}
		if rs[i+1] == '$' && i+2 < len(rs) && rs[i+2] == '{' { // $${ is a literal ${
			ip.insert("${", ip.inPos, rs[i:i+3])
			i += 2
			continue
		}
		if rs[i+1] != '{' {
			ip.copyRune(r)
			continue
		}
		n := ip.reference(rs[i:])
		i += n - 1
	}
}

// reference replaces the reference at the start of rs and returns how
// many runes it took.
func (ip *interpolator) reference(rs []rune) int {
	start := ip.inPos
	end := -1
	for j, c := range rs {
		if c == '}' {
			end = j
			break
		}
		if c == '\n' {
			break
		}
	}
	if end < 0 {
		ip.missing.add(start, "", "unterminated ${ reference", "close it with } on the same line, or write $${ for a literal ${")
		n := 2
		ip.insert("${", start, rs[:n])
		return n
	}
	body := string(rs[2:end])
	name, def, hasDef := strings.Cut(body, ":-")
	ref := rs[:end+1]
	if !validName(name) {
		ip.missing.add(start, "", fmt.Sprintf("bad reference ${%s}: a variable name is letters, digits and _, not starting with a digit", body),
			"write ${NAME} or ${NAME:-default}; $${ is a literal ${")
		ip.insert("", start, ref)
		return len(ref)
	}
	v, ok := ip.lookup(name)
	switch {
	case hasDef && v == "":
		v = def
	case !ok:
		ip.missing.add(start, "", fmt.Sprintf("environment variable %s is not set", name),
			fmt.Sprintf("set it (export %s=...), or give a default: ${%s:-value}", name, name))
	}
	ip.insert(v, start, ref)
	return len(ref)
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
