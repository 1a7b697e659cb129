package fastjson

import (
	"fmt"
	"strconv"
	"strings"
)

// A JSON number decodes to an int when written as a whole number (no
// fraction, no exponent), else to a float64 (see jsonNumber). A number
// neither holds (1e400, or a whole number beyond 64 bits) refuses the
// whole value with a *NumberError, rather than becoming nil or a rounded
// value that a stage would write back silently.

// NumberError is a JSON number that no int or float64 holds exactly:
// Parse, Doc.Err and Doc.Value report the first such number of a value
// (in text order), and the stages fail the record with it (a record
// error, never a nil json).
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

// classify reads a number literal: whole says it is written without
// fraction or exponent, and i is then its value; else f is. err is the
// *NumberError of a number neither an int64 nor a float64 holds.
func classify(lit string) (i int64, f float64, whole bool, err error) {
	if isWhole(lit) {
		i, err := strconv.ParseInt(lit, 10, strconv.IntSize) // an int holds it
		if err != nil {
			return 0, 0, true, &NumberError{Number: shorten(lit), Whole: true}
		}
		return i, 0, true, nil
	}
	f, err = strconv.ParseFloat(lit, 64)
	if err != nil { // ErrRange: ±Inf (too small becomes 0, no error)
		return 0, 0, false, &NumberError{Number: shorten(lit)}
	}
	return 0, f, false, nil
}

// isWhole reports whether a number literal has neither fraction nor
// exponent.
func isWhole(lit string) bool {
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

func shorten(lit string) string {
	if len(lit) <= 40 {
		return strings.Clone(lit)
	}
	return lit[:38] + "…"
}
