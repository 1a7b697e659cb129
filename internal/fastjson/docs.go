package fastjson

import (
	"github.com/fencepost-dev/fencepost/internal/unsafeconv"
)

// A record value is read as JSON at most once per chain call, however
// many stages read it: the first stage that needs it checks it (valid,
// nested at most MaxDepth deep, numbers holdable) into a *Doc, which the
// stages keep in the chain's memo for the next ones (see internal/memo).
// A stage that replaces a value hands the next stages new bytes, which
// have no doc yet.
//
// A stage whose expressions read only top-level fields with constant
// names (json.type, json?.user, json["amount"]) has just those fields
// decoded from the bytes (Doc.ProjectInto): no map is built and nothing
// else is decoded. It gives exactly what the access gives on the full
// value (an absent field is nil in both; duplicates: the last wins in
// both). Any other value (not an object, not JSON), and any other use
// of the value, reads the full value (Doc.Value), parsed once and kept
// in the doc.

// Doc is what is known about one value as JSON: whether it is JSON, an
// object, refused, and, for an object, where its members are, so that
// the stages reading it do not scan it again. Its methods take the
// value's bytes, which must be the very bytes the doc was made from
// (Docs.New), unchanged. A Doc is not safe for concurrent use: Value
// parses on first need and keeps the result.
type Doc struct {
	valid  bool // the value is JSON text
	object bool // valid, and a JSON object
	parsed bool
	// escapedNames: a member name holds an escape (see jsonScan).
	escapedNames bool
	// width is how the spans are recorded (see spanWidth); 0: they are not.
	width uint8
	err   error // valid but refused: a *DepthError or *NumberError (the record fails)
	full  any   // the whole value, once parsed (parsed says so)
	// spans are where an object's members are (see scan.go), so the
	// stages that read fields do not walk it again (a pointer and a
	// 32-bit count, not a slice: a doc is 56 bytes, not 64).
	spans unsafeconv.Slice32[uint16]
}

// Valid reports whether the value is JSON text (RFC 8259, as
// encoding/json reads it; a leading byte order mark is not: see Text).
func (d *Doc) Valid() bool { return d.valid }

// Object reports whether the value is valid JSON and an object.
func (d *Doc) Object() bool { return d.object }

// Err is why a valid value is refused: a *DepthError if it nests deeper
// than MaxDepth, else the *NumberError of its first number no int or
// float64 holds; nil if it is not refused (or not valid). A refused value
// is never decoded: the record fails with this error.
func (d *Doc) Err() error { return d.err }

// setSpans records s, of the width given, as the doc's spans, unless
// there are more than a uint32 counts (never in practice).
func (d *Doc) setSpans(s []uint16, width int) {
	if spans, ok := unsafeconv.MakeSlice32(s); ok {
		d.spans, d.width = spans, uint8(width)
	}
}

// memberSpans returns the doc's spans.
func (d *Doc) memberSpans() []uint16 { return d.spans.Slice() }

// Docs makes the docs of one Process call: the docs themselves, and the
// room their members are recorded in, come from chunks shared by many
// docs (a doc's spans are a slice of one no later doc writes to, or,
// when more members than the room left, an array of their own). The
// zero Docs is ready to use; it is not safe for concurrent use.
type Docs struct {
	docs  slab[Doc]
	spans []uint16
}

// spansFirst and spansChunk are how many uint16s Docs makes room for
// at once, first and at most (each next chunk is twice as long, so a
// small batch does not pay for room it never uses): 64 and 1024 members
// of a value shorter than 64KiB. A chunk with less than spansLeft room
// left (16 such members) is left for a new one.
const (
	spansFirst = 256
	spansChunk = 4096
	spansLeft  = 64
)

// Reserve makes room for n docs at once, for a caller about to make n
// (one per record of its batch): one allocation rather than a few
// growing ones.
func (a *Docs) Reserve(n int) { a.docs.reserve(n) }

