//go:build unix

package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"
)

// outputCheck is what reading a job's output back found.
type outputCheck struct {
	expected   int    // records the job must output
	records    int    // output records read
	distinct   int    // distinct windows (window job) or events (join)
	duplicates int    // records beyond the first of a window or event
	missing    int    // expected outputs not found
	wrong      int    // outputs that do not decode, were not expected, or hold a wrong count or row
	digest     uint64 // of the distinct outputs, whatever their order: equal digests, equal outputs
	example    string // the first problem found, for the log
}

// exact reports whether the output is every expected record once, and
// nothing else.
func (c outputCheck) exact() bool {
	return c.records == c.expected && c.duplicates == 0 && c.missing == 0 && c.wrong == 0
}

func (c outputCheck) String() string {
	return fmt.Sprintf("%d records (%d expected): %d distinct, %d duplicates, %d missing, %d wrong",
		c.records, c.expected, c.distinct, c.duplicates, c.missing, c.wrong)
}

func (c *outputCheck) problem(format string, args ...any) {
	c.wrong++
	if c.example == "" {
		c.example = fmt.Sprintf(format, args...)
	}
}

// windowCheck reads a windowed count's output: each engine writes a
// window in its own format (decodeWindow), and every window of the
// expected counts must come once with its count.
type windowCheck struct {
	engine string // fencepost or streams
	size   int64  // window size, ms
	got    map[winKey]int64
	res    outputCheck
}

func newWindowCheck(engine string, size int64) *windowCheck {
	return &windowCheck{engine: engine, size: size, got: make(map[winKey]int64)}
}

// add takes one output record.
func (c *windowCheck) add(key, value []byte) {
	c.res.records++
	w, n, err := decodeWindow(c.engine, c.size, key, value)
	if err != nil {
		c.res.problem("%v (key %q, value %q)", err, key, value)
		return
	}
	if _, dup := c.got[w]; dup {
		c.res.duplicates++
		if c.res.example == "" {
			c.res.example = fmt.Sprintf("window %s of %s written more than once", msTime(w.start), w.key)
		}
	}
	c.got[w] = n // the last one counts, as for a reader of the topic
}

// finish compares the windows read with want.
func (c *windowCheck) finish(want map[winKey]int64) outputCheck {
	c.res.expected = len(want)
	c.res.distinct = len(c.got)
	for w, n := range want {
		got, ok := c.got[w]
		switch {
		case !ok:
			c.res.missing++
			if c.res.example == "" {
				c.res.example = fmt.Sprintf("window %s of %s missing (count %d)", msTime(w.start), w.key, n)
			}
		case got != n:
			c.res.problem("window %s of %s: count %d, want %d", msTime(w.start), w.key, got, n)
		}
	}
	for w, n := range c.got {
		if _, ok := want[w]; !ok {
			c.res.problem("window %s of %s (count %d) was not expected", msTime(w.start), w.key, n)
		}
		c.res.digest += windowDigest(w, n)
	}
	return c.res
}

func windowDigest(w winKey, n int64) uint64 {
	h := fnv.New64a()
	h.Write([]byte(w.key))
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(w.start))
	binary.BigEndian.PutUint64(b[8:], uint64(n))
	h.Write(b[:])
	return mix(h.Sum64())
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

