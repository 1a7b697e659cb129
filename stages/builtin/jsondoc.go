package builtin

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/expr-lang/expr/ast"

	"github.com/fencepost-dev/fencepost/internal/memo"
)

// A record value is read as JSON at most once per chain call, however
// many stages read it: the first stage that needs it checks it (valid,
// nested at most MaxJSONDepth deep, numbers holdable) and stores a *jsonDoc in the chain's memo; the next
// stages find it there (see internal/memo). A stage that replaces a value
// hands the next stages new bytes, which have no doc yet.
//
// Expressions that only read top-level fields with constant names
// (json.type, json?.user, json["amount"], json.items[0]) are compiled a
// second time with each such access replaced by a variable of its own
// (see fieldPatch in expr.go). When a record's value is a JSON object
// that second program runs, with just those fields decoded from the
// bytes into its variables (projectInto, bindSlots): no map is built or
// written and nothing else is decoded. It gives exactly what the access
// gives on the full value (an absent field is nil in both; duplicates:
// the last wins in both).
// Any other value (not an object, not JSON), and any other use of json
// (json itself, "x" in json, a computed field name), runs the program as
// written over the full value, parsed once and kept in the doc.

// jsonDoc is what is known about one value as JSON.
type jsonDoc struct {
	valid  bool // the value is JSON text
	object bool // valid, and a JSON object
	parsed bool
	// escapedNames: a member name holds an escape (see jsonScan).
	escapedNames bool
	// width is how the spans are recorded (see spanWidth); 0: they are not.
	width  uint8
	nspans uint32 // how many uint16s spans holds
	err    error  // valid but refused: a *DepthError or *NumberError (the record fails)
	full   any    // the whole value, once parsed (parsed says so)
	// spans are where an object's members are (see jsonscan.go), so the
	// stages that read fields do not walk it again: nspans uint16s (a
	// pointer and a 32-bit count, not a slice: a doc is 56 bytes, not 72).
	spans *uint16
}

// setSpans records s, of the width given, as the doc's spans, unless
// there are more than a uint32 counts (never in practice).
func (d *jsonDoc) setSpans(s []uint16, width int) {
	if uint64(len(s)) <= math.MaxUint32 {
		d.spans, d.nspans, d.width = unsafe.SliceData(s), uint32(len(s)), uint8(width)
	}
}

// memberSpans returns the doc's spans.
func (d *jsonDoc) memberSpans() []uint16 { return unsafe.Slice(d.spans, d.nspans) }

// docAlloc is where the docs of one Process call come from: the docs
// themselves, and the room their members are recorded in (a doc's spans
// are a slice of it no later doc writes to, or, when more members than
// the room left, an array of their own).
type docAlloc struct {
	docs  slab[jsonDoc]
	spans []uint16
}

// spansFirst and spansChunk are how many uint16s docAlloc makes room for
// at once, first and at most (each next chunk is twice as long, so a
// small batch does not pay for room it never uses): 64 and 1024 members
// of a value shorter than 64KiB. A chunk with less than spansLeft room
// left (16 such members) is left for a new one.
const (
	spansFirst = 256
	spansChunk = 4096
	spansLeft  = 64
)

// utf8BOM is the UTF-8 byte order mark, which some Windows tools write
// at the start of a file or message.
const utf8BOM = "\xef\xbb\xbf"

// jsonText is the bytes of a record value read as JSON: without a
// leading UTF-8 byte order mark, which RFC 8259 (section 8.1) lets a
// parser ignore. Every reader of a value's JSON (docFor and the doc's
// methods, the json stage, fromJSON) is given these bytes, so the doc's
// spans and its cache key agree.
func jsonText(v []byte) []byte {
	if len(v) >= len(utf8BOM) && string(v[:len(utf8BOM)]) == utf8BOM {
		return v[len(utf8BOM):]
	}
	return v
}

