package config

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/fencepost-dev/fencepost/internal/limits"
)

// LookupFunc returns an environment variable's value and whether it is
// set, like os.LookupEnv.
type LookupFunc func(name string) (string, bool)

// Interpolation works on the parsed document, so that a value can never
// be more than the value of its key. The YAML parser must first see past
// the references, though: "[${A}, ${B}]" is not valid YAML (a plain value
// in a flow list cannot hold { or }). So before parsing, protect replaces
// each reference with a placeholder of as many characters, made of
// private-use characters that YAML reads as any other letter (a file
// holding those is refused); expand then replaces the placeholders in the
// values of the parsed document. Positions are those of the file as
// written throughout.
//
// A placeholder is marker followed by one digit (the reference's index in
// refs, as digit0+index) repeated to the reference's length.
const (
	marker     = '\U000F0000'
	digit0     = '\U000F0001' // index 0; MaxReferences fit below U+FFFFD
	firstSpare = marker       // runes from here on are refused in files
)

type refKind uint8

const (
	refVar          refKind = iota // ${NAME} or ${NAME:-default}
	refEscape                      // $${, a literal ${
	refBad                         // ${...} whose name is not valid
	refUnterminated                // ${ with no } on its line
)

// reference is one ${...} of the file.
type reference struct {
	kind   refKind
	pos    Position
	text   string // as written
	name   string
	def    string
	hasDef bool
	used   bool // found in a value (else in a comment, or a key)
}

// protect returns src with each reference replaced by its placeholder,
// and the references in file order. It reports what makes the file
// unusable (invalid UTF-8, characters it keeps for itself, too many
// references) and returns ok false then.
func protect(src string, probs *problems) (string, []reference, bool) {
	if !strings.Contains(src, "${") && !hasSpare(src) && utf8.ValidString(src) {
		return src, nil, true
	}
	var out strings.Builder
	out.Grow(len(src) + len(src)/2)
	var refs []reference
	pos := Position{1, 1}
	for i := 0; i < len(src); {
		r, size := utf8.DecodeRuneInString(src[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			probs.add(pos, "", "the file is not valid UTF-8 here", "save the file as UTF-8")
			return "", nil, false
		case r >= firstSpare:
			probs.add(pos, "", fmt.Sprintf("character %U is not allowed in a configuration file (private use)", r), "remove it")
			return "", nil, false
		case r == '$' && (strings.HasPrefix(src[i:], "${") || strings.HasPrefix(src[i:], "$${")):
			ref := scanReference(src[i:], pos)
			if len(refs) == limits.MaxReferences {
				probs.add(pos, "", fmt.Sprintf("more than %d ${...} references", limits.MaxReferences), "use fewer references")
				return "", nil, false
			}
			n := utf8.RuneCountInString(ref.text)
			out.WriteRune(marker)
			d := string(rune(digit0 + len(refs)))
			out.WriteString(strings.Repeat(d, n-1))
			refs = append(refs, ref)
			i += len(ref.text)
			pos.Col += n
			continue
		}
		out.WriteString(src[i : i+size])
		i += size
		if r == '\n' {
			pos = Position{pos.Line + 1, 1}
		} else {
			pos.Col++
		}
	}
	return out.String(), refs, true
}

func hasSpare(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r >= firstSpare })
}

