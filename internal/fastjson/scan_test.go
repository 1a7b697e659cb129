package fastjson

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/shopevents"
)

// BenchmarkScanJSON checks values as the json stage does per record:
// bench/compare's shop events (short strings) and values with longer
// text (a 120-byte description and a URL).
func BenchmarkScanJSON(b *testing.B) {
	for _, c := range []struct {
		name  string
		value func(i int64) []byte
	}{
		{"shop", shopevents.Value},
		{"text", func(i int64) []byte {
			return []byte(fmt.Sprintf(`{"id":%d,"title":"Item number %d of the catalogue","description":"A longer description of the item, as `+
				`product feeds carry: materials, sizes and care instructions, %d","url":"https://shop.example.com/items/%d?ref=feed"}`, i, i, i, i))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			values := make([][]byte, 1000)
			n := 0
			for i := range values {
				values[i] = c.value(int64(i))
				n += len(values[i])
			}
			b.SetBytes(int64(n))
			for b.Loop() {
				for _, v := range values {
					if !scanJSON(v).valid {
						b.Fatal("invalid")
					}
				}
			}
		})
	}
}

// FuzzScanFastPathsMatchGeneral holds the object check's fast paths to
// the general scanners at any position of any bytes: unescapedString
// either declines (-1) or ends the string where scanString's byte loop
// does, and declines only for a string with an escape or none at all;
// scanNumber's verdict that a number surely fits, found in the same pass
// as its end, is the rule written on the whole literal (holdableByRule).
func FuzzScanFastPathsMatchGeneral(f *testing.F) {
	for _, s := range []string{`"abc"`, `"abcdefghijk"`, `"abcdefg\"x"`, `"a\u0041"`, "\"ab\x01c\"", `"héllo wörld, longer"`,
		`12`, `-0.5`, `1234567890123456789`, `123456789012345678`, `1e5`, `0.1E2`, `01`, `-`, `1.`, `"` + strings.Repeat("x", 17) + `"`} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, v []byte, at uint8) {
		i := int(at)
		if i >= len(v) {
			return
		}
		if v[i] == '"' {
			got, want := unescapedString(v, i), escapedString(v, i)
			switch {
			case got >= 0 && got != want:
				t.Fatalf("unescapedString(%q, %d) = %d; the byte loop ends the string at %d", v, i, got, want)
			case got < 0 && want >= 0 && !bytes.Contains(v[i+1:want], []byte{'\\'}):
				t.Fatalf("unescapedString(%q, %d) declined a string without escape ending at %d", v, i, want)
			}
			if s := scanString(v, i); s != want {
				t.Fatalf("scanString(%q, %d) = %d; the byte loop says %d", v, i, s, want)
			}
		}
		if end, sure := scanNumber(v, i); end >= 0 && sure != holdableByRule(v[i:end]) {
			t.Fatalf("scanNumber(%q, %d) = %d, sure %v; the rule on %q says %v", v, i, end, sure, v[i:end], !sure)
		}
	})
}

// holdableByRule is the rule scanNumber applies as it reads, written on
// the whole literal lit (valid): a whole number of at most 18 digits, or
// a fraction without exponent shorter than 300 bytes.
func holdableByRule(lit []byte) bool {
	if len(lit) >= 300 || bytes.ContainsAny(lit, "eE") {
		return false
	}
	digits := len(lit)
	if lit[0] == '-' {
		digits--
	}
	return bytes.IndexByte(lit, '.') >= 0 || digits <= 18
}

// TestSurelyHoldable: what scanJSON does not parse, classify accepts.
func TestSurelyHoldable(t *testing.T) {
	for _, lit := range []string{"0", "-0", "999999999999999999", "-999999999999999999", "9223372036854775807",
		"9223372036854775808", "-9223372036854775809", "1.5", "-0.0", "1e400", "1E2", "2.5e-3",
		strings.Repeat("9", 299) + ".5", strings.Repeat("9", 310) + ".5", strings.Repeat("9", 298) + ".5"} {
		if end, sure := scanNumber([]byte(lit), 0); end != len(lit) || !sure {
			continue
		}
		if _, _, _, err := classify(lit); err != nil {
			t.Errorf("%.40s: surely holdable, but classify says %v", lit, err)
		}
	}
}
