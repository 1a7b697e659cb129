package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"

	"github.com/fencepost-dev/fencepost/internal/fastjson"
	"github.com/fencepost-dev/fencepost/internal/memo"
	"github.com/fencepost-dev/fencepost/internal/unsafeconv"
	"github.com/fencepost-dev/fencepost/stages"
)

// Variable names of the language (see the package documentation).
const (
	varKey       = "key"
	varValue     = "value"
	varHeaders   = "headers"
	varTopic     = "topic"
	varPartition = "partition"
	varOffset    = "offset"
	varTimestamp = "timestamp"
	varJSON      = "json"
)

// envTypes gives the checker the type of every variable, as the package
// documentation states them: a key, a value and header values are
// strings, so that an expression misusing them (key + 1, a filter
// condition that is the value) fails the configuration.
var envTypes = types.Map{
	varKey: types.String, varValue: types.String, varHeaders: types.TypeOf(map[string]string(nil)),
	varTopic: types.String, varPartition: types.Int, varOffset: types.Int,
	varTimestamp: types.TypeOf(time.Time{}), varJSON: types.Any,
}

// runTypes are the types programs are compiled with for running, once
// envTypes accepted them: a key, a value and header values are a string
// or nil (null), so null stays apart from empty. (Compiled with string
// types, expr emits string-only instructions: value == "x" would fail on
// a null value instead of being false.) The run-time environment is a
// map of this shape: expr reads a map[string]any without reflection.
var runTypes = types.Map{
	varKey: types.Any, varValue: types.Any, varHeaders: types.TypeOf(map[string]any(nil)),
	varTopic: types.String, varPartition: types.Int, varOffset: types.Int,
	varTimestamp: types.TypeOf(time.Time{}), varJSON: types.Any,
}

// uses says which variables an expression reads, so a record is only
// converted or parsed as far as needed.
type uses uint8

const (
	useKey uses = 1 << iota
	useValue
	useHeaders
	useJSON
	useTopic
	usePartition
	useOffset
	useTimestamp
	useAll uses = 1<<iota - 1
)

var useOf = map[string]uses{
	varKey: useKey, varValue: useValue, varHeaders: useHeaders, varJSON: useJSON,
	varTopic: useTopic, varPartition: usePartition, varOffset: useOffset, varTimestamp: useTimestamp,
	"$env": useAll,
}

// usage is an expr patcher that only looks: it records the variables the
// expression names.
type usage struct{ u uses }

func (v *usage) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok {
		v.u |= useOf[id.Value]
	}
}

// program is one compiled expression of a stage option.
type program struct {
	label string // what error messages name: `if`, `value`, `headers["x"]`
	prog  *vm.Program
	uses  uses
	// fields are the top-level fields of json the expression reads, if
	// it reads json only that way; nil if it needs the whole value (see
	// jsonFields). Meaningless without useJSON.
	fields []string
	// byField is the expression compiled with each json.<field> of
	// fields replaced by the variable fieldVar(field); nil if fields is.
	byField *vm.Program
	// slotted is byField with those variables read from the slots of
	// layout, the layout of the stage's reads (see bindSlots); nil if
	// byField is, or could not be bound.
	slotted *vm.Program
	layout  *slotLayout
	// only is, if slotted is nothing but the load of one variable (as
	// json.user is), that variable: run reads it without the VM; else -1.
	only int
	// encoded is the argument of a program that is one call toJSON(x),
	// compiled on its own: transform encodes its result straight into
	// the record's bytes (see transform.eval); nil for other programs.
	encoded *program
	// object is set on an encoded program that is an object literal
	// with constant keys ({"a": x, "b": y}): its members are written
	// one by one, without the map the literal builds.
	object *objectEncoding
	// equals is set on a condition that is json.<field> == "constant"
	// (either side): it is answered from the member's bytes (see
	// fieldEquals).
	equals *fieldEquals
}

// fieldVar is the variable that stands for json.<field> in a program's
// byField form. The NUL byte keeps it apart from any name an expression
// can write.
func fieldVar(field string) string { return fieldVarPrefix + field }

const fieldVarPrefix = "\x00json."

// fieldPatch replaces each constant member access on json (json.type,
// json?.user, json["a b"]) by the identifier fieldVar(name).
type fieldPatch struct{}

