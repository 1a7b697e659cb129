package logging_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fencepost-dev/fencepost/internal/logging"
	"github.com/fencepost-dev/fencepost/internal/logging/redacttest"
)

// TestRedact: every form text shows a secret in is hidden, a fragment of
// MinFragment runes or more too; what is not part of a secret is kept.
func TestRedact(t *testing.T) {
	js := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	cases := []struct {
		name, secret, in, want string
	}{
		{"raw", "hunter2", "password hunter2 refused", "password [redacted] refused"},
		{"%q", `pa"ss`, fmt.Sprintf("%q is not host:port", `pa"ss`), `"[redacted]" is not host:port`},
		{"%q with a port", `pa"ss`, fmt.Sprintf("%q is not host:port", `pa"ss:9092`), `"[redacted]:9092" is not host:port`},
		{"%+q", "pä\tss", fmt.Sprintf("%+q!", "pä\tss"), `"[redacted]"!`},
		{"JSON", "a<b>\"c\u2028", "v=" + js("a<b>\"c\u2028"), `v="[redacted]"`},
		{"YAML single-quoted", "it's-me", "'it''s-me'", "'[redacted]'"},
		{"URL", "a b/c?d", "http://h/?p=a+b%2Fc%3Fd", "http://h/?p=[redacted]"},
		{"tab raw", "hunter2\ts3cret", "unexpected hunter2\ts3cret", "unexpected [redacted]"},
		{"tokens", "hunter2 s3cret", `unexpected token Identifier("s3cret") in hunter2`, `unexpected token Identifier("[redacted]") in [redacted]`},
		{"short tokens shown", "ab cd ef", "unknown name cd", "unknown name cd"},
		{"three-rune secret whole", "x9z", "value x9z and x9", "value [redacted] and x9"},
		{"two-rune secret ignored", "ab", "ab", "ab"},
		{"adjacent parts become one", "abcdefgh", "efghabcd", "[redacted]"},
		{"invalid UTF-8", "ab\xffcd", fmt.Sprintf("%q", "ab\xffcd"), `"[redacted]"`},
		{"within a word: the word", "-interf!", "for every interface", "for every [redacted]"},
		{"nothing", "hunter2", "nothing to hide here", "nothing to hide here"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := logging.NewRedactor(c.secret)
			got := r.Redact(c.in)
			if got != c.want {
				t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
			}
			if leak := redacttest.Leak(got, c.secret); leak != "" {
				t.Errorf("%q shows %q", got, leak)
			}
			if r.Leaks(got) {
				t.Errorf("Leaks(%q) after Redact", got)
			}
		})
	}
	if r := logging.NewRedactor("", "ab"); r != nil || r.Redact("ab") != "ab" || r.Leaks("ab") {
		t.Errorf("a redactor of nothing hides something")
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

type wrapped struct{ err error }

func (w wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }
func (w wrapped) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, "verbose %q", w.err.Error())
}

// logAll logs secret through l in every shape a field can take.
func logAll(l *zap.Logger, secret string) {
	q := strconv.Quote(secret)
	l = l.With(zap.String("with", "w "+secret))
	l.Info("message "+q+" ends", zap.String("s", secret), zap.String("plain", "kept"))
	l.Named("stage-" + secret).Warn("named")
	l.Error("errors", zap.Error(fmt.Errorf("broker %q: refused", secret)), zap.NamedError("cause", wrapped{errors.New(secret)}))
	l.Info("values", zap.Stringer("str", stringer(secret)), zap.ByteString("bytes", []byte(secret)),
		zap.Any("map", map[string]any{"k": secret, secret: 1}), zap.Strings("list", []string{"a", q}),
		zap.Reflect("struct", struct{ A, B string }{secret, "b"}), zap.Int("n", 42))
	l.Info("namespace", zap.Namespace("ns"), zap.String("in", secret))
	l.Info(secret, zap.String(secret, secret))
}

