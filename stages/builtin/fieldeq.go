package builtin

import (
	"github.com/expr-lang/expr/ast"
)

// fieldEquals is a condition that compares one top-level field of json
// with a string constant (json.type == "purchase", or the constant
// first). It is answered from the member's raw bytes: no value decoded,
// boxed or run through the VM. Its answers are the expression's: true
// when the last member of that name (as encoding/json keeps the last of
// duplicates) is a string equal to the constant; false when it is
// another type or absent (nil == "x" is false).
type fieldEquals struct {
	name *fieldSet // the field, alone
	want string
}

// fieldEqualsOf returns p as a fieldEquals if p is exactly such a
// comparison, else nil.
func fieldEqualsOf(p *program) *fieldEquals {
	b, ok := p.prog.Node().(*ast.BinaryNode)
	if !ok || b.Operator != "==" {
		return nil
	}
	for _, side := range [2][2]ast.Node{{b.Left, b.Right}, {b.Right, b.Left}} {
		m, isMember := side[0].(*ast.MemberNode)
		s, isString := side[1].(*ast.StringNode)
		if !isMember || !isString {
			continue
		}
		if field, ok := jsonField(m); ok {
			return &fieldEquals{name: newFieldSet([]string{field}), want: s.Value}
		}
	}
	return nil
}

// test answers the condition for v, whose doc is d, and reports true; or
// reports false when d is not a plain parsed-free object the check
// accepted (not JSON, not an object, a number it refuses, or already
// decoded whole): the expression then runs as written, with its errors.
func (f *fieldEquals) test(d *jsonDoc, v []byte) (keep, ok bool) {
	if !d.valid || !d.object || d.err != nil || d.parsed {
		return false, false
	}
	var raw []byte
	if fs := f.name; d.narrowPlain(fs) {
		for s := d.memberSpans(); len(s) >= 4; s = s[4:] {
			if fs.tokens[0].is(v, int(s[0]), int(s[1])) {
				raw = v[s[2]:s[3]] // the last one wins
			}
		}
	} else {
		d.eachMember(v, func(name, value []byte) {
			if f.name.index(name) == 0 {
				raw = value // the last one wins
			}
		})
	}
	if len(raw) == 0 || raw[0] != '"' {
		return false, true // absent, or not a string
	}
	dec := decoder{b: raw} // the bytes themselves unless escaped or not UTF-8
	return dec.str() == f.want, true
}
