package builtin

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A JSON value reaches expressions (the json variable) with every number
// exact: a float64, or an int for a whole number beyond 2^53 (a float64
// would round it; 64-bit ids are such numbers). A number neither holds
// (1e400, or a whole number beyond 64 bits) fails the record with a
// *NumberError, in the json stage as in every stage whose expressions
// read json, rather than becoming nil or a rounded value that map would
// write back silently.

// maxExact is the largest magnitude up to which a float64 holds every
// whole number.
const maxExact = 1 << 53

// NumberError is a JSON number that no int or float64 holds exactly: the
// record fails with it (a record error, never a nil json).
type NumberError struct {
	// Number is the literal as written (shortened if long).
	Number string
	// Whole is true for a whole number beyond 64 bits; false for a number
	// beyond a float64's range.
	Whole bool
}

// Error is one line, for a dead-letter header.
func (e *NumberError) Error() string {
	if e.Whole {
		return fmt.Sprintf("JSON number %s does not fit a 64-bit integer (a float64 would round it): "+
			"have the producer write it as a string, or with an exponent to accept rounding", e.Number)
	}
	return fmt.Sprintf("JSON number %s is out of range: a float64 holds at most ±1.8e308", e.Number)
}

// jsonNumber converts a JSON number literal as described above.
func jsonNumber(lit string) (any, error) {
	i, whole, err := classify(lit)
	switch {
	case err != nil:
		return nil, err
	case whole && (i > maxExact || i < -maxExact):
		return int(i), nil
	case whole:
		return float64(i), nil
	}
	return strconv.ParseFloat(lit, 64) // checked by classify
}

// classify checks a number literal: whole says it is written without
// fraction or exponent, and i is then its value.
func classify(lit string) (i int64, whole bool, err error) {
	if !strings.ContainsAny(lit, ".eE") {
		i, err := strconv.ParseInt(lit, 10, strconv.IntSize)
		if err != nil {
			return 0, true, &NumberError{Number: shorten(lit), Whole: true}
		}
		return i, true, nil
	}
	if _, err := strconv.ParseFloat(lit, 64); err != nil { // ErrRange: ±Inf (too small becomes 0, no error)
		return 0, false, &NumberError{Number: shorten(lit)}
	}
	return 0, false, nil
}

func shorten(lit string) string {
	if len(lit) <= 40 {
		return strings.Clone(lit)
	}
	return lit[:38] + "…"
}

// convertNumbers replaces the json.Numbers in x, in place.
func convertNumbers(x any) (any, error) {
	switch v := x.(type) {
	case json.Number:
		return jsonNumber(string(v))
	case map[string]any:
		for k, e := range v {
			c, err := convertNumbers(e)
			if err != nil {
				return nil, err
			}
			v[k] = c
		}
	case []any:
		for i, e := range v {
			c, err := convertNumbers(e)
			if err != nil {
				return nil, err
			}
			v[i] = c
		}
	}
	return x, nil
}

// scanNumbers returns the *NumberError of the first number in v, a valid
// JSON text, that cannot be held, or nil. It reads v once, without
// decoding it (the json stage's check). big says v has a whole number a
// float64 would round.
func scanNumbers(v []byte) (big bool, err error) {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			for i++; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' {
					i++
				}
			}
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(v) && strings.IndexByte("0123456789.eE+-", v[j]) >= 0 {
				j++
			}
			n, whole, err := classify(bytesString(v[i:j])) // not kept: errors copy it
			if err != nil {
				return false, err
			}
			big = big || whole && (n > maxExact || n < -maxExact)
			i = j - 1
		}
	}
	return big, nil
}
