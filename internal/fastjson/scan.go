package fastjson

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/fencepost-dev/fencepost/internal/unsafeconv"
)

// A value is read in two passes: one (scanJSON) checks it (valid,
// nesting depth, numbers), and a second (decodeValid) builds the value
// from bytes the first accepted. Both cost time linear in the value's
// size, whatever its shape, and neither recurses on the value's nesting
// beyond MaxDepth. Validity and the decoded values are encoding/json's
// (FuzzFastJSONAgreesWithStd), numbers excepted: see jsonNumber.

// MaxDepth is how deeply arrays and objects may nest in a value: a
// valid value nested deeper is refused with a *DepthError (and never
// decoded). 1000 is Jackson's default since 2.15 (the JVM side of most
// Kafka pipelines), so what it writes and reads passes here;
// encoding/json allows 10000. Real records nest a few levels; the limit
// bounds the decoder's recursion and what expressions walk.
const MaxDepth = 1000

// DepthError is a valid JSON value nested deeper than MaxDepth: Parse,
// Doc.Err and Doc.Value report it, and the stages fail the record with
// it (a record error: dead-lettered or stopping the partition by
// policy).
type DepthError struct {
	// Depth is how deeply the value nests arrays and objects.
	Depth int
	// Limit is MaxDepth.
	Limit int
}

// Error is one line, for a dead-letter header.
func (e *DepthError) Error() string {
	return fmt.Sprintf("JSON value nests arrays or objects %d levels deep; the limit is %d (check the producer of this topic)",
		e.Depth, e.Limit)
}

// jsonScan is what scanJSON learns about a value.
type jsonScan struct {
	valid  bool  // JSON text
	object bool  // valid, and a JSON object
	err    error // valid but refused: a *DepthError, else the first *NumberError
	// escapedNames: an object with a member name holding an escape
	// (without one, a name decodes to its bytes or to a string that is
	// not ASCII).
	escapedNames bool
}

// scanJSON checks v in one pass, keeping a stack of one byte per open
// array or object (no recursion, whatever the depth). A valid value is
// read to its end even past MaxDepth, so that a value too deep is
// told apart from one that is not JSON at all.
func scanJSON(v []byte) jsonScan { return scanJSONMembers(v, nil, 0) }

// Where the members of an object are in its bytes is recorded as four
// offsets per member, in a []uint16: the name token (quotes included) is
// [name, nameEnd), the value [value, end). For a value shorter than 64KiB
// an offset is one uint16; up to 4GiB it is two (the low half first);
// nothing is recorded for a longer value. Most values are short: a
// member takes 8 bytes, not 16.

// spanWidth is how many uint16s an offset into a value of n bytes takes
// (see above): 1, 2, or 0 for none.
func spanWidth(n int) int {
	switch {
	case n <= math.MaxUint16:
		return 1
	case uint64(n) <= math.MaxUint32:
		return 2
	}
	return 0
}

// scanJSONMembers is scanJSON that also appends to *spans (if spans is
// not nil and width is not 0) where each member of a top-level object is,
// in order, width uint16s per offset (width is spanWidth(len(v)) or
// more); the appended offsets are meaningful only if the value is valid.
func scanJSONMembers(v []byte, spans *[]uint16, width int) jsonScan {
	if width == 0 {
		spans = nil
	}
	i := skipSpace(v, 0)
	if i < len(v) && v[i] == '{' {
		if spans == nil {
			s, _ := scanObject(v, i, nil, 0)
			return s
		}
		// Stored once: a slice stored through spans at every member
		// cost a write barrier each while the collector ran.
		s, out := scanObject(v, i, *spans, width)
		*spans = out
		return s
	}
	end, depth, numErr := scanValue(v, i)
	if end < 0 || skipSpace(v, end) != len(v) {
		return jsonScan{}
	}
	return validScan(false, depth, numErr)
}

// validScan is what scanJSON says of a valid value nesting depth deep
// whose first unholdable number, if any, gave numErr.
func validScan(object bool, depth int, numErr error) jsonScan {
	s := jsonScan{valid: true, object: object, err: numErr}
	if depth > MaxDepth {
		s.err = &DepthError{Depth: depth, Limit: MaxDepth}
	}
	return s
}

