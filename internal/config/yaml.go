package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/fencepost-dev/fencepost/internal/limits"
)

// parse parses the protected text into one document's body and replaces
// its references; nil after reporting why not.
func (d *decoder) parse(text string, refs []reference, lookup LookupFunc) ast.Node {
	f, tokens, err := parseYAML(text)
	if err != nil {
		pos, msg := Position{1, 1}, err.Error()
		var ye yaml.Error
		var de *depthError
		if errors.As(err, &de) {
			d.probs.add(de.pos, "", msg, "a configuration needs a few levels: check the brackets and indentation")
			return nil
		}
		if errors.As(err, &ye) {
			msg = ye.GetMessage()
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				pos = Position{tk.Position.Line, tk.Position.Column}
			}
		}
		msg, hint := syntaxMessage(restore(msg, refs))
		d.probs.add(pos, "", msg, hint)
		return nil
	}
	var docs []*ast.DocumentNode
	for _, doc := range f.Docs {
		if doc.Body != nil {
			docs = append(docs, doc)
		}
	}
	switch {
	case len(docs) == 0:
		d.probs.add(Position{1, 1}, "", "the file is empty", "start from configs/quickstart.yaml")
		return nil
	case len(docs) > 1:
		d.probs.add(d.pos(docs[1].Body), "", "more than one YAML document (---) in the file", "keep one configuration per file")
		return nil
	}
	x := &expander{refs: refs, lookup: lookup, probs: d.probs}
	x.node(docs[0])
	d.values = x.values
	d.secrets = append(d.secrets, x.secrets...)
	var comments []*token.Token
	for _, tk := range tokens {
		if tk.Type == token.CommentType {
			comments = append(comments, tk)
		}
	}
	x.unused(comments)
	return docs[0].Body
}

// parseYAML tokenizes text, refuses nesting deeper than limits.MaxDepth
// (the parser's time grows with the square of the depth), and parses it.
// A panic in the parser is an error.
func parseYAML(text string) (f *ast.File, tokens token.Tokens, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("the YAML parser failed (%v)", r)
		}
	}()
	tokens = lexer.Tokenize(text)
	if tk := tooDeep(tokens); tk != nil {
		return nil, nil, &depthError{Position{tk.Position.Line, tk.Position.Column}}
	}
	f, err = parser.Parse(tokens, 0, parser.AllowDuplicateMapKey())
	return f, tokens, err
}

// depthError is nesting beyond limits.MaxDepth, at pos.
type depthError struct{ pos Position }

func (e *depthError) Error() string {
	return fmt.Sprintf("lists and mappings nested more than %d deep", limits.MaxDepth)
}

// tooDeep returns the token at which lists and mappings nest more than
// limits.MaxDepth deep, or nil. A flow level is a [ or { not yet closed; a
// block level is a column at which a line (or what follows a - or ?
// indicator) starts, deeper than the open ones.
func tooDeep(tokens token.Tokens) *token.Token {
	var block []int
	flow, line, after := 0, 0, false
	for _, tk := range tokens {
		if tk.Type == token.CommentType || tk.Position == nil {
			continue
		}
		first := tk.Position.Line != line
		line = tk.Position.Line
		if flow == 0 && (first || after) {
			for len(block) > 0 && block[len(block)-1] >= tk.Position.Column {
				block = block[:len(block)-1]
			}
			block = append(block, tk.Position.Column)
		}
		after = tk.Type == token.SequenceEntryType || tk.Type == token.MappingKeyType
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			flow++
		case token.SequenceEndType, token.MappingEndType:
			flow = max(flow-1, 0)
		}
		if len(block)+flow > limits.MaxDepth {
			return tk
		}
	}
	return nil
}

// syntaxMessage words a YAML syntax error for people: a tab is named,
// not printed.
func syntaxMessage(msg string) (string, string) {
	if strings.Contains(msg, "\t") {
		msg = strings.ReplaceAll(strings.ReplaceAll(msg, "'\t'", "tab"), "\t", "tab")
		return "YAML syntax: " + msg, "YAML indents with spaces: replace the tab with spaces"
	}
	return "YAML syntax: " + msg, "check the indentation and quoting around here"
}
