package builtin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"github.com/fencepost-dev/fencepost/internal/fastjson"
	"github.com/fencepost-dev/fencepost/internal/unsafeconv"
	"github.com/fencepost-dev/fencepost/stages"
)

// aggFunc is what an aggregate field computes.
type aggFunc uint8

const (
	fnCount aggFunc = iota + 1
	fnSum
	fnMin
	fnMax
	fnAvg
	fnFirst
	fnLast
)

var aggFuncs = map[string]aggFunc{"count": fnCount, "sum": fnSum, "min": fnMin, "max": fnMax, "avg": fnAvg, "first": fnFirst, "last": fnLast}

// numeric reports whether f folds numbers.
func (f aggFunc) numeric() bool { return f == fnSum || f == fnMin || f == fnMax || f == fnAvg }

// aggField is one field of an aggregate's output.
type aggField struct {
	name string
	fn   aggFunc
	prog *program // of the argument; nil for count()
	json []byte   // the name as JSON, and ':'
}

// aggCall matches one call: a name, an argument in parentheses.
var aggCall = regexp.MustCompile(`(?s)^\s*([a-z]+)\s*\((.*)\)\s*$`)

// reservedFields are the output's own members.
var reservedFields = []string{"key", "window_start", "window_end"}

// compileFields compiles the fields option: name -> one call of count(),
// sum(x), min(x), max(x), avg(x), first(x), last(x). The fields are
// sorted by name.
func compileFields(fields map[string]string) ([]aggField, error) {
	if len(fields) == 0 {
		return nil, &stages.OptionError{Option: "fields", Err: errors.New("an aggregate needs at least one field, such as orders: count()")}
	}
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]aggField, 0, len(names))
	for _, name := range names {
		label := fmt.Sprintf("fields[%q]", name)
		bad := func(format string, args ...any) error {
			return &stages.OptionError{Option: "fields", Err: fmt.Errorf("%s: %s", label, fmt.Sprintf(format, args...))}
		}
		if strings.TrimSpace(name) == "" {
			return nil, bad("a field needs a name")
		}
		for _, r := range reservedFields {
			if name == r {
				return nil, bad("%q is the output's own member (key, window_start, window_end): name the field otherwise", name)
			}
		}
		src := fields[name]
		m := aggCall.FindStringSubmatch(src)
		fn, known := aggFuncs[firstOr(m, 1)]
		if m == nil || !known {
			return nil, bad("%q is not one call of count(), sum(x), min(x), max(x), avg(x), first(x) or last(x)", shorten(src))
		}
		arg := m[2]
		// The whole source must be that one call: sum(a) + sum(b)
		// matches the pattern too. Parsed with a name no builtin has, its
		// tree is a call of that name with its arguments.
		tree, err := parser.Parse("f(" + arg + ")")
		call, isCall := (*ast.CallNode)(nil), false
		if err == nil {
			call, isCall = tree.Node.(*ast.CallNode)
		}
		if err != nil || !isCall {
			return nil, bad("%q is not one call of count(), sum(x), min(x), max(x), avg(x), first(x) or last(x)", shorten(src))
		}
		f := aggField{name: name, fn: fn}
		switch {
		case fn == fnCount && len(call.Arguments) != 0:
			return nil, bad("count() takes no argument (it counts the records of the group)")
		case fn != fnCount && len(call.Arguments) != 1:
			return nil, bad("%s takes one argument, an expression", firstOr(m, 1))
		}
		if fn != fnCount {
			if f.prog, err = compile("fields", label, arg, false); err != nil {
				return nil, err
			}
		}
		if f.json, err = appendJSON(nil, name); err != nil {
			return nil, bad("%v", err)
		}
		f.json = append(f.json, ':')
		out = append(out, f)
	}
	return out, nil
}

func firstOr(m []string, i int) string {
	if i < len(m) {
		return m[i]
	}
	return ""
}

// shapeOf fingerprints what the state's encoding depends on: the
// window's type and lengths, the fields' names and functions.
func shapeOf(kind string, w windowSpec, fields []aggField) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/1 %d %d %d %d", kind, w.kind, w.size, w.advance, w.gap)
	for _, f := range fields {
		fmt.Fprintf(h, " %q=%d", f.name, f.fn)
	}
	return h.Sum64()
}

// num is a JSON number as the expressions have it: an int or a float64.
type num struct {
	float bool
	i     int64
	f     float64
}

