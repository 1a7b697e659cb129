package logging

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// recorder is a stages.Logger that keeps every entry as a line.
type recorder struct{ lines []string }

func (r *recorder) add(level, msg string, kv []any) {
	r.lines = append(r.lines, strings.TrimSpace(fmt.Sprint(level, " ", msg, " ", kv)))
}
func (r *recorder) Debug(msg string, kv ...any) { r.add("debug", msg, kv) }
func (r *recorder) Info(msg string, kv ...any)  { r.add("info", msg, kv) }
func (r *recorder) Warn(msg string, kv ...any)  { r.add("warn", msg, kv) }
func (r *recorder) Error(msg string, kv ...any) { r.add("error", msg, kv) }

// TestRateLimited: per message, burst warnings or errors pass a period;
// the next one to pass says how many were left out, and Flush writes what
// is still pending. Debug and Info are never limited.
func TestRateLimited(t *testing.T) {
	type step struct {
		at    time.Duration // since the start
		level string
		msg   string
	}
	tests := []struct {
		name  string
		steps []step
		flush bool
		want  []string
	}{
		{"a burst passes, the rest is counted in the next period",
			[]step{{0, "warn", "a"}, {1, "warn", "a"}, {2, "warn", "a"}, {3, "warn", "a"}, {11 * time.Second, "warn", "a"}}, false,
			[]string{"warn a [k 0]", "warn a [k 1]", "warn a [k 4 suppressed 2]"}},
		{"messages are limited apart", []step{{0, "warn", "a"}, {0, "warn", "a"}, {0, "error", "b"}, {0, "warn", "a"}}, false,
			[]string{"warn a [k 0]", "warn a [k 1]", "error b [k 2]"}},
		{"flush writes what is pending, at the message's level",
			[]step{{0, "error", "b"}, {0, "error", "b"}, {0, "error", "b"}, {0, "error", "b"}, {0, "error", "b"}}, true,
			[]string{"error b [k 0]", "error b [k 1]", "error b [suppressed 3]"}},
		{"debug and info pass", []step{{0, "info", "i"}, {0, "info", "i"}, {0, "info", "i"}, {0, "debug", "d"}, {0, "debug", "d"}, {0, "debug", "d"}}, true,
			[]string{"info i [k 0]", "info i [k 1]", "info i [k 2]", "debug d [k 3]", "debug d [k 4]", "debug d [k 5]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			start := time.Unix(1000, 0)
			now := start
			l := RateLimited(rec, 2, 10*time.Second)
			l.now = func() time.Time { return now }
			for i, s := range tt.steps {
				now = start.Add(s.at)
				map[string]func(string, ...any){"debug": l.Debug, "info": l.Info, "warn": l.Warn, "error": l.Error}[s.level](s.msg, "k", i)
			}
			if tt.flush {
				l.Flush()
				l.Flush() // nothing pending twice
			}
			if !slices.Equal(rec.lines, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(rec.lines, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