func (fieldPatch) Visit(n *ast.Node) {
	if m, ok := (*n).(*ast.MemberNode); ok {
		if field, ok := jsonField(m); ok {
			ast.Patch(n, &ast.IdentifierNode{Value: fieldVar(field)})
		}
	}
}

// An expression that reads json only through top-level fields with
// constant names (json.type, json?.user, json["amount"], json.items[0])
// is compiled a second time with each such access replaced by a
// variable of its own (fieldPatch). For a record whose value is a JSON
// object that second form runs, with just those fields decoded from the
// bytes into its variables (fastjson's Doc.ProjectInto, into the VM
// slots bindSlots lays out): no map is built. Any other value (not an
// object, not JSON), and any other use of json (json itself, "x" in
// json, a computed field name), runs the program as written over the
// full value, parsed once per chain call (Doc.Value, docFor).

// jsonFields returns the top-level fields the expression reads from
// json, or nil if it uses json otherwise too (then it needs the full
// value); ok is false if it does not read json at all.
func jsonFields(root ast.Node) (fields []string, ok bool) {
	f := &fieldUse{}
	ast.Walk(&root, f)
	if f.idents == 0 {
		return nil, false
	}
	if f.idents != len(f.fields) {
		return nil, true
	}
	return mergeFields([][]string{f.fields}), true
}

// fieldUse counts the json identifiers of a tree and collects the
// constant fields read directly from them.
type fieldUse struct {
	idents int      // json identifiers
	fields []string // one per json identifier that is the object of a constant member access
}

func (f *fieldUse) Visit(n *ast.Node) {
	switch x := (*n).(type) {
	case *ast.IdentifierNode:
		if x.Value == varJSON {
			f.idents++
		}
	case *ast.MemberNode:
		if field, ok := jsonField(x); ok {
			f.fields = append(f.fields, field)
		}
	}
}

// jsonField returns the field m reads if m is a constant member access on
// the json identifier (json.type, json?.user, json["a b"]): the accesses
// fieldUse collects are exactly those fieldPatch rewrites.
func jsonField(m *ast.MemberNode) (string, bool) {
	id, isIdent := m.Node.(*ast.IdentifierNode)
	prop, isConst := m.Property.(*ast.StringNode)
	if m.Method || !isIdent || !isConst || id.Value != varJSON {
		return "", false
	}
	return prop.Value, true
}

