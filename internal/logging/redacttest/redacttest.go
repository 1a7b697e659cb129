// Package redacttest finds secrets in output, for tests of redaction. It
// is written apart from logging.Redactor (other code, the fmt and
// encoding/json escapes rather than strconv and zap's), so that a test
// using it checks the redactor rather than repeating it.
package redacttest

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Marker is the text redaction writes in place of a secret.
const Marker = "[redacted]"

// Min and MinSecret are the promise checked: every run of Min runes of
// a secret, and a whole secret of MinSecret runes or more, is hidden.
const (
	Min       = 4
	MinSecret = 3
)

// Leak returns the first part of secret that out shows, as out shows it
// (as is, escaped as by %q, %+q or JSON, or YAML single-quoted), or ""
// if none. The parts are every run of Min runes of secret (an invalid
// byte counts as a rune), or secret itself if it is shorter, except a
// part of only white space; a secret shorter than MinSecret runes is not
// looked for. Text Marker stands for
// is cut out of out first: a secret that reads on into the marker is not
// shown.
func Leak(out, secret string) string {
	var runes []string
	for s := secret; s != ""; {
		_, n := utf8.DecodeRuneInString(s)
		runes, s = append(runes, s[:n]), s[n:]
	}
	if len(runes) < MinSecret {
		return ""
	}
	n := min(Min, len(runes))
	pieces := strings.Split(out, Marker)
	for i := 0; i+n <= len(runes); i++ {
		w := strings.Join(runes[i:i+n], "")
		if strings.TrimSpace(w) == "" {
			continue // white space is not hidden
		}
		for _, f := range forms(w) {
			for _, p := range pieces {
				if strings.Contains(p, f) {
					return f
				}
			}
		}
	}
	return ""
}

func forms(w string) []string {
	js, _ := json.Marshal(w)
	q, aq := fmt.Sprintf("%q", w), fmt.Sprintf("%+q", w)
	return []string{w, q[1 : len(q)-1], aq[1 : len(aq)-1], string(js[1 : len(js)-1]), strings.ReplaceAll(w, "'", "''")}
}

// JSONLeak is Leak for a JSON log line: it decodes the line and looks in
// every key and string (and number) in it, as a reader of the log sees
// them. A line that is not JSON is looked at as written.
func JSONLeak(line, secret string) string {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return Leak(line, secret)
	}
	return inValue(v, secret)
}

func inValue(v any, secret string) string {
	switch x := v.(type) {
	case string:
		return Leak(x, secret)
	case json.Number:
		return Leak(string(x), secret)
	case []any:
		for _, e := range x {
			if l := inValue(e, secret); l != "" {
				return l
			}
		}
	case map[string]any:
		for k, e := range x {
			if l := Leak(k, secret); l != "" {
				return l
			}
			if l := inValue(e, secret); l != "" {
				return l
			}
		}
	}
	return ""
}

// ConsoleLeak is Leak for a line of zap's console encoder: the
// encoder's own columns (time, level), its message as written, and the
// JSON of its fields (after the last tab followed by a JSON object)
// decoded as JSONLeak does, each looked at on its own: a run of the
// secret that only the encoder's column and the tab after it make
// together with the message's first bytes (a secret "\t00" and a
// message starting "00") is in neither.
func ConsoleLeak(line, secret string) string {
	line = strings.TrimSuffix(line, "\n")
	if i := strings.LastIndex(line, "\t{"); i >= 0 && json.Valid([]byte(line[i+1:])) {
		if l := JSONLeak(line[i+1:], secret); l != "" {
			return l
		}
		line = line[:i]
	}
	if head, message, ok := levelColumn(line); ok {
		if l := Leak(head, secret); l != "" {
			return l
		}
		line = message
	}
	return Leak(line, secret)
}

// levelColumn splits a console line after its level column (zap's
// level names, in either case, first on the line or after a tab, and
// followed by a tab): the columns up to it, and the message after the
// tab. ok is false for a line without one.
func levelColumn(line string) (head, message string, ok bool) {
	start, end := len(line), -1 // of the first level name found
	for _, level := range []string{"DEBUG", "INFO", "WARN", "ERROR", "DPANIC", "PANIC", "FATAL"} {
		for _, name := range []string{level, strings.ToLower(level)} {
			for from := 0; from < start; {
				i := strings.Index(line[from:], name+"\t")
				if i < 0 {
					break
				}
				if i += from; i == 0 || line[i-1] == '\t' {
					if i < start {
						start, end = i, i+len(name)
					}
					break
				}
				from = i + 1
			}
		}
	}
	if end < 0 {
		return "", "", false
	}
	return line[:end], line[end+1:], true
}
