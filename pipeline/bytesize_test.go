package pipeline_test

import (
	"testing"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// FuzzByteSize parses arbitrary text as a size: no panic; an accepted
// size is not negative and its String reads back as itself; a refused
// one leaves the value as it was.
func FuzzByteSize(f *testing.F) {
	for _, s := range []string{"512", "64KiB", "1MiB", "2 GiB", "0", "17179869184GiB", "8589934591GiB", "64MB", "1mib",
		"-1", "+5KiB", "1.5MiB", " 7 B ", "9223372036854775807", "9223372036854775808", "KiB", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		b := pipeline.ByteSize(-7)
		if err := b.UnmarshalText([]byte(text)); err != nil {
			if b != -7 {
				t.Fatalf("%q: refused (%v) but changed the value to %v", text, err, b)
			}
			if err.Error() == "" {
				t.Fatalf("%q: an empty error", text)
			}
			return
		}
		if b < 0 {
			t.Fatalf("%q: accepted as %d", text, b)
		}
		var back pipeline.ByteSize
		if err := back.UnmarshalText([]byte(b.String())); err != nil || back != b {
			t.Fatalf("%q = %d formats as %q, which reads back as %d (%v)", text, b, b.String(), back, err)
		}
	})
}