// mergeFields combines what several expressions read from json: nil
// (the full value) if any needs it, else the union of their fields.
func mergeFields(all [][]string) []string {
	var out []string
	for _, fs := range all {
		if fs == nil {
			return nil
		}
		for _, f := range fs {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// compileByField compiles src in its byField form: fields (what the
// expression reads of json) become variables of any type.
func compileByField(src string, fields []string, extra ...expr.Option) (*vm.Program, error) {
	env := make(types.Map, len(runTypes)+len(fields))
	for k, v := range runTypes {
		env[k] = v
	}
	for _, f := range fields {
		env[fieldVar(f)] = types.Any
	}
	return expr.Compile(src, append(extra[:len(extra):len(extra)], expr.Env(env), toJSONFunc, fromJSONFunc, expr.Patch(fieldPatch{}), expr.Patch(budgetPatch{}))...)
}

// toJSONFunc is the toJSON(x) helper of the language: compact JSON.
var toJSONFunc = expr.Function("toJSON", toJSON, toJSONTypes)

// toJSONTypes and fromJSONTypes are the signatures of toJSON and fromJSON.
var (
	toJSONTypes   = new(func(any) string)
	fromJSONTypes = new(func(string) any)
)

func toJSON(params ...any) (any, error) {
	p := scratchBuffers.Get().(*[]byte)
	b, err := appendJSON((*p)[:0], params[0])
	s := string(b)
	putScratch(p, b)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// marshalJSON is v's JSON (appendJSON) in a fresh slice of its exact size;
// the scratch buffer it is written in first is reused.
func marshalJSON(v any) ([]byte, error) {
	p := scratchBuffers.Get().(*[]byte)
	b, err := appendJSON((*p)[:0], v)
	out := bytes.Clone(b)
	putScratch(p, b)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// putScratch returns a buffer taken from scratchBuffers, keeping b (what
// it grew into) unless b is too large to pin.
func putScratch(p *[]byte, b []byte) {
	if cap(b) <= maxPooledScratch {
		*p = b
	}
	scratchBuffers.Put(p)
}

// maxPooledScratch is the largest buffer putScratch keeps: one huge value
// does not stay pinned in the pool.
const maxPooledScratch = 64 << 10

// scratchBuffers holds *[]byte buffers to encode JSON in.
var scratchBuffers = sync.Pool{New: func() any { return new([]byte) }}

// toBytes converts an expression's result to record bytes: a string to
// its bytes, []byte as is, nil to nil (a null key, value or header), any
// other value to its JSON encoding.
func toBytes(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(x), nil
	case []byte:
		return x, nil
	}
	b, err := marshalJSON(v)
	if err != nil {
		return nil, fmt.Errorf("result of type %T has no JSON encoding: %w", v, err)
	}
	return b, nil
}

// fromJSONFunc replaces expr's fromJSON(s) (encoding/json, float64
// numbers) with the json variable's reader, so every JSON an expression
// reads has the same numbers and the same depth limit: a string that is
// not JSON, too deep, or with a number no int or float64 holds fails the
// record.
var fromJSONFunc = expr.Function("fromJSON", fromJSON, fromJSONTypes)

func fromJSON(params ...any) (any, error) {
	s, ok := params[0].(string)
	if !ok {
		return nil, fmt.Errorf("fromJSON needs a string, not %s", typeName(params[0]))
	}
	x, valid, err := fastjson.Parse(fastjson.Text(unsafeconv.Bytes(s))) // read only; decoded strings may share it, as strings
	switch {
	case !valid:
		return nil, errors.New("fromJSON: the string is not valid JSON")
	case err != nil:
		return nil, fmt.Errorf("fromJSON: %w", err)
	}
	return x, nil
}

// compile compiles src once, at build time. A syntax or type error is an
// *stages.OptionError naming option, carrying expr's message. wantBool
// rejects expressions whose type is known and not bool. (expr.AsBool is
// not used: it turns a nil result into false at run time, and a
// condition that is not a bool must fail its record.) extra options
// (patches) apply to the programs that run, not to the type check, before
// the patches compile's own (so those see their result).
func compile(option, label, src string, wantBool bool, extra ...expr.Option) (*program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &stages.OptionError{Option: option, Err: fmt.Errorf("%s: empty expression", label)}
	}
	checked, err := expr.Compile(src, expr.Env(envTypes), toJSONFunc, fromJSONFunc)
	if err == nil && wantBool {
		if t := checked.Node().Type(); t != nil && t.Kind() != reflect.Bool && t.Kind() != reflect.Interface {
			err = fmt.Errorf("the expression's type is %s; a condition must be a bool (write a comparison such as value == \"x\")", t)
		}
	}
	u := &usage{}
	var p *vm.Program
	if err == nil {
		p, err = expr.Compile(src, append(extra[:len(extra):len(extra)], expr.Env(runTypes), toJSONFunc, fromJSONFunc, expr.Patch(u), expr.Patch(budgetPatch{}))...)
	}
	if err != nil {
		if strings.Contains(err.Error(), "unknown name") {
			err = fmt.Errorf("%w\n(the variables are key, value, headers, topic, partition, offset, timestamp, json)", err)
		}
		if label != option {
			err = fmt.Errorf("%s: %w", label, err)
		}
		return nil, &stages.OptionError{Option: option, Err: err}
	}
	prog := &program{label: label, prog: p, uses: u.u}
	if wantBool {
		prog.equals = fieldEqualsOf(prog)
	}
	if fields, ok := jsonFields(p.Node()); ok && u.u&useAll != useAll { // $env: the whole value
		prog.fields = fields
		if fields != nil {
			// It compiled as written, so it compiles with json's fields
			// as variables of json's own type; if not, the program as
			// written serves every record.
			if bp, err := compileByField(src, fields, extra...); err == nil {
				prog.byField = bp
			}
		}
	}
	return prog, nil
}

// fieldEquals is a condition that compares one top-level field of json
// with a string constant (json.type == "purchase", or the constant
// first). It is answered from the member's raw bytes: no value decoded,
// boxed or run through the VM. Its answers are the expression's: true
// when the last member of that name (as encoding/json keeps the last of
// duplicates) is a string equal to the constant; false when it is
// another type or absent (nil == "x" is false).
type fieldEquals struct {
	field string
	set   *fastjson.FieldSet // of field alone
	want  string
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
			return &fieldEquals{field: field, set: fastjson.NewFieldSet([]string{field}), want: s.Value}
		}
	}
	return nil
}

// test answers the condition for v, whose doc is d, and reports true; or
// reports false when the doc is not an object it can answer from the
// bytes (not JSON, not an object, refused, or already decoded whole):
// the expression then runs as written, with its errors.
func (f *fieldEquals) test(d *fastjson.Doc, v []byte) (keep, ok bool) {
	return d.FieldEquals(v, f.set, f.want)
}

// toJSONArg returns the source of x if src is exactly one call toJSON(x),
// as compiled into p (whose tree is checked: "toJSON(a) + toJSON(b)"
// does not qualify); else "".
func toJSONArg(src string, p *vm.Program) string {
	if !isToJSONCall(p.Node()) {
		return ""
	}
	s := strings.TrimSpace(src)
	if !strings.HasPrefix(s, "toJSON(") || !strings.HasSuffix(s, ")") {
		return ""
	}
	// The call spans all of s, so its one argument is what is between
	// the parentheses (a valid expression balances its own).
	return s[len("toJSON(") : len(s)-1]
}

// withEncoded sets p.encoded if p is one call toJSON(x) whose argument
// compiles to a program that reads the same of a record and runs the
// same way (byField or not).
func withEncoded(p *program, option, src string) {
	arg := toJSONArg(src, p.prog)
	if arg == "" {
		return
	}
	x, err := compile(option, p.label, arg, false)
	if err != nil || !sameReads(x, p) {
		return
	}
	p.encoded = x
	x.object = objectOf(option, x, strings.TrimSpace(arg))
}

// sameReads reports whether x reads what p reads of a record and runs
// the same way (its byField form or not), so the evaluator loaded for p
// runs x.
func sameReads(x, p *program) bool {
	return x.uses == p.uses && (x.byField == nil) == (p.byField == nil) && slices.Equal(x.fields, p.fields)
}

// objectEncoding writes an object literal with constant keys as JSON, as
// appendJSON writes the map it builds: members sorted by name and, of
// duplicate names, the first (expr builds a literal's map from its last
// pair to its first). Each value is a program of its own, so no map (nor
// array) is built per record.
type objectEncoding struct {
	values []*program // per pair of the literal, its value
	order  []int      // per member written, the index of its value
	names  [][]byte   // per member written, its name as JSON and ':'
}

// objectOf returns the encoding of x, compiled from src, if src is an
// object literal whose keys are all constants; else nil.
func objectOf(option string, x *program, src string) *objectEncoding {
	m, ok := x.prog.Node().(*ast.MapNode)
	if !ok || !strings.HasPrefix(src, "{") || len(m.Pairs) == 0 {
		return nil
	}
	keys := make([]string, len(m.Pairs))
	for i, pn := range m.Pairs {
		k, ok := pn.(*ast.PairNode).Key.(*ast.StringNode)
		if !ok {
			return nil
		}
		keys[i] = k.Value
	}
	o := &objectEncoding{}
	for i := range keys {
		v, err := compile(option, x.label, src, false, expr.Patch(rootObjectValue{i}))
		if err != nil || !runsWith(v, x) {
			return nil
		}
		o.values = append(o.values, v)
		if !slices.Contains(keys[:i], keys[i]) {
			o.order = append(o.order, i)
		}
	}
	slices.SortFunc(o.order, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	for _, i := range o.order {
		name, err := appendJSON(nil, keys[i])
		if err != nil {
			return nil
		}
		o.names = append(o.names, append(name, ':'))
	}
	return o
}

// runsWith reports whether v, a part of x, runs over a record loaded for
// x: it reads nothing x does not, and if it reads json and x runs in its
// byField form, so does v.
func runsWith(v, x *program) bool {
	if v.uses&^x.uses != 0 {
		return false
	}
	return v.uses&useJSON == 0 || x.byField == nil || v.byField != nil
}

// rootObjectValue turns the object literal at the start of the source
// (the whole expression, as objectOf checks) into the value of its pair
// number i.
type rootObjectValue struct{ i int }

func (r rootObjectValue) Visit(n *ast.Node) {
	if m, ok := (*n).(*ast.MapNode); ok && m.Location().From == 0 && r.i < len(m.Pairs) {
		ast.Patch(n, m.Pairs[r.i].(*ast.PairNode).Value)
	}
}

// encode returns the object's JSON over the record e has loaded, in a
// slice of its exact size. Every value is evaluated, as the literal
// evaluates them, so an error of any of them is reported.
func (o *objectEncoding) encode(e *evaluator) ([]byte, error) {
	p := scratchBuffers.Get().(*[]byte)
	b := append((*p)[:0], '{')
	var err error
	var vals [16]any
	values := vals[:0]
	for _, v := range o.values {
		x, rerr := e.run(v)
		if rerr != nil {
			err = rerr
			break
		}
		values = append(values, x)
	}
	for j, i := range o.order {
		if err != nil {
			break
		}
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, o.names[j]...)
		b, err = appendJSON(b, values[i])
	}
	b = append(b, '}')
	out := bytes.Clone(b)
	putScratch(p, b)
	return out, err
}

// transform computes new key, value and headers of a record from the
// expressions of a map or produce stage. A nil key or value program
// keeps the input's.
type transform struct {
	key, value *program
	headers    []headerProgram // sorted by name
	reads      *reads          // of all of them
}

type headerProgram struct {
	name string
	prog *program
}

// compileTransform compiles the key, value and headers options (each
// optional) of a stage.
func compileTransform(opts stages.Options) (*transform, error) {
	t := &transform{}
	for _, part := range []struct {
		name string
		prog **program
	}{{"key", &t.key}, {"value", &t.value}} {
		if !opts.Has(part.name) {
			continue
		}
		src, err := opts.String(part.name)
		if err != nil {
			return nil, err
		}
		if *part.prog, err = compile(part.name, part.name, src, false); err != nil {
			return nil, err
		}
		withEncoded(*part.prog, part.name, src)
	}
	var hs map[string]string
	if opts.Has("headers") {
		var err error
		if hs, err = opts.StringMap("headers"); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(hs))
	for name := range hs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p, err := compile("headers", fmt.Sprintf("headers[%q]", name), hs[name], false)
		if err != nil {
			return nil, err
		}
		withEncoded(p, "headers", hs[name])
		t.headers = append(t.headers, headerProgram{name: name, prog: p})
	}
	var ps []*program
	for _, p := range []*program{t.key, t.value} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	for _, h := range t.headers {
		ps = append(ps, h.prog)
	}
	t.reads = readsOf(ps...)
	return t, nil
}

