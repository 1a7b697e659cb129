package config

import (
	"encoding"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/fencepost-dev/fencepost/internal/limits"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// decoder fills Go values from YAML nodes field by field, so that one
// bad value does not hide the next: every unknown key, duplicate key and
// wrong type becomes a problem at its own position. It records where
// each key is, for errors found later (pipeline.Config.Validate).
type decoder struct {
	probs   *problems
	keys    map[string]Position
	anchors map[string]ast.Node
	// secrets are the values hidden in every message: those of secret
	// fields, of the variables used in them, and of variables named
	// like secrets.
	secrets []string
	// consumed are consumer.topics, for the checks of the stages.
	consumed []string
	// values are the variables' values each scalar was given.
	values map[ast.Node][]string
	// aliased counts the values aliases expanded to, up to
	// limits.MaxAliasValues.
	aliased int
	// empty holds the keys written without a value ("key:", or an empty
	// ${VAR}): they mean the default, unlike a written 0.
	empty map[string]bool
	// warnings are remarks about a valid file (Config.Warnings).
	warnings []Warning
}

// warn records a warning at key.
func (d *decoder) warn(key, msg, hint string) {
	d.warnings = append(d.warnings, Warning{File: d.probs.file, Position: d.keyPos(key), Key: key, Msg: msg, Hint: hint})
}

// nodeDecoder is implemented by types that decode their node themselves.
type nodeDecoder interface {
	decodeNode(d *decoder, path string, n ast.Node)
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	unmarshalerT  = reflect.TypeFor[encoding.TextUnmarshaler]()
	nodeDecoderT  = reflect.TypeFor[nodeDecoder]()
	byteSizeType  = reflect.TypeFor[pipeline.ByteSize]()
	secretType    = reflect.TypeFor[pipeline.Secret]()
	stringMapType = reflect.TypeFor[map[string]string]()
	resetType     = reflect.TypeFor[offsetstore.ResetPolicy]()
)

// pos returns the source position of a node. A mapping is where its first
// key is.
func (d *decoder) pos(n ast.Node) Position {
	if m, flow := n.(*ast.MappingNode); flow && m.IsFlowStyle {
		n = m
	} else if vs, ok := mappingValues(n); ok && len(vs) > 0 {
		n = vs[0].Key
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return Position{1, 1}
	}
	return Position{tk.Position.Line, tk.Position.Column}
}

func (d *decoder) add(n ast.Node, path, msg, hint string) {
	d.probs.add(d.pos(n), path, msg, hint)
}

// resolve unwraps tags and anchors and follows aliases, as long as the
// values aliases expand to stay within limits.MaxAliasValues.
func (d *decoder) resolve(path string, n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.TagNode:
			n = v.Value
		case *ast.AnchorNode:
			n = v.Value
		case *ast.AliasNode:
			target, ok := d.anchors[v.Value.GetToken().Value]
			if !ok {
				d.add(v, path, fmt.Sprintf("alias *%s names no anchor defined before it", v.Value.GetToken().Value), "define &name before using *name")
				return nil
			}
			if d.aliased > limits.MaxAliasValues {
				return nil // reported once, where the limit was passed
			}
			if d.aliased += size(target); d.aliased > limits.MaxAliasValues {
				d.add(v, path, fmt.Sprintf("aliases expand to more than %d values", limits.MaxAliasValues), "repeat less through aliases")
				return nil
			}
			n = target
		default:
			return n
		}
	}
}

// collectAnchors records every anchor of the document, in order.
func (d *decoder) collectAnchors(n ast.Node) {
	ast.Walk(visitFunc(func(n ast.Node) {
		if a, ok := n.(*ast.AnchorNode); ok {
			d.anchors[a.Name.GetToken().Value] = a.Value
		}
	}), n)
}

// size is the number of nodes of the tree at n (aliases count one).
func size(n ast.Node) int {
	count := 0
	ast.Walk(visitFunc(func(ast.Node) { count++ }), n)
	return count
}

type visitFunc func(ast.Node)

func (f visitFunc) Visit(n ast.Node) ast.Visitor { f(n); return f }

func isNull(n ast.Node) bool { return n == nil || n.Type() == ast.NullType }

func mappingValues(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch v := n.(type) {
	case *ast.MappingNode:
		return v.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{v}, true
	}
	return nil, false
}

// scalarText returns a scalar's text as written (unquoted).
func scalarText(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		return v.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return n.GetToken().Value, true
	}
	return "", false
}

// kindOf names what a node is, for "found ..." messages. It never shows
// the value, which might be a secret.
func kindOf(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "true/false"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	}
	return "a " + strings.ToLower(n.Type().String())
}

