package builtin

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/fencepost-dev/fencepost/stages"
)

// appendJSON appends v's compact JSON to dst, as encoding/json writes it
// (map keys sorted) but without HTML escaping: a record value is not HTML.
// The scalars a projected field or a computation gives (a string with
// nothing to escape, an int, a finite float64, a bool, nil) are written
// here; the rest by segmentio/encoding/json, whose call costs more than
// writing a short string (FuzzAppendJSONScalars and
// FuzzFastJSONAgreesWithStd compare both with encoding/json).
func appendJSON(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		if plainString(x) {
			dst = append(dst, '"')
			dst = append(dst, x...)
			return append(dst, '"'), nil
		}
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case float64:
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			return appendFloat(dst, x), nil
		}
	case bool:
		return strconv.AppendBool(dst, x), nil
	case nil:
		return append(dst, "null"...), nil
	}
	if n := deepSize(v, budget); n > budget { // an array may hold one long string many times
		return dst, overBudget("JSON encoding", n)
	}
	return fastjson.Append(dst, v, fastjson.SortMapKeys)
}

// plainString reports whether s is JSON as it is between quotes: printable
// ASCII without a quote or backslash (anything else may need escaping or,
// invalid UTF-8, replacing).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// appendFloat writes a finite float64 as encoding/json does: the shortest
// decimal that reads back to it, in plain notation unless it is below
// 1e-6 or from 1e21 on, where the exponent form is used with no leading
// zero in the exponent (1e-07 is written 1e-7).
func appendFloat(dst []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if n := len(dst); format == 'e' && n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
		dst[n-2] = dst[n-1]
		dst = dst[:n-1]
	}
	return dst
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