// apply returns r with the transform's parts replaced; unchanged parts
// share r's slices. e must have r loaded. r itself is not modified.
func (t *transform) apply(e *evaluator, r stages.Record) (stages.Record, error) {
	var err error
	if t.key != nil {
		if r.Key, err = t.eval(e, t.key); err != nil {
			return r, err
		}
	}
	if t.value != nil {
		if r.Value, err = t.eval(e, t.value); err != nil {
			return r, err
		}
	}
	if len(t.headers) == 0 {
		return r, nil
	}
	hs := make([]stages.Header, 0, len(r.Headers)+len(t.headers))
	for _, h := range r.Headers {
		if !t.setsHeader(h.Key) {
			hs = append(hs, h)
		}
	}
	for _, hp := range t.headers {
		v, err := t.eval(e, hp.prog)
		if err != nil {
			return r, err
		}
		hs = append(hs, stages.Header{Key: hp.name, Value: v})
	}
	r.Headers = hs
	return r, nil
}

// eval returns the bytes of p's result over the loaded record. A program
// toJSON(x) has x encoded straight into the bytes (one allocation, of
// their exact size) rather than into a string that is then copied; should
// x fail, or have no encoding, p itself runs, for its error. An object
// literal x with constant keys is written member by member (see
// objectEncoding).
func (t *transform) eval(e *evaluator, p *program) ([]byte, error) {
	if x := p.encoded; x != nil {
		if o := x.object; o != nil {
			if b, err := o.encode(e); err == nil {
				return b, nil
			}
		} else if v, err := e.run(x); err == nil {
			if b, err := marshalJSON(v); err == nil {
				return b, nil
			}
		}
	}
	v, err := e.run(p)
	if err != nil {
		return nil, err
	}
	b, err := toBytes(v)
	if err != nil {
		return nil, &EvalError{Expr: p.label, Err: err}
	}
	return b, nil
}