// expects describes what a Go type expects, and hints how to write it.
func expects(t reflect.Type) (what, hint string) {
	switch {
	case t == durationType:
		return "a duration", "write a number with a unit: 500ms, 10s, 1m"
	case t == byteSizeType:
		return "a size", "write a number of bytes with an optional unit: 512, 64KiB, 1MiB"
	case t == stringMapType:
		return "a mapping of names to strings", "write name: value lines"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return expects(t.Elem())
	case reflect.Struct:
		return "a mapping", "write key: value lines, indented under this key"
	case reflect.Slice:
		return "a list", "write [a, b] or one \"- item\" line per item"
	case reflect.Bool:
		return "true or false", "write true or false, without quotes"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "a whole number", "write digits without quotes, such as 4"
	case reflect.Float64:
		return "a number", "write a number without quotes, such as 2.5"
	}
	return "a string", "quote the value if it looks like another type"
}

func (d *decoder) wrongType(n ast.Node, path string, t reflect.Type) {
	w, hint := expects(t)
	if _, isMap := mappingValues(n); isMap && t.Kind() == reflect.String {
		hint = "quote the value ('host:9092'): inside [ ] and { }, YAML may read a:b as a mapping"
	}
	d.add(n, path, fmt.Sprintf("want %s, found %s", w, kindOf(n)), hint)
}

