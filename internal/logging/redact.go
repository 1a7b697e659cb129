package logging

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Redacted is what Redact writes where it hid a secret.
const Redacted = "[redacted]"

// MinFragment is the shortest run of a secret's characters (runes) that
// Redact hides on its own, wherever it appears: a message that shows
// only part of a secret (a token of it in an expression error, the host
// of a host:port) hides every part of MinFragment characters or more.
//
// Why 4: below it, fragments are so common that hiding them would hide
// ordinary words and numbers of every message (most 3-letter runs of a
// password are in English text or port numbers), and what a 3-character
// fragment tells is small (about 20 bits for random printable text, of
// the 80 or more a password of 12 such characters has). A message would
// have to show several such fragments to matter, and each part of an
// error that shows a value shows it whole or in tokens the length of
// its words.
const MinFragment = 4

// MinSecret is the shortest secret (in runes) a Redactor hides: a
// shorter one would hide ordinary text everywhere, and is no secret.
const MinSecret = 3

// forms are the ways text can show a value: as it is, escaped as Go's
// %q, %+q and strconv.QuoteToGraphic do, as JSON strings (encoding/json
// with and without HTML escaping, zap's encoders), as YAML single-quoted
// text, and URL-escaped. Each escapes rune by rune, so the form of a
// part of a secret is the same part of the form of the whole.
var forms = []func(string) string{
	func(s string) string { return s },
	func(s string) string { return inner(strconv.Quote(s)) },
	func(s string) string { return inner(strconv.QuoteToASCII(s)) },
	func(s string) string { return inner(strconv.QuoteToGraphic(s)) },
	func(s string) string { return jsonString(s, true) },
	func(s string) string { return jsonString(s, false) },
	zapString,
	func(s string) string { return strings.ReplaceAll(s, "'", "''") },
	url.PathEscape,
	url.QueryEscape,
}

func inner(q string) string { return q[1 : len(q)-1] }

func jsonString(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(s) // a string always encodes
	return inner(strings.TrimSuffix(b.String(), "\n"))
}

// zapEncoder writes only the message, so zapString can cut it out.
var zapEncoder = zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "m"})

// zapString is s as zap's encoders escape a string.
func zapString(s string) string {
	buf, err := zapEncoder.Clone().EncodeEntry(zapcore.Entry{Message: s}, nil)
	if err != nil {
		return s
	}
	defer buf.Free()
	out := strings.TrimSuffix(buf.String(), "\n")
	return strings.TrimSuffix(strings.TrimPrefix(out, `{"m":"`), `"}`)
}

// Redactor hides secrets in text: every form (see forms) of every run
// of at least MinFragment characters of a secret, and of a whole secret
// of MinSecret characters or more, unless that run is only white space.
// A nil *Redactor hides nothing. It is safe for concurrent use.
type Redactor struct {
	// needles are what to hide, by their first keyLen bytes.
	needles map[string][]string
	// numeric is set if a needle could be part of how a number, a
	// duration or a time is written: only then are such fields checked.
	numeric bool
}

// numberChars are the characters numbers, durations and times are
// written with, in either encoder.
const numberChars = "0123456789.-+:eETZ"

// keyLen is the length of the shortest needle in bytes (MinSecret runes
// of at least one byte each).
const keyLen = MinSecret

// NewRedactor returns a Redactor for secrets; one shorter than
// MinSecret characters is ignored. It returns nil if there is nothing to
// hide.
func NewRedactor(secrets ...string) *Redactor {
	set := map[string]bool{}
	for _, s := range secrets {
		pieces := splitRunes(s)
		if len(pieces) < MinSecret {
			continue
		}
		n := min(MinFragment, len(pieces))
		for _, form := range forms {
			// The form of the whole, and where each rune's form starts.
			var b strings.Builder
			offs := make([]int, 0, len(pieces)+1)
			for _, p := range pieces {
				offs = append(offs, b.Len())
				b.WriteString(form(p))
			}
			offs = append(offs, b.Len())
			whole := b.String()
			for i := 0; i+n < len(offs); i++ {
				if w := whole[offs[i]:offs[i+n]]; len(w) >= keyLen && !blank(pieces[i:i+n]) {
					set[w] = true
				}
			}
		}
	}
	if len(set) == 0 {
		return nil
	}
	r := &Redactor{needles: map[string][]string{}}
	for w := range set {
		r.needles[w[:keyLen]] = append(r.needles[w[:keyLen]], w)
		r.numeric = r.numeric || strings.Trim(w, numberChars) == ""
	}
	return r
}

