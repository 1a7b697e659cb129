package fastjson

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/fencepost-dev/fencepost/internal/unsafeconv"
)

// fieldIndex returns the index in fields of the member name (a JSON
// string token, quotes included), or -1.
func fieldIndex(fields []string, name []byte) int {
	inner := unsafeconv.String(name[1 : len(name)-1])
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

// FieldSet is the top-level field names a stage reads, to find among the
// member names of values (Doc.ProjectInto, Doc.Present,
// Doc.FieldEquals): a member name (a string token, escapes and all) is
// one of them exactly when it decodes, as encoding/json decodes it, to
// that name. It holds what tells most member names apart without
// comparing each. Made once when a stage is built, it is read-only
// after: safe for concurrent use.
type FieldSet struct {
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

// NewFieldSet returns the set of names, in order: name i is field i of
// the methods that take it. The set keeps names (the caller must not
// change it); they should be distinct (of duplicates the first is
// found).
func NewFieldSet(names []string) *FieldSet {
	fs := &FieldSet{names: names, ascii: true}
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
func (fs *FieldSet) index(name []byte) int {
	if !fs.ascii {
		return fieldIndex(fs.names, name)
	}
	inner := unsafeconv.String(name[1 : len(name)-1])
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
func (fs *FieldSet) plainIndex(v []byte, start, end int) int {
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
	return string(v[start:end]) == t.s
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