func (t *transform) setsHeader(name string) bool {
	for _, hp := range t.headers {
		if hp.name == name {
			return true
		}
	}
	return false
}

// reads is what a stage's programs read of a record, worked out once
// when the stage is built: the variables, and of json the top-level
// fields (nil: the whole value) with the slots their values go to for
// the slotted forms.
type reads struct {
	uses   uses
	fields []string // of json: nil for the whole value
	// project: every program that reads json has a byField form, so a
	// record whose value is a JSON object can run them all.
	project bool
	layout  *slotLayout // where fields go, if project
}

// readsOf merges what programs read and, if they can run on a record's
// projected fields, binds their byField forms (and those of the
// programs they hold: encoded, object values) to one slot layout.
// Programs belong to one stage: binding them again for other fields
// leaves the earlier reads' evaluators running them as written.
func readsOf(programs ...*program) *reads {
	rd := &reads{project: true}
	var fields [][]string
	for _, p := range programs {
		rd.uses |= p.uses
		if p.uses&useJSON != 0 {
			fields = append(fields, p.fields)
			rd.project = rd.project && p.byField != nil
		}
	}
	rd.fields = mergeFields(fields)
	rd.project = rd.project && rd.fields != nil
	if rd.project {
		rd.layout = bindSlots(rd.fields, programs)
		rd.fields = rd.layout.fields
	}
	return rd
}