// decodeWindow decodes one window of the windowed count's output:
//
//   - fencepost's aggregate stage: the key is the group key, the value
//     {"key":K,"count":N,"window_start":RFC3339,"window_end":RFC3339};
//   - Kafka Streams' time-windowed serde and Long serde: the key is the
//     record key then the window's start (8 bytes, big-endian ms), the
//     value the count (8 bytes, big-endian).
func decodeWindow(engine string, size int64, key, value []byte) (winKey, int64, error) {
	switch engine {
	case "fencepost":
		var v struct {
			Key   *string `json:"key"`
			Count *int64  `json:"count"`
			Start string  `json:"window_start"`
			End   string  `json:"window_end"`
		}
		if err := json.Unmarshal(value, &v); err != nil {
			return winKey{}, 0, fmt.Errorf("the value is not a window's JSON: %w", err)
		}
		if v.Key == nil || v.Count == nil {
			return winKey{}, 0, errors.New(`the value has no "key" or no "count"`)
		}
		start, err1 := time.Parse(time.RFC3339Nano, v.Start)
		end, err2 := time.Parse(time.RFC3339Nano, v.End)
		if err := errors.Join(err1, err2); err != nil {
			return winKey{}, 0, fmt.Errorf("window_start or window_end is not an RFC 3339 time: %w", err)
		}
		if *v.Key != string(key) {
			return winKey{}, 0, fmt.Errorf("the value's key %q is not the record key", *v.Key)
		}
		if end.Sub(start) != time.Duration(size)*time.Millisecond {
			return winKey{}, 0, fmt.Errorf("the window lasts %v, not %v", end.Sub(start), time.Duration(size)*time.Millisecond)
		}
		return winKey{*v.Key, start.UnixMilli()}, *v.Count, nil
	case "streams":
		if len(key) < 8 || len(value) != 8 {
			return winKey{}, 0, fmt.Errorf("key of %d bytes, value of %d: want a key and 8 bytes of window start, and an 8-byte count", len(key), len(value))
		}
		k := len(key) - 8
		return winKey{string(key[:k]), int64(binary.BigEndian.Uint64(key[k:]))}, int64(binary.BigEndian.Uint64(value)), nil
	}
	return winKey{}, 0, fmt.Errorf("engine %q: want fencepost or streams", engine)
}

// joinCheck reads the join's output: every event of a user in the table,
// once, the value the event's JSON with the user's row under "profile",
// keyed by the user. Both engines write the same shape (fencepost orders
// the members by name, Kafka Streams keeps the event's order: only the
// members are compared).
type joinCheck struct {
	spec eventsSpec
	seen []uint64 // bit per event
	res  outputCheck
}

func newJoinCheck(spec eventsSpec) *joinCheck {
	return &joinCheck{spec: spec, seen: make([]uint64, (spec.records+63)/64)}
}

// add takes one output record.
func (c *joinCheck) add(key, value []byte) {
	c.res.records++
	var v struct {
		ID      *int64          `json:"id"`
		User    string          `json:"user"`
		Profile json.RawMessage `json:"profile"`
	}
	if err := json.Unmarshal(value, &v); err != nil || v.ID == nil {
		c.res.problem("the value is not a joined event's JSON (%v): %q", err, value)
		return
	}
	i := int(*v.ID)
	if i < 0 || i >= c.spec.records {
		c.res.problem("event %d is not one of the %d events: %q", i, c.spec.records, value)
		return
	}
	u := c.spec.user(i)
	_, wantRow := row(u)
	switch {
	case u >= c.spec.users:
		c.res.problem("event %d of user %s, who is not in the table, was joined: %q", i, userKey(u), value)
		return
	case string(key) != userKey(u) || v.User != userKey(u):
		c.res.problem("event %d: key %q and user %q, want %s", i, key, v.User, userKey(u))
		return
	case !bytes.Equal(v.Profile, wantRow):
		c.res.problem("event %d: profile %s, want %s", i, v.Profile, wantRow)
		return
	}
	if c.seen[i/64]&(1<<(i%64)) != 0 {
		c.res.duplicates++
		if c.res.example == "" {
			c.res.example = fmt.Sprintf("event %d joined more than once", i)
		}
		return
	}
	c.seen[i/64] |= 1 << (i % 64)
	c.res.distinct++
	c.res.digest += mix(uint64(i))
}

// finish counts the events of the table's users not found.
func (c *joinCheck) finish() outputCheck {
	c.res.expected = c.spec.expectedJoined()
	c.res.missing = c.res.expected - c.res.distinct
	if c.res.missing > 0 && c.res.example == "" {
		for i := range c.spec.records {
			if c.spec.user(i) < c.spec.users && c.seen[i/64]&(1<<(i%64)) == 0 {
				c.res.example = fmt.Sprintf("event %d of user %s not joined", i, userKey(c.spec.user(i)))
				break
			}
		}
	}
	return c.res
}