// blank says whether the runes are all white space: such a run is not
// hidden (indentation is everywhere, and tells nothing).
func blank(runes []string) bool {
	for _, r := range runes {
		if strings.TrimSpace(r) != "" {
			return false
		}
	}
	return true
}

// splitRunes splits s into its runes as text, an invalid byte being one.
func splitRunes(s string) []string {
	out := make([]string, 0, len(s))
	for len(s) > 0 {
		_, size := utf8.DecodeRuneInString(s)
		out = append(out, s[:size])
		s = s[size:]
	}
	return out
}

// Redact returns s with every part that shows a secret replaced by
// Redacted. A part within a word is hidden with the rest of the word
// (letters, digits and _ around it): "i[redacted]face" would tell which
// letters of a known text are part of a secret. Adjacent and overlapping
// parts become one.
func (r *Redactor) Redact(s string) string {
	if r == nil || len(s) < keyLen {
		return s
	}
	var runs [][2]int // to hide, in order, not overlapping
	for i := 0; i+keyLen <= len(s); i++ {
		for _, w := range r.needles[s[i:i+keyLen]] {
			if !strings.HasPrefix(s[i:], w) {
				continue
			}
			start, end := wordStart(s, i), wordEnd(s, i+len(w))
			if n := len(runs); n > 0 && start <= runs[n-1][1] {
				runs[n-1][1] = max(runs[n-1][1], end)
			} else {
				runs = append(runs, [2]int{start, end})
			}
		}
	}
	if len(runs) == 0 {
		return s
	}
	var b strings.Builder
	copied := 0
	for _, run := range runs {
		b.WriteString(s[copied:run[0]])
		b.WriteString(Redacted)
		copied = run[1]
	}
	b.WriteString(s[copied:])
	return b.String()
}

func isWord(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// wordStart is where the word holding s[i] starts (i if s[i-1] is not
// part of a word).
func wordStart(s string, i int) int {
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !isWord(r) {
			break
		}
		i -= n
	}
	return i
}

// wordEnd is where the word holding s[i-1] ends.
func wordEnd(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isWord(r) {
			break
		}
		i += n
	}
	return i
}

// Leaks reports whether s shows a part of a secret that Redact would
// hide.
func (r *Redactor) Leaks(s string) bool {
	if r == nil {
		return false
	}
	for i := 0; i+keyLen <= len(s); i++ {
		for _, w := range r.needles[s[i:i+keyLen]] {
			if strings.HasPrefix(s[i:], w) {
				return true
			}
		}
	}
	return false
}

// Writer returns a writer that redacts each Write to w on its own: give
// it whole lines of text (one Fprintf each). It reports len(p) written
// when w took the whole redacted text. A nil Redactor returns w.
func (r *Redactor) Writer(w io.Writer) io.Writer {
	if r == nil {
		return w
	}
	return redactWriter{w: w, r: r}
}

type redactWriter struct {
	w io.Writer
	r *Redactor
}