// scanReference reads the reference at the start of s, which starts
// with ${ or $${.
func scanReference(s string, pos Position) reference {
	if strings.HasPrefix(s, "$${") {
		return reference{kind: refEscape, pos: pos, text: "$${"}
	}
	end := strings.IndexAny(s, "}\n")
	if end < 0 || s[end] != '}' {
		return reference{kind: refUnterminated, pos: pos, text: "${"}
	}
	ref := reference{kind: refVar, pos: pos, text: s[:end+1]}
	ref.name, ref.def, ref.hasDef = strings.Cut(s[2:end], ":-")
	if !validName(ref.name) {
		ref.kind = refBad
	}
	return ref
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

// expander replaces the placeholders of a parsed document.
type expander struct {
	refs   []reference
	lookup LookupFunc
	probs  *problems
	// values holds, for each scalar node that had references, the values
	// of the variables it was given, so that a secret field's variables
	// are known as secrets.
	values map[ast.Node][]string
	// secrets are the values of variables named like secrets (see
	// secretName), wherever they are used.
	secrets []string
}

// secretWords are the parts of a variable name that say it holds a
// secret: its value is hidden in every message, whichever key it is
// used at.
var secretWords = []string{"PASS", "SECRET", "TOKEN", "CREDENTIAL", "APIKEY", "API_KEY", "PRIVATE"}

// secretName says whether a variable's name says it holds a secret
// (KAFKA_PASSWORD, DB_PASSWD, API_TOKEN, ...), in any case.
func secretName(name string) bool {
	up := strings.ToUpper(name)
	for _, w := range secretWords {
		if strings.Contains(up, w) {
			return true
		}
	}
	return false
}

// node returns n with the placeholders in its values replaced, and
// replaces them below n in place. Keys are left as they are: a reference
// there is reported by unused.
func (x *expander) node(n ast.Node) ast.Node {
	switch v := n.(type) {
	case *ast.DocumentNode:
		v.Body = x.node(v.Body)
	case *ast.MappingNode:
		for _, mv := range v.Values {
			mv.Value = x.node(mv.Value)
		}
	case *ast.MappingValueNode:
		v.Value = x.node(v.Value)
	case *ast.SequenceNode:
		for i, e := range v.Values {
			v.Values[i] = x.node(e)
		}
	case *ast.AnchorNode:
		v.Value = x.node(v.Value)
	case *ast.TagNode:
		v.Value = x.node(v.Value)
	case *ast.LiteralNode:
		if v.Value != nil {
			var vals []string
			v.Value.Value, vals = x.text(v.Value.Value)
			x.record(v, vals)
		}
	case *ast.StringNode:
		return x.scalar(v)
	}
	return n
}

// scalar replaces the placeholders of a string. An unquoted value is
// then typed as YAML types a plain value (a number, true or false; empty
// is no value), so that "retries: ${N}" is a number; "null" and "~" stay
// text, and a quoted value is always a string.
func (x *expander) scalar(n *ast.StringNode) ast.Node {
	if !strings.ContainsRune(n.Value, marker) {
		return n
	}
	s, vals := x.text(n.Value)
	out := x.typed(n, s)
	x.record(out, vals)
	return out
}

// record notes the variable values n was given.
func (x *expander) record(n ast.Node, vals []string) {
	if len(vals) > 0 {
		if x.values == nil {
			x.values = map[ast.Node][]string{}
		}
		x.values[n] = vals
	}
}

// typed returns n with its text s, typed as the scalar doc says.
func (x *expander) typed(n *ast.StringNode, s string) ast.Node {
	tk := *n.Token
	tk.Value = s
	if tk.Type != token.StringType { // quoted
		n.Value, n.Token = s, &tk
		return n
	}
	if s == "" {
		tk.Type = token.NullType
		return ast.Null(&tk)
	}
	switch token.New(s, s, tk.Position).Type {
	case token.IntegerType, token.BinaryIntegerType, token.OctetIntegerType, token.HexIntegerType:
		tk.Type = token.IntegerType
		return ast.Integer(&tk)
	case token.FloatType:
		tk.Type = token.FloatType
		return ast.Float(&tk)
	case token.BoolType:
		tk.Type = token.BoolType
		return ast.Bool(&tk)
	}
	n.Value, n.Token = s, &tk
	return n
}

// text replaces the placeholders in s: a variable by its value (or its
// default), $${ by ${. Problems are reported at the reference. It also
// returns the variables' values it used.
func (x *expander) text(s string) (string, []string) {
	var b strings.Builder
	var vals []string
	for {
		i := strings.IndexRune(s, marker)
		if i < 0 {
			b.WriteString(s)
			return b.String(), vals
		}
		b.WriteString(s[:i])
		s = s[i+utf8.RuneLen(marker):]
		d, size := utf8.DecodeRuneInString(s)
		if d < digit0 || int(d-digit0) >= len(x.refs) {
			continue // not a placeholder protect wrote: drop the marker
		}
		for strings.HasPrefix(s, string(d)) {
			s = s[size:]
		}
		ref := &x.refs[d-digit0]
		v := x.value(ref)
		b.WriteString(v)
		if ref.kind == refVar {
			vals = append(vals, v)
			if secretName(ref.name) {
				x.secrets = append(x.secrets, v)
			}
		}
	}
}

// value is what a reference stands for.
func (x *expander) value(ref *reference) string {
	ref.used = true
	switch ref.kind {
	case refEscape:
		return "${"
	case refUnterminated:
		x.probs.add(ref.pos, "", "unterminated ${ reference", "close it with } on the same line, or write $${ for a literal ${")
		return ""
	case refBad:
		x.probs.add(ref.pos, "", fmt.Sprintf("bad reference %s: a variable name is letters, digits and _, not starting with a digit", ref.text),
			"write ${NAME} or ${NAME:-default}; $${ is a literal ${")
		return ""
	}
	v, ok := x.lookup(ref.name)
	switch {
	case ref.hasDef && v == "":
		return ref.def
	case !ok:
		x.probs.add(ref.pos, "", fmt.Sprintf("environment variable %s is not set", ref.name),
			fmt.Sprintf("set it (export %s=...), or give a default: ${%s:-value}", ref.name, ref.name))
	}
	return v
}

// unused reports references that were not replaced and are not in a
// comment: in keys, anchors or tags, where a value must not reach.
func (x *expander) unused(comments []*token.Token) {
	for _, c := range comments {
		for _, r := range c.Value {
			if r >= digit0 && int(r-digit0) < len(x.refs) {
				x.refs[r-digit0].used = true
			}
		}
	}
	for _, ref := range x.refs {
		if !ref.used {
			x.probs.add(ref.pos, "", fmt.Sprintf("%s is in a key, tag or anchor name: references are replaced in values only", ref.text),
				"write the key as it is; an environment variable can only give a value")
		}
	}
}

// restore writes the references back into text taken from the protected
// source (a YAML error message quoting it), so that messages show the
// file as written.
func restore(s string, refs []reference) string {
	if !strings.ContainsRune(s, marker) {
		return s
	}
	var b strings.Builder
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		if rs[i] != marker || i+1 >= len(rs) || rs[i+1] < digit0 || int(rs[i+1]-digit0) >= len(refs) {
			b.WriteRune(rs[i])
			continue
		}
		ref := refs[rs[i+1]-digit0]
		b.WriteString(ref.text)
		i += utf8.RuneCountInString(ref.text) - 1
	}
	return b.String()
}
