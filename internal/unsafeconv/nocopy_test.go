//go:build !purego

package unsafeconv

import "testing"

var (
	sinkString string
	sinkBytes  []byte
	sinkAny    any
)

// TestNoCopy: the default build shares memory rather than copying: no
// conversion allocates, and a string shares its slice's bytes.
func TestNoCopy(t *testing.T) {
	b := []byte("some record value")
	s, i, f := "a string", 1000, 2.5
	for name, fn := range map[string]func(){
		"String":     func() { sinkString = String(b) },
		"Bytes":      func() { sinkBytes = Bytes(s) },
		"BoxString":  func() { sinkAny = BoxString(&s) },
		"BoxInt":     func() { sinkAny = BoxInt(&i) },
		"BoxFloat64": func() { sinkAny = BoxFloat64(&f) },
	} {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocations, want none", name, n)
		}
	}
	if Bytes(s)[0] != s[0] || &Bytes(String(b))[0] != &b[0] {
		t.Error("String and Bytes do not share the memory they were given")
	}
}