// scanObject checks the object starting at v[i] (its '{'), which must
// end v but for white space, member by member: a member's scalar value
// is checked in place, a nested one by scanValue. It appends each
// member's offsets to spans as scanJSONMembers says (none with width 0)
// and returns the slice.
//
// Most objects are flat and written without white space, their names
// and strings plain: those tokens are read here in one loop each
// (unescapedString), anything else by the general functions; numbers
// are read once (scanNumber tells whether they surely fit).
func scanObject(v []byte, i int, spans []uint16, width int) (jsonScan, []uint16) {
	depth := 1
	var numErr error
	escapedNames := false
	if i = skipSpace(v, i+1); i < len(v) && v[i] == '}' {
		if skipSpace(v, i+1) != len(v) {
			return jsonScan{}, spans
		}
		return validScan(true, depth, nil), spans
	}
	for {
		name := i
		if i >= len(v) || v[i] != '"' {
			return jsonScan{}, spans
		}
		nameEnd := unescapedString(v, i)
		if nameEnd < 0 {
			if nameEnd = escapedString(v, i); nameEnd < 0 {
				return jsonScan{}, spans
			}
			escapedNames = true
		}
		at := nameEnd
		if at < len(v) && v[at] == ':' {
			at++
		} else if at = skipSpace(v, at); at < len(v) && v[at] == ':' {
			at++
		} else {
			return jsonScan{}, spans
		}
		if at < len(v) && isSpace(v[at]) {
			at = skipSpace(v, at)
		}
		if at >= len(v) {
			return jsonScan{}, spans
		}
		var end int
		switch c := v[at]; {
		case c == '"':
			if end = unescapedString(v, at); end < 0 {
				end = escapedString(v, at)
			}
		case c == '{' || c == '[':
			var d int
			var ne error
			if end, d, ne = scanValue(v, at); end >= 0 {
				depth = max(depth, d+1)
				if numErr == nil {
					numErr = ne
				}
			}
		default:
			end = scanScalar(v, at, &numErr)
		}
		if end < 0 {
			return jsonScan{}, spans
		}
		if width != 0 {
			spans = appendMember(spans, width, name, nameEnd, at, end)
		}
		if end < len(v) && v[end] == ',' {
			i = end + 1
			if i < len(v) && isSpace(v[i]) {
				i = skipSpace(v, i)
			}
			continue
		}
		if i = skipSpace(v, end); i >= len(v) {
			return jsonScan{}, spans
		}
		if v[i] == ',' {
			i = skipSpace(v, i+1)
			continue
		}
		if v[i] != '}' || skipSpace(v, i+1) != len(v) {
			return jsonScan{}, spans
		}
		s := validScan(true, depth, numErr)
		s.escapedNames = escapedNames
		return s, spans
	}
}

// inString[c] reports that byte c goes on a string token as itself: it
// neither ends the string ('"'), starts an escape ('\\') nor is refused
// (below 0x20).
var inString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unescapedString returns the index past the string token starting at
// v[i] (a quote) if it has no escape, or -1: then scanString has to tell.
// It reads eight bytes at a time while eight are left (most strings in
// records end within the first eight), then byte by byte.
func unescapedString(v []byte, i int) int {
	for i++; i+8 <= len(v); i += 8 {
		if m := stopBytes(binary.LittleEndian.Uint64(v[i:])); m != 0 {
			return stringEnd(v, i+bits.TrailingZeros64(m)/8)
		}
	}
	for ; i < len(v); i++ {
		if !inString[v[i]] {
			return stringEnd(v, i)
		}
	}
	return -1
}

// stringEnd is what unescapedString returns when v[i] is the first byte
// of the string that inString refuses: past the string if it is its
// quote, else -1.
func stringEnd(v []byte, i int) int {
	if v[i] == '"' {
		return i + 1
	}
	return -1
}

