package builtin

import (
	"bytes"
	"fmt"
	"sort"
	"sync"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/fencepost-dev/fencepost/stages"
)

// appendJSON appends v's compact JSON to dst, as encoding/json writes it
// (map keys sorted) but without HTML escaping: a record value is not HTML.
func appendJSON(dst []byte, v any) ([]byte, error) {
	return fastjson.Append(dst, v, fastjson.SortMapKeys)
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