// slotLayout is where an evaluator's slot VM holds the json fields it
// projects: field i in its variable base+i, after every variable (let)
// of the programs bound to the layout.
type slotLayout struct {
	fields []string
	set    *fastjson.FieldSet // of fields
	base   int
}

// bindSlots returns the layout of fields for programs, and sets the
// slotted form of every program among them and in them that has a
// byField form. Programs already bound to a layout of the same fields
// keep it (a stage's reads worked out twice agree).
func bindSlots(fields []string, programs []*program) *slotLayout {
	var all []*program
	for _, p := range programs {
		all = p.withParts(all)
	}
	var l *slotLayout
	for _, p := range all {
		if p.byField == nil {
			continue
		}
		if p.layout == nil || (l != nil && p.layout != l) || !slices.Equal(p.layout.fields, fields) {
			l = nil
			break
		}
		l = p.layout
	}
	if l != nil {
		return l
	}
	l = &slotLayout{fields: fields, set: fastjson.NewFieldSet(fields)}
	for _, p := range all {
		if p.byField != nil {
			l.base = max(l.base, ownVariables(p.byField))
		}
	}
	for _, p := range all {
		if p.byField != nil {
			p.slotted, p.layout, p.only = slotted(p.byField, l), l, -1
			if p.slotted == nil {
				p.layout = nil
			} else if len(p.slotted.Bytecode) == 1 && p.slotted.Bytecode[0] == vm.OpLoadVar {
				p.only = p.slotted.Arguments[0]
			}
		}
	}
	return l
}

// withParts appends p and the programs it holds to ps.
func (p *program) withParts(ps []*program) []*program {
	ps = append(ps, p)
	if p.encoded != nil {
		ps = p.encoded.withParts(ps)
	}
	if p.object != nil {
		for _, v := range p.object.values {
			ps = v.withParts(ps)
		}
	}
	return ps
}

// ownVariables is how many variables (let) bp declares: the VM's
// variables it uses are 0 to ownVariables-1.
func ownVariables(bp *vm.Program) int {
	n := 0
	for i, op := range bp.Bytecode {
		if op == vm.OpStore || op == vm.OpLoadVar {
			n = max(n, bp.Arguments[i]+1)
		}
	}
	return n
}