// TestRedactCore: the run's logger hides a secret in the message, the
// logger name and every kind of field, in both encoders, and leaves the
// rest as it was.
func TestRedactCore(t *testing.T) {
	for _, secret := range []string{"hunter2", `pa"ss\word`, "tab\there", "nl\nü\u2028<&>", "1618033"} {
		for _, format := range []string{"console", "json"} {
			t.Run(fmt.Sprintf("%s/%q", format, secret), func(t *testing.T) {
				var buf bytes.Buffer
				logAll(newLogger(&buf, format, logging.NewRedactor(secret)), secret)
				checkLines(t, buf.String(), format, secret)
				if !strings.Contains(buf.String(), "kept") || !strings.Contains(buf.String(), "42") {
					t.Errorf("fields without a secret were changed:\n%s", buf.String())
				}
			})
		}
	}
	// Without a redactor, the same lines show the secret: the check
	// finds what it looks for.
	var buf bytes.Buffer
	logAll(newLogger(&buf, "json", nil), `pa"ss`)
	if redacttest.JSONLeak(strings.Split(buf.String(), "\n")[0], `pa"ss`) == "" {
		t.Fatal("the check does not see a secret logged as is")
	}
}

func newLogger(w *bytes.Buffer, format string, r *logging.Redactor) *zap.Logger {
	// No time: a secret of digits would be found in it by chance.
	var enc zapcore.Encoder
	if format == "json" {
		ec := zap.NewProductionEncoderConfig()
		ec.TimeKey = ""
		enc = zapcore.NewJSONEncoder(ec)
	} else {
		ec := zap.NewDevelopmentEncoderConfig()
		ec.TimeKey = ""
		enc = zapcore.NewConsoleEncoder(ec)
	}
	return zap.New(r.Core(zapcore.NewCore(enc, zapcore.AddSync(w), zapcore.DebugLevel)))
}

func checkLines(t *testing.T, out, format, secret string) {
	t.Helper()
	if out == "" {
		t.Fatal("nothing logged")
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		leak := redacttest.ConsoleLeak(line, secret)
		if format == "json" {
			if !json.Valid([]byte(line)) {
				t.Errorf("not JSON: %s", line)
			}
			leak = redacttest.JSONLeak(line, secret)
		}
		if leak != "" {
			t.Errorf("%q shows %q", line, leak)
		}
	}
}

// FuzzRedact: a random secret shown in any form, inside random text, is
// hidden by Redact and in both encoders' log lines.
func FuzzRedact(f *testing.F) {
	f.Add(`pa"ss`, "x:", ":9092", uint8(1))
	f.Add("hunter2\ts3cret", "unexpected ", "", uint8(0))
	f.Add("ü\u2028<&>'\\", "a", "b", uint8(3))
	f.Add("line1\nline2\r\x00\xff", "", "", uint8(4))
	f.Add("secret", "se", "cret", uint8(5))
	f.Fuzz(func(t *testing.T, secret, before, after string, form uint8) {
		show := []func(string) string{
			func(s string) string { return s },
			strconv.Quote, strconv.QuoteToASCII,
			func(s string) string { b, _ := json.Marshal(s); return string(b) },
			func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" },
			func(s string) string { // a fragment of it
				rs := []rune(s)
				return string(rs[len(rs)/3:])
			},
		}[int(form)%6]
		r := logging.NewRedactor(secret)
		text := before + show(secret) + after
		got := r.Redact(text)
		if leak := redacttest.Leak(got, secret); leak != "" {
			t.Fatalf("Redact(%q) = %q shows %q", text, got, leak)
		}
		if r.Leaks(got) {
			t.Fatalf("Redact(%q) = %q, which Leaks", text, got)
		}
		for _, format := range []string{"console", "json"} {
			var buf bytes.Buffer
			l := newLogger(&buf, format, r)
			l.Info(text, zap.String("v", text), zap.Error(errors.New(text)))
			logAll(l, secret)
			checkLines(t, buf.String(), format, secret)
		}
	})
}