// New checks v (valid, nested at most MaxDepth deep, numbers holdable,
// in one pass linear in its size) and returns its doc. v is the text to
// read (see Text); the doc and what it decodes refer to v's bytes, which
// must not be written again. New returns a fresh doc each call: sharing
// one per value among stages is the caller's (a chain's memo).
func (a *Docs) New(v []byte) *Doc {
	if cap(a.spans)-len(a.spans) < spansLeft {
		a.spans = make([]uint16, 0, min(max(spansFirst, 2*cap(a.spans)), spansChunk))
	}
	room := cap(a.spans) - len(a.spans)
	spans, width := a.spans[len(a.spans):], spanWidth(len(v))
	s := scanJSONMembers(v, &spans, width) // beyond room: appended into an array of their own
	d := a.docs.next()
	*d = Doc{valid: s.valid, object: s.object, err: s.err, escapedNames: s.escapedNames}
	if n := len(spans); s.valid && s.object && width != 0 {
		d.setSpans(spans[:n:n], width)
		if n <= room {
			a.spans = a.spans[:len(a.spans)+n]
		}
	}
	return d
}

// utf8BOM is the UTF-8 byte order mark, which some Windows tools write
// at the start of a file or message.
const utf8BOM = "\xef\xbb\xbf"

// Text returns the bytes of a record value to read as JSON: v without a
// leading UTF-8 byte order mark, which RFC 8259 (section 8.1) lets a
// parser ignore; v itself if it has none. It shares v's bytes. Every
// reader of a value's JSON is given these bytes (Docs.New, the doc's
// methods, Parse), so a doc's spans and a memo's key agree.
func Text(v []byte) []byte {
	if len(v) >= len(utf8BOM) && string(v[:len(utf8BOM)]) == utf8BOM {
		return v[len(utf8BOM):]
	}
	return v
}

// Parse reads v as JSON: x is its value if it is valid and not refused
// (objects map[string]any, arrays []any, whole numbers int, other
// numbers float64, as the package documentation says); valid is false
// if v is not JSON text; err is a *DepthError or a *NumberError if v is
// valid but refused (x is then nil). Decoded strings may share v's
// bytes, which must not be written again.
func Parse(v []byte) (x any, valid bool, err error) {
	s := scanJSON(v)
	switch {
	case !s.valid:
		return nil, false, nil
	case s.err != nil:
		return nil, true, s.err
	}
	return decodeValid(v), true, nil
}

// Value returns the whole value of v, the doc's bytes: nil if v is not
// JSON, else its value, parsed on the first call and kept in the doc
// (every call returns the same value: callers must not modify it). The
// error is Err's: a refused value is not decoded.
func (d *Doc) Value(v []byte) (any, error) {
	switch {
	case !d.valid:
		return nil, nil
	case d.err != nil:
		return nil, d.err
	}
	if !d.parsed {
		d.full, d.parsed = decodeValid(v), true
	}
	return d.full, nil
}

// ProjectInto sets slots[i] to what json.<fs's name i> gives on v, the
// doc's bytes (nil for an absent field; of duplicates the last wins),
// and reports true, if v is a JSON object the doc does not refuse.
// Otherwise it sets nothing and reports false: the caller needs Value.
// slots holds one element per name of fs. Only the named members are
// decoded, from the bytes, unless the whole value is parsed already;
// bx boxes the scalars among them. The values set are read-only: they
// may share v's bytes, bx's slabs or the parsed value.
func (d *Doc) ProjectInto(v []byte, fs *FieldSet, slots []any, bx *Boxer) bool {
	if !d.valid || !d.object || d.err != nil {
		return false
	}
	if d.parsed {
		m := d.full.(map[string]any)
		for i, f := range fs.names {
			slots[i] = m[f]
		}
		return true
	}
	clear(slots) // an absent field is nil
	if d.narrowPlain(fs) {
		for s := d.memberSpans(); len(s) >= 4; s = s[4:] {
			if i := fs.plainIndex(v, int(s[0]), int(s[1])); i >= 0 {
				slots[i] = decodeMember(v[s[2]:s[3]], bx)
			}
		}
		return true
	}
	d.eachMember(v, func(name, raw []byte) {
		if i := fs.index(name); i >= 0 {
			slots[i] = decodeMember(raw, bx)
		}
	})
	return true
}