// slotted returns a copy of bp, a byField form, in which each load of a
// field's variable (from the environment map, by name) is a load of the
// VM's variable l.base+i, i the field's index in l.fields: the
// evaluator's slot VM holds the fields there. Nil if bp reads a field l
// has not.
func slotted(bp *vm.Program, l *slotLayout) *vm.Program {
	q := *bp
	q.Bytecode, q.Arguments = slices.Clone(bp.Bytecode), slices.Clone(bp.Arguments)
	for i, op := range q.Bytecode {
		if op != vm.OpLoadFast {
			continue
		}
		name, _ := q.Constants[q.Arguments[i]].(string)
		field, ok := strings.CutPrefix(name, fieldVarPrefix)
		if !ok {
			continue
		}
		j := slices.Index(l.fields, field)
		if j < 0 {
			return nil
		}
		q.Bytecode[i], q.Arguments[i] = vm.OpLoadVar, l.base+j
	}
	return &q
}

// evaluator runs programs over records. It is not safe for concurrent
// use: a stage makes one per Process call and reuses it for every record
// of the batch, so the VMs' stacks and the environment are allocated once
// per batch.
type evaluator struct {
	vm      vm.VM   // runs programs as written
	slots   *slotVM // if the reads project
	env     map[string]any
	headers map[string]any
	reads   *reads
	cache   *memo.Cache // the chain call's, if any
	// projected: the loaded record's json fields are in slots, and the
	// slotted forms run.
	projected bool
	docs      fastjson.Docs  // for the docs it makes
	box       fastjson.Boxer // for the fields it projects
}

// slotVM is an evaluator's VM for the slotted forms. Its variables hold,
// after the programs' own, the projected fields of the loaded record:
// fields (see slotLayout). It has room for the variables of most in the
// same allocation.
type slotVM struct {
	vm.VM
	fields []any
	doc    *fastjson.Doc // of the record whose fields are projected
	raw    []byte        // its value
	room   [8]any
}

// newEvaluator returns an evaluator for programs that read rd; ctx is
// the Process call's, whose memo (if any) the evaluator shares; n is the
// batch's length.
func newEvaluator(ctx context.Context, rd *reads, n int) *evaluator {
	e := &evaluator{env: make(map[string]any, len(runTypes)), reads: rd, cache: memo.From(ctx)}
	if rd.uses&useJSON != 0 {
		e.cache.Reserve(n) // a doc per record, if no stage before made them
	}
	if l := rd.layout; rd.project && l != nil {
		s := new(slotVM)
		if n := l.base + len(l.fields); n <= len(s.room) {
			s.Variables = s.room[:n]
		} else {
			s.Variables = make([]any, n)
		}
		s.fields, e.slots = s.Variables[l.base:], s
	}
	return e
}

// load sets the variables the programs use to r's. Key, value and header
// values alias r's bytes without copying: records are read-only and
// never reused (see stages.Record), and every result is converted to
// fresh bytes before the next load. The error is a *NumberError when the
// programs read json and the value holds a number no int or float64
// holds: the record fails.
func (e *evaluator) load(r *stages.Record) error {
	u, env := e.reads.uses, e.env
	if u&useKey != 0 {
		env[varKey] = nullable(r.Key)
	}
	if u&useValue != 0 {
		env[varValue] = nullable(r.Value)
	}
	if u&useTopic != 0 {
		env[varTopic] = r.Topic
	}
	if u&usePartition != 0 {
		env[varPartition] = int(r.Partition)
	}
	if u&useOffset != 0 {
		env[varOffset] = int(r.Offset)
	}
	if u&useTimestamp != 0 {
		env[varTimestamp] = r.Timestamp
	}
	if u&useHeaders != 0 {
		if e.headers == nil {
			e.headers = make(map[string]any, len(r.Headers))
			env[varHeaders] = e.headers
		} else {
			clear(e.headers)
		}
		for _, h := range r.Headers { // the last header of a name wins, as in Record.Header
			e.headers[h.Key] = nullable(h.Value)
		}
	}
	e.projected = false
	if u&useJSON != 0 {
		text := fastjson.Text(r.Value)
		d := docFor(e.cache, &e.docs, text)
		if s := e.slots; s != nil && d.ProjectInto(text, e.reads.layout.set, s.fields, &e.box) {
			e.projected, s.doc, s.raw = true, d, text
			return nil
		}
		v, err := d.Value(text)
		env[varJSON] = v
		return err
	}
	return nil
}

