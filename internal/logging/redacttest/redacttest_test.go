package redacttest

import "testing"

// TestConsoleLeak: a secret in the message, the fields or a raw tab of
// the message is found; a run that only the level column's tab and the
// message's first bytes make together is not.
func TestConsoleLeak(t *testing.T) {
	for _, c := range []struct {
		line, secret, want string
	}{
		{"INFO\tlogin with s3cret failed", "s3cret", "s3cr"},
		{"2026-12-02T10:00:00Z\tWARN\tuse ab\tcd here", "ab\tcd", "ab\tc"},
		{"INFO\tmsg\t{\"v\":\"x s3cret\"}", "s3cret", "s3cr"},
		{"debug\tthe [redacted] one\t{\"error\":\"s3cret\"}", "s3cret", "s3cr"},
		{"INFO\t00 [redacted]\t{\"v\": \"00 [redacted]\"}", "\t00", ""},
		{"ERROR\t00 [redacted]", "R\t00", ""},
		{"no level column s3cret", "s3cret", "s3cr"},
	} {
		if got := ConsoleLeak(c.line, c.secret); got != c.want {
			t.Errorf("ConsoleLeak(%q, %q) = %q, want %q", c.line, c.secret, got, c.want)
		}
	}
}