func (n num) float64() float64 {
	if n.float {
		return n.f
	}
	return float64(n.i)
}

// toNum converts a field value; ok is false for nil (not counted).
func toNum(v any) (n num, ok bool, err error) {
	switch x := v.(type) {
	case nil:
		return n, false, nil
	case int:
		return num{i: int64(x)}, true, nil
	case int64:
		return num{i: x}, true, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return n, false, fmt.Errorf("%v is not a finite number", x)
		}
		return num{float: true, f: x}, true, nil
	}
	return n, false, fmt.Errorf("the value is %s, not a number", typeName(v))
}

// addNums is a + b: an int while both are, else a float64.
func addNums(a, b num) (num, error) {
	if !a.float && !b.float {
		s := a.i + b.i
		if (s > a.i) != (b.i > 0) {
			return num{}, fmt.Errorf("the sum of %d and %d overflows a 64-bit integer (write float(x) to sum as floats)", a.i, b.i)
		}
		return num{i: s}, nil
	}
	s := a.float64() + b.float64()
	if math.IsInf(s, 0) {
		return num{}, errors.New("the sum overflows a float64")
	}
	return num{float: true, f: s}, nil
}

// compareNums compares exactly, ints with floats too.
func compareNums(a, b num) int {
	switch {
	case !a.float && !b.float:
		return cmpInt(a.i, b.i)
	case a.float && b.float:
		return cmpFloat(a.f, b.f)
	case a.float:
		return -intVsFloat(b.i, a.f)
	}
	return intVsFloat(a.i, b.f)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// intVsFloat compares i with f (finite) without rounding i.
func intVsFloat(i int64, f float64) int {
	if f >= 0x1p63 {
		return -1
	}
	if f < -0x1p63 {
		return 1
	}
	t := math.Trunc(f)
	if c := cmpInt(i, int64(t)); c != 0 {
		return c
	}
	return cmpFloat(0, f-t)
}

// better reports whether x replaces cur as the min (sign -1) or max
// (sign 1). Of equal values the whole number is kept (2 over 2.0),
// whatever their order, so a merge of sessions agrees with a fold.
func better(x, cur num, sign int) bool {
	c := compareNums(x, cur) * sign
	return c > 0 || c == 0 && cur.float && !x.float
}

// acc is the state of one field for one group and window.
type acc struct {
	has bool  // sum, min, max, avg, first, last: a value was counted
	n   int64 // count; avg: values counted
	v   num   // sum, min, max, avg's sum
	off int64 // first, last: the offset of the value's record
	raw []byte
}

// input is one record's value for a field.
type input struct {
	ok  bool // counted (count counts every record)
	v   num
	raw []byte // first, last: the value's JSON
}

// add folds one record's value, of the record at off, into a.
func (a *acc) add(fn aggFunc, in input, off int64) error {
	switch fn {
	case fnCount:
		a.n++
		return nil
	case fnFirst:
		if in.ok && (!a.has || off < a.off) {
			a.has, a.off, a.raw = true, off, append(a.raw[:0], in.raw...)
		}
		return nil
	case fnLast:
		if in.ok && (!a.has || off > a.off) {
			a.has, a.off, a.raw = true, off, append(a.raw[:0], in.raw...)
		}
		return nil
	}
	if !in.ok {
		return nil
	}
	return a.addNum(fn, in.v, 1)
}

// addNum folds n values whose sum (sum, avg) or min or max is v.
func (a *acc) addNum(fn aggFunc, v num, n int64) error {
	if !a.has {
		a.has, a.v, a.n = true, v, n
		return nil
	}
	switch fn {
	case fnSum, fnAvg:
		s, err := addNums(a.v, v)
		if err != nil {
			return err
		}
		a.v, a.n = s, a.n+n
	case fnMin:
		if better(v, a.v, -1) {
			a.v = v
		}
	case fnMax:
		if better(v, a.v, 1) {
			a.v = v
		}
	}
	return nil
}

// merge folds b (of other records) into a: sessions that merge.
func (a *acc) merge(fn aggFunc, b *acc) error {
	switch fn {
	case fnCount:
		a.n += b.n
		return nil
	case fnFirst, fnLast:
		if b.has {
			return a.add(fn, input{ok: true, raw: b.raw}, b.off)
		}
		return nil
	}
	if !b.has {
		return nil
	}
	return a.addNum(fn, b.v, b.n)
}

// Encoding of a group's state in a store value: per field, in the order
// of the fields (sorted by name),
//
//	count                 uvarint n
//	sum, min, max         number
//	avg                   number, uvarint n (if a number)
//	first, last           0 | 1 varint offset, uvarint length, JSON
//
// where a number is 0 (none), 1 and a varint (an int) or 2 and the
// 8 bytes of a float64.

func appendNum(dst []byte, has bool, v num) []byte {
	switch {
	case !has:
		return append(dst, 0)
	case v.float:
		return binary.BigEndian.AppendUint64(append(dst, 2), math.Float64bits(v.f))
	}
	return binary.AppendVarint(append(dst, 1), v.i)
}

// appendAccs encodes accs, one per field.
func appendAccs(dst []byte, fields []aggField, accs []acc) []byte {
	for i, f := range fields {
		a := &accs[i]
		switch f.fn {
		case fnCount:
			dst = binary.AppendUvarint(dst, uint64(a.n))
		case fnSum, fnMin, fnMax:
			dst = appendNum(dst, a.has, a.v)
		case fnAvg:
			dst = appendNum(dst, a.has, a.v)
			if a.has {
				dst = binary.AppendUvarint(dst, uint64(a.n))
			}
		case fnFirst, fnLast:
			if !a.has {
				dst = append(dst, 0)
				continue
			}
			dst = binary.AppendVarint(append(dst, 1), a.off)
			dst = binary.AppendUvarint(dst, uint64(len(a.raw)))
			dst = append(dst, a.raw...)
		}
	}
	return dst
}

var errCorrupt = errors.New("truncated or corrupt")

// stateReader reads an encoded state.
type stateReader struct {
	b   []byte
	err error
}

func (r *stateReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *stateReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *stateReader) byte() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *stateReader) bytes(n uint64) []byte {
	if uint64(len(r.b)) < n {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *stateReader) fail() {
	if r.err == nil {
		r.err = errCorrupt
	}
	r.b = nil
}

func (r *stateReader) num() (num, bool) {
	switch r.byte() {
	case 0:
		return num{}, false
	case 1:
		return num{i: r.varint()}, true
	case 2:
		b := r.bytes(8)
		if b == nil {
			return num{}, false
		}
		return num{float: true, f: math.Float64frombits(binary.BigEndian.Uint64(b))}, true
	}
	r.fail()
	return num{}, false
}

// accs decodes one acc per field into accs, reusing their buffers.
func (r *stateReader) accs(fields []aggField, accs []acc) {
	for i, f := range fields {
		a := &accs[i]
		*a = acc{raw: a.raw[:0]}
		switch f.fn {
		case fnCount:
			a.n = int64(r.uvarint())
		case fnSum, fnMin, fnMax:
			a.v, a.has = r.num()
		case fnAvg:
			if a.v, a.has = r.num(); a.has {
				a.n = int64(r.uvarint())
			}
		case fnFirst, fnLast:
			switch r.byte() {
			case 0:
			case 1:
				a.has, a.off = true, r.varint()
				a.raw = append(a.raw, r.bytes(r.uvarint())...)
			default:
				r.fail()
			}
		}
	}
}

// appendValue writes the output value: {"key": ..., the fields...,
// "window_start": ..., "window_end": ...} (the window members when
// windowed). Numbers are written as appendJSON writes them.
func appendValue(dst []byte, key []byte, fields []aggField, accs []acc, windowed bool, start, end int64) []byte {
	dst = append(dst, `{"key":`...)
	dst = fastjson.AppendString(dst, unsafeconv.String(key))
	for i, f := range fields {
		a := &accs[i]
		dst = append(dst, ',')
		dst = append(dst, f.json...)
		switch {
		case f.fn == fnCount:
			dst = strconv.AppendInt(dst, a.n, 10)
		case !a.has:
			dst = append(dst, "null"...)
		case f.fn == fnFirst || f.fn == fnLast:
			dst = append(dst, a.raw...)
		case f.fn == fnAvg:
			dst = fastjson.AppendFloat(dst, a.v.float64()/float64(a.n)) // finite: a finite sum over n >= 1
		case a.v.float:
			dst = fastjson.AppendFloat(dst, a.v.f)
		default:
			dst = strconv.AppendInt(dst, a.v.i, 10)
		}
	}
	if windowed {
		dst = append(dst, `,"window_start":"`...)
		dst = formatTime(dst, start)
		dst = append(dst, `","window_end":"`...)
		dst = formatTime(dst, end)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}
