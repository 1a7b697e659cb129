package builtin

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// The windows of the aggregate stage: their option, and which windows a
// record falls in. Times are epoch milliseconds (see eventtime.go).

// windowKind is the type of an aggregate's windows.
type windowKind uint8

const (
	noWindow windowKind = iota // a running aggregate per key
	tumbling
	hopping
	session
)

var windowKinds = map[string]windowKind{"tumbling": tumbling, "hopping": hopping, "session": session}

// windowSpec is an aggregate's window option, durations in milliseconds.
type windowSpec struct {
	kind                      windowKind
	size, advance, gap, grace int64
}

// maxHops bounds how many hopping windows one record falls into
// (size / advance).
const maxHops = 1000

// parseWindow reads the window option (a map of strings).
func parseWindow(m map[string]string) (windowSpec, error) {
	var w windowSpec
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	known := []string{"type", "size", "advance", "gap", "grace"}
	for _, k := range keys {
		if k == "idle_close" {
			return w, errors.New("idle_close is not available yet: windows close on event time only (stream time per partition)")
		}
		if !slices.Contains(known, k) {
			return w, fmt.Errorf("window has no key %q (its keys: %s)", k, strings.Join(known, ", "))
		}
	}
	typ, ok := m["type"]
	if !ok {
		return w, errors.New("window needs a type: tumbling, hopping or session")
	}
	if w.kind, ok = windowKinds[typ]; !ok {
		return w, fmt.Errorf("window type %q is not one of tumbling, hopping, session", typ)
	}
	dur := func(key string, positive bool) (int64, error) {
		s, ok := m[key]
		if !ok {
			return 0, nil
		}
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return 0, fmt.Errorf("window %s: %q is not a duration (write 30s, 5m, 1h)", key, s)
		case d%time.Millisecond != 0:
			return 0, fmt.Errorf("window %s: %s is not a whole number of milliseconds", key, s)
		case d < 0:
			return 0, fmt.Errorf("window %s: %s is negative", key, s)
		case positive && d == 0:
			return 0, fmt.Errorf("window %s: must be longer than 0", key)
		}
		return d.Milliseconds(), nil
	}
	var err error
	need := func(key string, wanted bool) error {
		_, has := m[key]
		switch {
		case wanted && !has:
			return fmt.Errorf("a %s window needs %s", typ, key)
		case !wanted && has:
			return fmt.Errorf("a %s window has no %s (%s)", typ, key, map[windowKind]string{
				tumbling: "a tumbling window has size", hopping: "a hopping window has size and advance", session: "a session window has gap"}[w.kind])
		}
		return nil
	}
	for _, k := range []struct {
		key    string
		wanted bool
		dst    *int64
	}{
		{"size", w.kind != session, &w.size},
		{"advance", w.kind == hopping, &w.advance},
		{"gap", w.kind == session, &w.gap},
	} {
		if err := need(k.key, k.wanted); err != nil {
			return w, err
		}
		if *k.dst, err = dur(k.key, true); err != nil {
			return w, err
		}
	}
	if w.grace, err = dur("grace", false); err != nil {
		return w, err
	}
	switch w.kind {
	case tumbling:
		w.advance = w.size
	case hopping:
		if w.advance > w.size {
			return w, fmt.Errorf("window advance %s is longer than its size %s: records between windows would count in none",
				time.Duration(w.advance)*time.Millisecond, time.Duration(w.size)*time.Millisecond)
		}
		if n := w.size / w.advance; n > maxHops {
			return w, fmt.Errorf("window size / advance is %d: each record would update that many windows; at most %d", n, maxHops)
		}
	}
	return w, nil
}

// starts appends to dst the starts of the time windows (tumbling,
// hopping) holding event time t, earliest first: windows [s, s+size)
// with s a multiple of advance.
func (w windowSpec) starts(dst []int64, t int64) []int64 {
	last := floorDiv(t, w.advance) * w.advance
	for s := floorDiv(t-w.size, w.advance)*w.advance + w.advance; s <= last; s += w.advance {
		dst = append(dst, s)
	}
	return dst
}

// sessionDue is when a session whose last record is at end falls due
// in the time index: once a record at end + gap, which still joins it,
// is behind.
func (w windowSpec) sessionDue(end int64) int64 { return end + w.gap + 1 }

// closes is the time index bound of a sweep at stream time stream: a
// time window ([start, end), due at end) closes once stream time
// reaches end + grace, a session once stream time passes its last
// record + gap + grace.
func (w windowSpec) closes(stream int64) int64 { return stream - w.grace }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