// Present sets present[i] for each name i of fs that is a member of v,
// the doc's bytes, and leaves the others as they are; present holds one
// element per name. It sets none if v is not an object. It decodes no
// value, so it answers for a refused object (Err) too.
func (d *Doc) Present(v []byte, fs *FieldSet, present []bool) {
	if !d.object {
		return
	}
	d.eachMember(v, func(name, _ []byte) {
		if i := fs.index(name); i >= 0 {
			present[i] = true
		}
	})
}

// decodeMember is decodeValid(raw) for a member's raw value, with a
// string or number boxed by bx (the same any, without an allocation of
// its own).
func decodeMember(raw []byte, bx *Boxer) any {
	switch raw[0] {
	case '"':
		d := decoder{b: raw}
		return bx.str(d.str())
	case '{', '[', 't', 'f', 'n':
		return decodeValid(raw)
	}
	i, f, whole, err := classify(unsafeconv.String(raw))
	switch {
	case err != nil: // never: scanJSON refused the value already
		return decodeValid(raw)
	case whole:
		return bx.int(int(i))
	}
	return bx.float(f)
}

// narrowPlain reports that the doc's members are recorded one uint16 per
// offset (a value shorter than 64KiB) and that none of their names has
// an escape, while fs's names are plain: a member's name is then one of
// fs's exactly when its bytes are that name's token (fs.plainIndex).
// Callers walk the spans themselves then, without a call per member.
func (d *Doc) narrowPlain(fs *FieldSet) bool {
	return d.width == 1 && !d.escapedNames && fs.ascii
}

// eachMember is eachMember(v, fn) for v, the doc's value (an object),
// from its recorded members if it has them.
func (d *Doc) eachMember(v []byte, fn func(name, raw []byte)) {
	switch s := d.memberSpans(); d.width {
	case 0:
		eachMember(v, fn)
	case 1:
		for ; len(s) >= 4; s = s[4:] {
			fn(v[s[0]:s[1]], v[s[2]:s[3]])
		}
	default:
		for ; len(s) >= 8; s = s[8:] {
			fn(v[wide(s[0:2]):wide(s[2:4])], v[wide(s[4:6]):wide(s[6:8])])
		}
	}
}

// wide is the offset recorded in two uint16s (the low half first).
func wide(s []uint16) int { return int(s[0]) | int(s[1])<<16 }

// eachMember calls fn with the name (a string token, quotes included) and
// the raw value of every member of obj, a valid JSON object, in order.
func eachMember(obj []byte, fn func(name, raw []byte)) {
	i := skipSpace(obj, 0) + 1 // past '{'
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return
		}
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
		end := skipString(obj, i)
		name := obj[i:end]
		i = skipSpace(obj, end) + 1 // past ':'
		i = skipSpace(obj, i)
		vend := skipValue(obj, i)
		fn(name, obj[i:vend])
		i = vend
	}
}

func firstByte(v []byte) byte {
	if i := skipSpace(v, 0); i < len(v) {
		return v[i]
	}
	return 0
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && isSpace(v[i]) {
		i++
	}
	return i
}

// skipString returns the index past the string token starting at v[i]
// (a quote), in valid JSON.
func skipString(v []byte, i int) int {
	for i++; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(v)
}

// skipValue returns the index past the value starting at v[i], in valid
// JSON.
func skipValue(v []byte, i int) int {
	switch v[i] {
	case '"':
		return skipString(v, i)
	case '{', '[':
		depth := 0
		for i < len(v) {
			switch v[i] {
			case '"':
				i = skipString(v, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(v)
	}
	for ; i < len(v); i++ { // a number or a literal: up to a delimiter
		switch v[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}