// run evaluates p over the loaded record: its slotted form if the
// record's fields are projected and p reads json.
func (e *evaluator) run(p *program) (any, error) {
	var out any
	var err error
	switch {
	case !e.projected || p.uses&useJSON == 0:
		out, err = e.vm.Run(p.prog, e.env)
	case p.slotted != nil && p.layout == e.reads.layout:
		if p.only >= 0 {
			return e.slots.Variables[p.only], nil
		}
		out, err = e.slots.Run(p.slotted, e.env)
	default:
		// Not bound to these slots (not one of the stage's programs): as
		// written, over the whole value.
		v, verr := e.slots.doc.Value(e.slots.raw)
		if verr != nil {
			return nil, verr
		}
		e.env[varJSON] = v
		out, err = e.vm.Run(p.prog, e.env)
	}
	if err != nil {
		return nil, &EvalError{Expr: p.label, Err: err}
	}
	return out, nil
}

// nullable is b as the variables hold it: nil for null (a nil slice),
// else its string, sharing b's bytes.
func nullable(b []byte) any {
	if b == nil {
		return nil
	}
	return unsafeconv.String(b)
}

// docFor returns the doc of v, the JSON text of a record value
// (fastjson.Text), from cache, the chain call's memo, or a new one from
// docs, stored in cache for the next stages (a nil cache keeps nothing:
// the check is repeated per stage).
func docFor(cache *memo.Cache, docs *fastjson.Docs, v []byte) *fastjson.Doc {
	if x, ok := cache.Get(v); ok {
		if d, ok := x.(*fastjson.Doc); ok {
			return d
		}
	}
	d := docs.New(v)
	cache.Put(v, d)
	return d
}

// EvalError is a record's failure to evaluate an expression: a runtime
// error of the expression (a missing field, a type mismatch), a result
// of the wrong type, or a result that cannot be converted.
type EvalError struct {
	// Expr names the expression: the option ("if", "value", "key") or
	// the header (`headers["name"]`).
	Expr string
	Err  error
}

// Error is one line (it ends up in a dead-letter header): expr's message
// and position, without the source snippet.
func (e *EvalError) Error() string {
	var fe *file.Error
	if errors.As(e.Err, &fe) {
		hint := ""
		switch {
		case strings.Contains(fe.Message, "from <nil>"):
			hint = "; write ?. where a field may be missing or json is nil (json?.a?.b)"
		case strings.Contains(fe.Message, "nil"):
			hint = "; a null key or value, a null or absent header and a missing JSON field are nil, not \"\": " +
				"test value == nil, or write value ?? \"\" to read null as empty"
		}
		return fmt.Sprintf("expression %s: %s (column %d)%s", e.Expr, fe.Message, fe.Column+1, hint)
	}
	return fmt.Sprintf("expression %s: %v", e.Expr, e.Err)
}

// Unwrap returns the underlying error.
func (e *EvalError) Unwrap() error { return e.Err }

// MaxJSONDepth is how deeply arrays and objects may nest in a record
// value read as JSON (by the json stage and by expressions that read
// json, fromJSON included): a value nested deeper fails its record with
// a *DepthError. 1000 is Jackson's default since 2.15 (the JVM side of
// most Kafka pipelines), so what it writes and reads passes here;
// encoding/json allows 10000.
const MaxJSONDepth = fastjson.MaxDepth

// DepthError is a valid JSON value nested deeper than MaxJSONDepth. The
// record fails with it (a record error: dead-lettered or stopping the
// partition by policy), in the json stage and in every stage whose
// expressions read json; such a value is never decoded. Depth is how
// deeply the value nests arrays and objects, Limit is MaxJSONDepth.
type DepthError = fastjson.DepthError

// NumberError is a JSON number that no int or float64 holds exactly
// (see "Expressions" in the package documentation): the record fails
// with it (a record error, never a nil json). Number is the literal as
// written (shortened if long); Whole is true for a whole number beyond
// 64 bits, false for a number beyond a float64's range.
type NumberError = fastjson.NumberError