func (rw redactWriter) Write(p []byte) (int, error) {
	s := rw.r.Redact(string(p))
	n, err := io.WriteString(rw.w, s)
	if err == nil && n < len(s) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Core returns c with every entry redacted before c encodes it: the
// message, the logger's name, and each field, in either encoder (the
// fields are redacted as values, before any escaping). A field showing a
// secret becomes a string field of its redacted text (an error field,
// its redacted message). A nil Redactor returns c.
func (r *Redactor) Core(c zapcore.Core) zapcore.Core {
	if r == nil {
		return c
	}
	return &redactCore{Core: c, r: r}
}

type redactCore struct {
	zapcore.Core
	r *Redactor
}

func (c *redactCore) With(fields []zapcore.Field) zapcore.Core {
	return &redactCore{Core: c.Core.With(c.r.fields(fields)), r: c.r}
}

func (c *redactCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Core.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *redactCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	e.Message = c.r.Redact(e.Message)
	e.LoggerName = c.r.Redact(e.LoggerName)
	return c.Core.Write(e, c.r.fields(fields))
}

// fields returns fields with each one that shows a secret replaced.
func (r *Redactor) fields(fields []zapcore.Field) []zapcore.Field {
	var out []zapcore.Field
	for i, f := range fields {
		g, changed := r.field(f)
		if changed && out == nil {
			out = append(make([]zapcore.Field, 0, len(fields)), fields[:i]...)
		}
		if out != nil {
			out = append(out, g)
		}
	}
	if out == nil {
		return fields
	}
	return out
}

// fieldEncoder renders one field as JSON (no entry keys).
var fieldEncoder = zapcore.NewJSONEncoder(zapcore.EncoderConfig{})

func (r *Redactor) field(f zapcore.Field) (zapcore.Field, bool) {
	switch f.Type {
	case zapcore.SkipType, zapcore.NamespaceType, zapcore.BoolType:
		return f, false
	case zapcore.Int64Type, zapcore.Int32Type, zapcore.Int16Type, zapcore.Int8Type,
		zapcore.Uint64Type, zapcore.Uint32Type, zapcore.Uint16Type, zapcore.Uint8Type, zapcore.UintptrType,
		zapcore.Float64Type, zapcore.Float32Type, zapcore.DurationType, zapcore.TimeType, zapcore.TimeFullType:
		if !r.numeric && !r.Leaks(f.Key) {
			return f, false // written with numberChars only: cannot show a secret
		}
	case zapcore.StringType:
		key, s := r.Redact(f.Key), r.Redact(f.String)
		changed := key != f.Key || s != f.String
		f.Key, f.String = key, s
		return f, changed
	case zapcore.ErrorType:
		if err, ok := f.Interface.(error); ok && err != nil {
			if r.Leaks(f.Key) || r.leaksValue(f) {
				return zap.String(r.Redact(f.Key), r.Redact(err.Error())), true
			}
		}
		return f, false
	}
	if !r.Leaks(f.Key) && !r.leaksValue(f) {
		return f, false
	}
	v, ok := r.render(f)
	if !ok {
		return zap.String(r.Redact(f.Key), Redacted), true
	}
	return zap.Any(r.Redact(f.Key), r.redactValue(v)), true
}

// render returns the field's value as JSON decodes it, numbers as
// json.Number.
func (r *Redactor) render(f zapcore.Field) (any, bool) {
	buf, err := fieldEncoder.Clone().EncodeEntry(zapcore.Entry{}, []zapcore.Field{f})
	if err != nil {
		return nil, false
	}
	defer buf.Free()
	dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return nil, false
	}
	// The field's keys: its own, and the error encoder's extras
	// (errorVerbose, errorCauses).
	if len(m) == 1 {
		for _, v := range m {
			return v, true
		}
	}
	return m, true
}

// leaksValue reports whether the field's value, rendered, shows a secret
// (in any string in it, unescaped, or a number).
func (r *Redactor) leaksValue(f zapcore.Field) bool {
	v, ok := r.render(f)
	if !ok {
		return true // cannot tell: treat as showing one
	}
	return r.leaksIn(v)
}

func (r *Redactor) leaksIn(v any) bool {
	switch x := v.(type) {
	case string:
		return r.Leaks(x)
	case json.Number:
		return r.Leaks(string(x))
	case []any:
		for _, e := range x {
			if r.leaksIn(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if r.Leaks(k) || r.leaksIn(e) {
				return true
			}
		}
	}
	return false
}

func (r *Redactor) redactValue(v any) any {
	switch x := v.(type) {
	case string:
		return r.Redact(x)
	case json.Number:
		if r.Leaks(string(x)) {
			return r.Redact(string(x))
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.redactValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.Redact(k)] = r.redactValue(e)
		}
		return out
	}
	return v
}
