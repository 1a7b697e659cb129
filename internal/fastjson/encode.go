package fastjson

import (
	"math"
	"strconv"

	segjson "github.com/segmentio/encoding/json"
)

// Encoding writes what encoding/json writes, without HTML escaping (a
// record value is not HTML) and with map keys sorted: the scalars a
// projected field or a computation gives are written here, everything
// else by segmentio/encoding/json, whose call costs more than writing a
// short string. FuzzAppendJSONScalars and FuzzFastJSONAgreesWithStd hold
// both to encoding/json.

// AppendScalar appends the compact JSON of v to dst and reports true if
// v is a scalar written here: a string with nothing to escape, an int or
// int64, a finite float64, a bool, or nil. For any other value it
// returns dst unchanged and false: Append writes those.
func AppendScalar(dst []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case string:
		if plainString(x) {
			dst = append(dst, '"')
			dst = append(dst, x...)
			return append(dst, '"'), true
		}
	case int:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int64:
		return strconv.AppendInt(dst, x, 10), true
	case float64:
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			return appendFloat(dst, x), true
		}
	case bool:
		return strconv.AppendBool(dst, x), true
	case nil:
		return append(dst, "null"...), true
	}
	return dst, false
}

// Append appends v's compact JSON to dst, as encoding/json's Marshal
// writes it (map keys sorted, invalid UTF-8 replaced) but without HTML
// escaping. The error is that of a value with no JSON encoding (a NaN
// or infinite float, a channel, a function, a cycle): then what was
// appended to dst is meaningless. Append sets no bound on v's size: a
// caller with a memory budget checks v first.
func Append(dst []byte, v any) ([]byte, error) {
	if b, ok := AppendScalar(dst, v); ok {
		return b, nil
	}
	return segjson.Append(dst, v, segjson.SortMapKeys)
}

// AppendString appends s as a JSON string, as Append writes it.
func AppendString(dst []byte, s string) []byte {
	if plainString(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b, _ := segjson.Append(dst, s, segjson.SortMapKeys) // a string always encodes
	return b
}

// AppendFloat appends f, finite, as Append writes it.
func AppendFloat(dst []byte, f float64) []byte { return appendFloat(dst, f) }

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