// decode fills v from n, adding a problem for everything wrong in n.
func (d *decoder) decode(path string, n ast.Node, v reflect.Value) {
	n = d.resolve(path, n)
	if isNull(n) {
		d.empty[path] = true
		// A section written with no value ("tls:") is there, with its
		// defaults; any other empty value is left as it was.
		if v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.Struct && v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return
	}
	if v.CanAddr() && v.Addr().Type().Implements(nodeDecoderT) {
		v.Addr().Interface().(nodeDecoder).decodeNode(d, path, n)
		return
	}
	t := v.Type()
	if t == durationType {
		d.duration(path, n, v)
		return
	}
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshalerT) {
		s, ok := scalarText(n)
		if !ok {
			d.wrongType(n, path, t)
			return
		}
		if t == secretType {
			d.secrets = append(append(d.secrets, s), d.values[n]...)
		}
		if t == resetType && !d.resetPolicy(path, n, s) {
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			msg := err.Error()
			if t == secretType {
				msg = "not a valid secret"
			}
			_, hint := expects(t)
			d.add(n, path, msg, hint)
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		e := reflect.New(t.Elem())
		d.decode(path, n, e.Elem())
		v.Set(e)
	case reflect.Struct:
		d.decodeStruct(path, n, v)
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			d.wrongType(n, path, t)
			return
		}
		if !d.within(n, path, len(seq.Values)) {
			return
		}
		s := reflect.MakeSlice(t, len(seq.Values), len(seq.Values))
		for i, e := range seq.Values {
			p := fmt.Sprintf("%s[%d]", path, i)
			d.keys[p] = d.pos(e)
			d.decode(p, e, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		d.decodeMap(path, n, v)
	case reflect.String:
		s, ok := scalarText(n)
		if !ok {
			d.wrongType(n, path, t)
			return
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.wrongType(n, path, t)
			return
		}
		v.SetBool(b.Value)
	case reflect.Int, reflect.Int32, reflect.Int64:
		d.integer(path, n, v)
	case reflect.Float64:
		s, ok := scalarText(n)
		f, err := strconv.ParseFloat(s, 64)
		if _, isStr := n.(*ast.StringNode); !ok || isStr || err != nil {
			d.wrongType(n, path, t)
			return
		}
		v.SetFloat(f)
	default:
		panic(fmt.Sprintf("config: cannot decode into %v", t))
	}
}

func (d *decoder) integer(path string, n ast.Node, v reflect.Value) {
	in, ok := n.(*ast.IntegerNode)
	if !ok {
		d.wrongType(n, path, v.Type())
		return
	}
	i, err := strconv.ParseInt(fmt.Sprint(in.Value), 10, 64)
	if err != nil || v.OverflowInt(i) {
		d.add(n, path, "number out of range", "use a smaller number")
		return
	}
	v.SetInt(i)
}

func (d *decoder) duration(path string, n ast.Node, v reflect.Value) {
	if in, ok := n.(*ast.IntegerNode); ok && fmt.Sprint(in.Value) == "0" {
		v.SetInt(0)
		return
	}
	s, ok := n.(*ast.StringNode)
	if !ok {
		w, hint := expects(durationType)
		d.add(n, path, fmt.Sprintf("want %s, found %s", w, kindOf(n)), hint)
		return
	}
	dur, err := time.ParseDuration(s.Value)
	if err != nil {
		_, hint := expects(durationType)
		d.probs.addValue(d.pos(n), path, s.Value, fmt.Sprintf("%q is not a duration", s.Value), hint)
		return
	}
	v.SetInt(int64(dur))
}

// fields maps a struct's YAML keys to field indexes, through inline
// embedded structs.
func fields(t reflect.Type) (map[string][]int, []string) {
	m := map[string][]int{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if opts == "inline" {
			sub, subNames := fields(f.Type)
			for k, idx := range sub {
				m[k] = append([]int{i}, idx...)
			}
			names = append(names, subNames...)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = []int{i}
		names = append(names, name)
	}
	return m, names
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// forEachKey calls fn for every key of a mapping node, reporting
// non-scalar keys, merge keys and duplicates.
func (d *decoder) forEachKey(path string, n ast.Node, fn func(key string, kn, vn ast.Node)) bool {
	vs, ok := mappingValues(n)
	if !ok {
		return false
	}
	if !d.within(n, path, len(vs)) {
		return true
	}
	seen := map[string]Position{}
	for _, mv := range vs {
		if _, merge := mv.Key.(*ast.MergeKeyNode); merge {
			d.add(mv.Key, path, "merge keys (<<) are not supported", "repeat the keys instead")
			continue
		}
		key, ok := scalarText(mv.Key)
		if !ok {
			d.add(mv.Key, path, "a key must be a plain name", "write name: value; lists and mappings cannot be keys")
			continue
		}
		kp := d.pos(mv.Key)
		if first, dup := seen[key]; dup {
			d.probs.add(kp, join(path, key), fmt.Sprintf("duplicate key (first at line %d)", first.Line), "remove one of them")
			continue
		}
		seen[key] = kp
		fn(key, mv.Key, mv.Value)
	}
	return true
}

func (d *decoder) decodeStruct(path string, n ast.Node, v reflect.Value) {
	idx, names := fields(v.Type())
	ok := d.forEachKey(path, n, func(key string, kn, vn ast.Node) {
		fi, known := idx[key]
		if !known {
			where := "here"
			if path != "" {
				where = "under " + path
			}
			d.add(kn, join(path, key), "unknown key", fmt.Sprintf("%svalid keys %s: %s", didYouMean(key, names), where, strings.Join(names, ", ")))
			return
		}
		p := join(path, key)
		d.keys[p] = d.pos(kn)
		d.decode(p, vn, v.FieldByIndex(fi))
	})
	if !ok {
		d.wrongType(n, path, v.Type())
	}
}

func (d *decoder) decodeMap(path string, n ast.Node, v reflect.Value) {
	t := v.Type()
	if t.Key().Kind() != reflect.String {
		panic(fmt.Sprintf("config: cannot decode into %v", t))
	}
	m := reflect.MakeMap(t)
	ok := d.forEachKey(path, n, func(key string, kn, vn ast.Node) {
		p := join(path, key)
		d.keys[p] = d.pos(kn)
		e := reflect.New(t.Elem()).Elem()
		d.decode(p, vn, e)
		m.SetMapIndex(reflect.ValueOf(key).Convert(t.Key()), e)
	})
	if !ok {
		d.wrongType(n, path, t)
		return
	}
	v.Set(m)
}

// within reports a list or mapping of more than limits.MaxListLen
// entries, and says whether n is within the limit.
func (d *decoder) within(n ast.Node, path string, entries int) bool {
	if entries <= limits.MaxListLen {
		return true
	}
	d.add(n, path, fmt.Sprintf("%d entries; at most %d", entries, limits.MaxListLen), "split the configuration, or use fewer entries")
	return false
}

// resetPolicy accepts earliest, latest and none (in any case) as
// auto_offset_reset. The other names offsetstore accepts (librdkafka's
// smallest, largest, ...) are refused here, with the name to write: a
// file says what it means in one way.
func (d *decoder) resetPolicy(path string, n ast.Node, s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "earliest", "latest", "none":
		return true
	}
	var p offsetstore.ResetPolicy
	hint := "use earliest, latest or none"
	switch {
	case strings.TrimSpace(s) == "":
		hint = "leave the key out for earliest, or write earliest, latest or none"
	case p.UnmarshalText([]byte(s)) == nil:
		hint = fmt.Sprintf("write %s (%q is another client's name for it)", p, s)
	}
	d.probs.addValue(d.pos(n), path, s, fmt.Sprintf("%q is not one of earliest, latest, none", s), hint)
	return false
}
