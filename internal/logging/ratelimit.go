package logging

import (
	"sync"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

// maxWindows bounds how many distinct messages a Limiter tracks; past it,
// entries of new messages pass unlimited (messages are usually constants,
// so this is only reached by a logger that formats values into them).
const maxWindows = 1024

// Limiter is a stages.Logger that rate-limits warnings and errors: of the
// Warn and Error entries with the same message, at most Burst pass per
// Period; the others are counted, and the first entry of that message to
// pass afterwards carries the count as "suppressed" (the entries left out
// since the last one written). Flush writes the counts still pending.
// Debug and Info pass unlimited. It is safe for concurrent use.
type Limiter struct {
	next   stages.Logger
	burst  int
	period time.Duration
	now    func() time.Time

	mu      sync.Mutex
	windows map[string]*window
}

// window is one message's current period.
type window struct {
	start      time.Time
	passed     int
	suppressed int
	error      bool // the message was logged at Error (else Warn)
}

// RateLimited returns a Limiter writing to next that lets burst entries
// of a message pass per period.
func RateLimited(next stages.Logger, burst int, period time.Duration) *Limiter {
	return &Limiter{next: next, burst: max(burst, 1), period: period, now: time.Now, windows: map[string]*window{}}
}

// ForRecords returns the Limiter for what a bad input can log once per
// record (a stage's warnings, the chain's dead-letter notes): five entries
// of a message per ten seconds, with a count of those left out.
func ForRecords(next stages.Logger) *Limiter { return RateLimited(next, 5, 10*time.Second) }

// Debug implements stages.Logger.
func (l *Limiter) Debug(msg string, keyvals ...any) { l.next.Debug(msg, keyvals...) }

// Info implements stages.Logger.
func (l *Limiter) Info(msg string, keyvals ...any) { l.next.Info(msg, keyvals...) }

// Warn implements stages.Logger, rate-limited.
func (l *Limiter) Warn(msg string, keyvals ...any) {
	if kv, ok := l.pass(msg, false, keyvals); ok {
		l.next.Warn(msg, kv...)
	}
}

// Error implements stages.Logger, rate-limited.
func (l *Limiter) Error(msg string, keyvals ...any) {
	if kv, ok := l.pass(msg, true, keyvals); ok {
		l.next.Error(msg, kv...)
	}
}

// pass decides whether an entry is written, and adds the count of those
// suppressed before it.
func (l *Limiter) pass(msg string, isErr bool, keyvals []any) ([]any, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.windows[msg]
	if w == nil {
		if len(l.windows) >= maxWindows {
			l.forgetQuiet(now)
			if len(l.windows) >= maxWindows {
				return keyvals, true
			}
		}
		w = &window{start: now}
		l.windows[msg] = w
	}
	w.error = w.error || isErr
	if now.Sub(w.start) >= l.period {
		w.start, w.passed = now, 0
	}
	if w.passed >= l.burst {
		w.suppressed++
		return nil, false
	}
	w.passed++
	if w.suppressed > 0 {
		keyvals = append(keyvals[:len(keyvals):len(keyvals)], "suppressed", w.suppressed)
		w.suppressed = 0
	}
	return keyvals, true
}

// forgetQuiet drops the windows that ended with nothing suppressed.
func (l *Limiter) forgetQuiet(now time.Time) {
	for msg, w := range l.windows {
		if w.suppressed == 0 && now.Sub(w.start) >= l.period {
			delete(l.windows, msg)
		}
	}
}

// Flush writes, for every message with entries suppressed since its last
// one written, one entry with the count ("suppressed") and nothing else.
// Call it when the logging is done (the run ends).
func (l *Limiter) Flush() {
	l.mu.Lock()
	type pending struct {
		msg   string
		n     int
		error bool
	}
	var out []pending
	for msg, w := range l.windows {
		if w.suppressed > 0 {
			out = append(out, pending{msg, w.suppressed, w.error})
			w.suppressed = 0
		}
	}
	l.mu.Unlock()
	for _, p := range out {
		if p.error {
			l.next.Error(p.msg, "suppressed", p.n)
		} else {
			l.next.Warn(p.msg, "suppressed", p.n)
		}
	}
}