// docFor returns the doc of v from cache, checking v first (scanJSON) if
// cache has none (a nil cache keeps nothing: the check is repeated per
// stage). A new doc comes from docs.
func docFor(cache *memo.Cache, a *docAlloc, v []byte) *jsonDoc {
	if x, ok := cache.Get(v); ok {
		if d, ok := x.(*jsonDoc); ok {
			return d
		}
	}
	if cap(a.spans)-len(a.spans) < spansLeft {
		a.spans = make([]uint16, 0, min(max(spansFirst, 2*cap(a.spans)), spansChunk))
	}
	room := cap(a.spans) - len(a.spans)
	spans, width := a.spans[len(a.spans):], spanWidth(len(v))
	s := scanJSONMembers(v, &spans, width) // beyond room: appended into an array of their own
	d := a.docs.next()
	*d = jsonDoc{valid: s.valid, object: s.object, err: s.err, escapedNames: s.escapedNames}
	if n := len(spans); s.valid && s.object && width != 0 {
		d.setSpans(spans[:n:n], width)
		if n <= room {
			a.spans = a.spans[:len(a.spans)+n]
		}
	}
	cache.Put(v, d)
	return d
}

// value returns what the json variable holds for v: nil if v is not
// JSON, else the whole value, parsed once and kept in the doc. The error
// is the doc's: a value too deep or with a number no int or float64
// holds fails the record.
func (d *jsonDoc) value(v []byte) (any, error) {
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

// projectInto sets slots[i] to what json.<fs.names[i]> gives on v (nil
// for an absent field; the last of duplicates wins) and reports true, if
// v is a JSON object the doc does not refuse. Otherwise it sets nothing
// and reports false: the caller needs value. Only the named members are
// decoded, from the bytes, unless the whole value is parsed already; bx
// boxes the scalars among them.
func (d *jsonDoc) projectInto(v []byte, fs *fieldSet, slots []any, bx *boxer) bool {
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

// decodeMember is decodeValid(raw) for a member's raw value, with a
// string or number boxed by bx (the same any, without an allocation of
// its own).
func decodeMember(raw []byte, bx *boxer) any {
	switch raw[0] {
	case '"':
		d := decoder{b: raw}
		return bx.str(d.str())
	case '{', '[', 't', 'f', 'n':
		return decodeValid(raw)
	}
	i, f, whole, err := classify(bytesString(raw))
	switch {
	case err != nil: // never: scanJSON refused the value already
		return decodeValid(raw)
	case whole:
		return bx.int(int(i))
	}
	return bx.float(f)
}

// fieldIndex returns the index in fields of the member name (a JSON
// string token, quotes included), or -1.
func fieldIndex(fields []string, name []byte) int {
	inner := bytesString(name[1 : len(name)-1])
	for i, f := range fields {
		if f == inner {
			// Equal bytes: the name is f as written, unless f itself
			// holds what the name would have to escape.
			if plainName(f) {
				return i
			}
			break
		}
	}
	if plainName(inner) {
		return -1 // no escape, nothing encoding/json replaces: the name is its bytes
	}
	// Escapes, or bytes encoding/json may replace (invalid UTF-8):
	// compare what the decoder makes of the name.
	var s string
	if json.Unmarshal(name, &s) != nil {
		return -1
	}
	return slices.Index(fields, s)
}

// fieldSet is field names to find member names among, with what tells
// most member names apart from them without comparing each.
type fieldSet struct {
	names []string
	// ascii: every name is ASCII, without a backslash. A member name
	// that decodes to one then starts with that name's first byte or
	// with an escape, and is the name's bytes if it has no escape.
	ascii bool
	// byFirst, if ascii, is the indices of the non-empty names grouped
	// by first byte, each group in order: those starting with c are
	// byFirst[from[c]:from[c+1]]. A member name is compared with them
	// only, and with none if there are none.
	byFirst []int32
	from    [257]int32
	// tokens, if ascii, are the names as JSON string tokens (quoted).
	tokens []nameToken
}

func newFieldSet(names []string) *fieldSet {
	fs := &fieldSet{names: names, ascii: true}
	for _, f := range names {
		fs.ascii = fs.ascii && plainName(f)
	}
	if !fs.ascii {
		return fs
	}
	for _, f := range names {
		if f != "" {
			fs.from[int(f[0])+1]++
		}
	}
	for c := range 256 {
		fs.from[c+1] += fs.from[c]
	}
	fs.tokens = make([]nameToken, len(names))
	for i, f := range names {
		fs.tokens[i] = newNameToken(`"` + f + `"`)
	}
	fs.byFirst = make([]int32, fs.from[256])
	next := fs.from
	for i, f := range names {
		if f != "" {
			fs.byFirst[next[f[0]]] = int32(i)
			next[f[0]]++
		}
	}
	return fs
}

// index returns the index in fs.names of the member name (a JSON string
// token, quotes included), or -1: fieldIndex(fs.names, name).
func (fs *fieldSet) index(name []byte) int {
	if !fs.ascii {
		return fieldIndex(fs.names, name)
	}
	inner := bytesString(name[1 : len(name)-1])
	if len(inner) > 0 && inner[0] != '\\' {
		// it decodes to a string starting with inner[0] (or, not
		// ASCII, with a byte above 0x7f, which no name starts with)
		c := int(inner[0])
		candidates := fs.byFirst[fs.from[c]:fs.from[c+1]]
		if len(candidates) == 0 {
			return -1
		}
		for _, i := range candidates {
			if fs.names[i] == inner {
				return int(i)
			}
		}
	} else {
		for i, f := range fs.names {
			if f == inner {
				return i
			}
		}
	}
	if strings.IndexByte(inner, '\\') < 0 {
		return -1 // no escape: it decodes to itself, or to a string that is not ASCII
	}
	return fieldIndex(fs.names, name)
}

// plainIndex is index for the member name v[start:end] (a string token)
// without escape, fs.ascii: the name matches the first name in fs whose
// token has its bytes.
func (fs *fieldSet) plainIndex(v []byte, start, end int) int {
	if end-start < 3 { // "": an empty name, if fs holds one
		return fs.index(v[start:end])
	}
	c := int(v[start+1]) // int: c+1 of byte 0xff is 256, not 0
	for _, i := range fs.byFirst[fs.from[c]:fs.from[c+1]] {
		if fs.tokens[i].is(v, start, end) {
			return int(i)
		}
	}
	return -1
}

// nameToken is a member name's string token, as compared with the
// names in record values: a token of up to eight bytes as one word.
type nameToken struct {
	s          string
	word, mask uint64 // if len(s) <= 8: s's bytes little-endian, and which bits they take
}

func newNameToken(s string) nameToken {
	t := nameToken{s: s}
	if len(s) <= 8 {
		var b [8]byte
		copy(b[:], s)
		t.word = binary.LittleEndian.Uint64(b[:])
		t.mask = ^uint64(0) >> (64 - 8*len(s))
	}
	return t
}

// is reports whether v[start:end] is the token's bytes. A short token is
// compared as one word read at start when eight bytes are left in v
// (the bytes past end are masked off).
func (t *nameToken) is(v []byte, start, end int) bool {
	if end-start != len(t.s) {
		return false
	}
	if len(t.s) <= 8 && start+8 <= len(v) {
		return binary.LittleEndian.Uint64(v[start:])&t.mask == t.word
	}
	return bytesString(v[start:end]) == t.s
}

// plainName reports whether s, the inside of a JSON string token, is
// what it decodes to: no escape, only ASCII.
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// narrowPlain reports that the doc's members are recorded one uint16 per
// offset (a value shorter than 64KiB) and that none of their names has
// an escape, while fs's names are plain: a member's name is then one of
// fs's exactly when its bytes are that name's token (fs.plainIndex).
// Callers walk the spans themselves then, without a call per member.
func (d *jsonDoc) narrowPlain(fs *fieldSet) bool {
	return d.width == 1 && !d.escapedNames && fs.ascii
}

// eachMember is eachMember(v, fn) for v, the doc's value (an object),
// from its recorded members if it has them.
func (d *jsonDoc) eachMember(v []byte, fn func(name, raw []byte)) {
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