// stopBytes returns, for eight bytes w of a string (the first in the low
// byte), a word whose lowest set bit is the high bit of the first byte
// inString refuses (a quote, a backslash, or a byte below 0x20), or 0 if
// there is none. Bits above the lowest may be set for bytes that are not
// such: only the lowest means anything. (Each term is the usual "some
// byte is zero / less than n" test, which is exact for the lowest byte.)
func stopBytes(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := w ^ (ones * '"')
	backslash := w ^ (ones * '\\')
	return ((quote-ones) & ^quote | (backslash-ones) & ^backslash | (w-ones*0x20) & ^w) & highs
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// scanScalar returns the index past the string, number or literal
// starting at v[i] (i < len(v)), or -1 if none starts there; a number no
// int or float64 holds sets *numErr if it is nil.
func scanScalar(v []byte, i int, numErr *error) int {
	switch c := v[i]; {
	case c == '"':
		return scanString(v, i)
	case c == '-' || c >= '0' && c <= '9':
		j, sure := scanNumber(v, i)
		if j >= 0 && *numErr == nil && !sure {
			_, _, _, *numErr = classify(unsafeconv.String(v[i:j])) // not kept: errors copy it
		}
		return j
	case c == 't':
		return scanLiteral(v, i, "true")
	case c == 'f':
		return scanLiteral(v, i, "false")
	case c == 'n':
		return scanLiteral(v, i, "null")
	}
	return -1
}

// scanValue checks the value starting at v[i] in one pass, keeping a
// stack of one byte per open array or object (no recursion, whatever the
// depth), and returns the index just past it (-1 if it is not JSON), how
// deeply it nests arrays and objects, and the *NumberError of its first
// number no int or float64 holds. A valid value is read to its end even
// past MaxDepth, so that a value too deep is told apart from one that is
// not JSON at all.
func scanValue(v []byte, i int) (end, depth int, numErr error) {
	var buf [64]byte
	stack := buf[:0] // '{' or '[' per open container
	for {
		// A value starts at v[i].
		if i >= len(v) {
			return -1, 0, nil
		}
		switch c := v[i]; {
		case c == '{' || c == '[':
			stack = append(stack, c)
			depth = max(depth, len(stack))
			i = skipSpace(v, i+1)
			if i < len(v) && v[i] == c+2 { // '}' or ']': empty
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if _, i = scanMemberName(v, i); i < 0 {
					return -1, 0, nil
				}
			}
			continue
		default:
			i = scanScalar(v, i, &numErr)
		}
		if i < 0 {
			return -1, 0, nil
		}
		// After a value: close containers until one goes on.
		for {
			if len(stack) == 0 {
				return i, depth, numErr
			}
			if i = skipSpace(v, i); i >= len(v) {
				return -1, 0, nil
			}
			open := stack[len(stack)-1]
			if v[i] == ',' {
				i = skipSpace(v, i+1)
				if open == '{' {
					if _, i = scanMemberName(v, i); i < 0 {
						return -1, 0, nil
					}
				}
				break
			}
			if v[i] != open+2 {
				return -1, 0, nil
			}
			stack = stack[:len(stack)-1]
			i++
		}
	}
}

// appendMember appends the offsets of a member (its name token, its
// value and the value's end), width uint16s each.
func appendMember(s []uint16, width, name, nameEnd, value, end int) []uint16 {
	if width == 1 {
		return append(s, uint16(name), uint16(nameEnd), uint16(value), uint16(end))
	}
	return append(s, uint16(name), uint16(name>>16), uint16(nameEnd), uint16(nameEnd>>16),
		uint16(value), uint16(value>>16), uint16(end), uint16(end>>16))
}

// scanMemberName returns the index past the member name starting at
// v[i] (a string token) and the index of the value after it and its
// colon; the value's index is -1 if there are none.
func scanMemberName(v []byte, i int) (nameEnd, value int) {
	if i >= len(v) || v[i] != '"' {
		return -1, -1
	}
	if i = scanString(v, i); i < 0 {
		return -1, -1
	}
	nameEnd = i
	if i = skipSpace(v, i); i >= len(v) || v[i] != ':' {
		return -1, -1
	}
	return nameEnd, skipSpace(v, i+1)
}

// scanString returns the index past the string token starting at v[i] (a
// quote), or -1 if it is not one. Bytes that are not UTF-8 are accepted,
// as encoding/json does (decoding replaces them).
func scanString(v []byte, i int) int {
	if end := unescapedString(v, i); end >= 0 {
		return end
	}
	return escapedString(v, i)
}

// escapedString is scanString byte by byte, escapes checked.
func escapedString(v []byte, i int) int {
	for i++; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i++; i >= len(v) {
				return -1
			}
			switch v[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(v)-i < 5 || hex4(v[i+1:i+5]) < 0 {
					return -1
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// hex4 is the value of four hex digits, or -1.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

func scanLiteral(v []byte, i int, lit string) int {
	if len(v)-i < len(lit) || string(v[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanNumber returns the index past the number starting at v[i], or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// and whether, seen in the same pass, an int or a float64 surely holds it
// (classify returns no error) without parsing it: a whole number of at
// most 18 digits, or a fraction without exponent shorter than 300 bytes
// (a float64 overflows past 309 integer digits). False means classify
// has to tell.
func scanNumber(v []byte, i int) (end int, sure bool) {
	start := i
	if v[i] == '-' {
		i++
	}
	digits := i
	switch {
	case i >= len(v):
		return -1, false
	case v[i] == '0':
		i++
	case v[i] >= '1' && v[i] <= '9':
		i = skipDigits(v, i)
	default:
		return -1, false
	}
	sure = i-digits <= 18
	if i < len(v) && v[i] == '.' {
		j := skipDigits(v, i+1)
		if j == i+1 {
			return -1, false
		}
		i = j
		sure = i-start < 300
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		j := skipDigits(v, i)
		if j == i {
			return -1, false
		}
		return j, false
	}
	return i, sure
}

func skipDigits(v []byte, i int) int {
	for i < len(v) && isDigit(v[i]) {
		i++
	}
	return i
}

// decodeValid returns the value of v, which scanJSON found valid and did
// not refuse (depth within MaxDepth, every number holdable): objects are
// map[string]any (of duplicate names the last wins), arrays []any,
// numbers as jsonNumber says, strings as encoding/json decodes them.
// Strings without escapes share v's bytes (read-only, never reused: see
// stages.Record).
func decodeValid(v []byte) any {
	d := decoder{b: v, i: skipSpace(v, 0)}
	return d.value()
}

// decoder reads one valid value; i is the position in b.
type decoder struct {
	b []byte
	i int
}

func (d *decoder) value() any {
	b := d.b
	switch c := b[d.i]; c {
	case '{':
		m := make(map[string]any)
		d.i = skipSpace(b, d.i+1)
		if b[d.i] == '}' {
			d.i++
			return m
		}
		for {
			name := d.str()
			d.i = skipSpace(b, skipSpace(b, d.i)+1) // past ':'
			m[name] = d.value()
			d.i = skipSpace(b, d.i)
			if b[d.i] == '}' {
				d.i++
				return m
			}
			d.i = skipSpace(b, d.i+1) // past ','
		}
	case '[':
		a := make([]any, 0) // [] is an empty array, not nil, as in encoding/json
		d.i = skipSpace(b, d.i+1)
		if b[d.i] == ']' {
			d.i++
			return a
		}
		for {
			a = append(a, d.value())
			d.i = skipSpace(b, d.i)
			if b[d.i] == ']' {
				d.i++
				return a
			}
			d.i = skipSpace(b, d.i+1) // past ','
		}
	case '"':
		return d.str()
	case 't':
		d.i += len("true")
		return true
	case 'f':
		d.i += len("false")
		return false
	case 'n':
		d.i += len("null")
		return nil
	}
	j, _ := scanNumber(b, d.i)
	n, _ := jsonNumber(unsafeconv.String(b[d.i:j])) // holdable: checked by scanJSON
	d.i = j
	return n
}

// str returns the string token at d.i, unescaped, and moves past it.
func (d *decoder) str() string {
	b := d.b
	start := d.i + 1
	escaped, ascii := false, true
	i := start
	for ; b[i] != '"'; i++ {
		switch c := b[i]; {
		case c == '\\':
			escaped = true
			i++
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	d.i = i + 1
	s := b[start:i]
	if !escaped && (ascii || utf8.Valid(s)) {
		return unsafeconv.String(s)
	}
	return unquote(s)
}

// unquote decodes the inside of a valid string token as encoding/json
// does: escapes decoded, a lone or broken surrogate and every byte that
// is not UTF-8 replaced by U+FFFD.
func unquote(s []byte) string {
	out := make([]byte, 0, len(s)+utf8.UTFMax)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			e := s[i+1]
			i += 2
			switch e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(s[i:])
				i += 4
				if utf16.IsSurrogate(r) {
					if len(s)-i >= 6 && s[i] == '\\' && s[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, hex4(s[i+2:])); dec != unicode.ReplacementChar {
							out = utf8.AppendRune(out, dec)
							i += 6
							continue
						}
					}
					r = unicode.ReplacementChar
				}
				out = utf8.AppendRune(out, r)
			default: // '"', '\\', '/'
				out = append(out, e)
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			out = utf8.AppendRune(out, r)
			i += size
		}
	}
	return string(out)
}

// jsonNumber converts a JSON number literal (valid, as checked by
// scanNumber): a whole number (no fraction, no exponent) to an int, any
// other to a float64. One that neither holds, a whole number beyond 64
// bits or a number beyond a float64's range, is a *NumberError.
func jsonNumber(lit string) (any, error) {
	i, f, whole, err := classify(lit)
	switch {
	case err != nil:
		return nil, err
	case whole:
		return int(i), nil
	}
	return f, nil
}
