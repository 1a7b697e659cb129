package builtin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

// Event time, and the bookkeeping the stateful stages (aggregate,
// dedupe) keep in their store about it: event times are milliseconds
// since the Unix epoch; the stream time of a partition is the highest
// event time seen on it, and moves only forward; the time index says
// what falls due when.

// Event times a record may carry: from the epoch to the end of year 9999
// (what RFC 3339 can write), so window arithmetic never overflows.
const (
	minEventTime = 0
	maxEventTime = 253402300799999 // 9999-12-31T23:59:59.999Z
)

// eventTime converts the result of a time expression to epoch
// milliseconds: an int or a whole float64 is epoch milliseconds, a string
// is RFC 3339, a time.Time is itself.
func eventTime(v any) (int64, error) {
	var ms int64
	switch x := v.(type) {
	case nil:
		return 0, errors.New("event time is nil (a missing field?): want epoch milliseconds or an RFC 3339 string")
	case int:
		ms = int64(x)
	case int64:
		ms = x
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) || math.Abs(x) > maxEventTime {
			return 0, fmt.Errorf("event time %v is not a whole number of epoch milliseconds", x)
		}
		ms = int64(x)
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return 0, fmt.Errorf("event time %q is not an RFC 3339 time (such as 2026-03-01T12:00:00Z) nor a number of epoch milliseconds", shorten(x))
		}
		return checkEventTime(t.UnixMilli())
	case time.Time:
		return checkEventTime(x.UnixMilli())
	default:
		return 0, fmt.Errorf("event time is %s: want epoch milliseconds (a number) or an RFC 3339 string", typeName(v))
	}
	return checkEventTime(ms)
}

// recordTime is a record's timestamp as an event time.
func recordTime(r *stages.Record) (int64, error) {
	if r.Timestamp.IsZero() {
		return 0, errors.New("the record has no timestamp (set the stage's time option to read the event time from the record)")
	}
	return checkEventTime(r.Timestamp.UnixMilli())
}

func checkEventTime(ms int64) (int64, error) {
	if ms < minEventTime || ms > maxEventTime {
		return 0, fmt.Errorf("event time %d (epoch milliseconds) is outside 1970-01-01 to 9999-12-31", ms)
	}
	return ms, nil
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// formatTime writes an event time as RFC 3339 with milliseconds, UTC.
func formatTime(dst []byte, ms int64) []byte {
	return time.UnixMilli(ms).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z")
}

// Store keys of the event-time bookkeeping, apart from the stages' own
// (see aggregate and dedupe):
//
//	m                          meta: shape, stream time, next due time
//	x <due:8> <rest>           the time index: an entry due at time due
//
// Times in keys are big-endian with the sign bit flipped, so byte order
// is time order and the entries that fall due next are the first of x.
// An entry has a value of the stage's (a time window's state is the
// value of its entry).
const (
	metaKey     = "m"
	indexPrefix = 'x'
)

// putTime appends t so that byte order is numeric order.
func putTime(dst []byte, t int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(t)^(1<<63))
}

func getTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

// metaVersion is the first byte of the meta value.
const metaVersion = 1

// timeline is one Process call's view of the event-time bookkeeping of a
// partition's store: the stream time, and the time index of what falls
// due when a time is reached (a window that closes, a dedupe entry that
// expires).
//
// Entries leave the index only as they fall due (due), so every
// deletion in the storage is of an entry due before next, the earliest
// an entry may be due; a load seeks to next (stages.ScanFrom) and reads
// live entries only. The store holds the truth; a timeline keeps, for
// the length of a call, what it read (pending), so that a call reads
// the index about once, however many of its records move stream time.
// Invariant: pending holds every entry due at or before horizon, once
// each, with its current value, and nothing else.
type timeline struct {
	st    stages.Store
	name  string // the store's, for errors
	shape uint64 // of the stage's configuration: state of another shape is refused
	// known: a record has set stream time on this partition.
	known  bool
	stream int64
	// next: no entry is due before it (math.MaxInt64: there is none).
	next    int64
	changed bool // meta to write at the end of the call

	horizon int64   // pending holds every entry due at or before it
	pending []entry // sorted by key (so by due time)
	key     []byte  // scratch
}

// entry is an index entry.
type entry struct {
	key, value []byte
}

// errShape is the error of a store written by another configuration of
// the stage.
func errShape(store string) error {
	return fmt.Errorf("store %q holds the state of another configuration of this stage (its fields or window changed): "+
		"give the stage a new store name (option store) to start afresh; state is not converted", store)
}

// loadTimeline reads the meta of the call's store. A store without one
// is new: it gets one at save.
func loadTimeline(st stages.Store, name string, shape uint64) (*timeline, error) {
	tl := &timeline{st: st, name: name, shape: shape, next: math.MaxInt64, horizon: math.MinInt64}
	v, ok, err := st.Get([]byte(metaKey))
	if err != nil {
		return nil, err
	}
	if !ok {
		tl.changed = true
		return tl, nil
	}
	if len(v) < 10 || v[0] != metaVersion {
		return nil, fmt.Errorf("store %q: meta value %x is not one this version writes", name, v)
	}
	if binary.BigEndian.Uint64(v[1:9]) != shape {
		return nil, errShape(name)
	}
	tl.known = v[9] == 1
	rest := v[10:]
	var n1, n2 int
	tl.stream, n1 = binary.Varint(rest)
	if n1 > 0 {
		tl.next, n2 = binary.Varint(rest[n1:])
	}
	if n1 <= 0 || n2 <= 0 {
		return nil, fmt.Errorf("store %q: meta value %x is truncated", name, v)
	}
	return tl, nil
}

// save writes the meta if it changed.
func (tl *timeline) save() error {
	if !tl.changed {
		return nil
	}
	v := make([]byte, 0, 32)
	v = append(v, metaVersion)
	v = binary.BigEndian.AppendUint64(v, tl.shape)
	known := byte(0)
	if tl.known {
		known = 1
	}
	v = append(v, known)
	v = binary.AppendVarint(v, tl.stream)
	v = binary.AppendVarint(v, tl.next)
	tl.changed = false
	return tl.st.Put([]byte(metaKey), v)
}

// advance moves stream time to t if t is later (or the first time).
func (tl *timeline) advance(t int64) {
	if !tl.known || t > tl.stream {
		tl.known, tl.stream, tl.changed = true, t, true
	}
}

// indexKey returns the key of the entry due at due with rest, in a
// scratch buffer valid until the next call.
func (tl *timeline) indexKey(due int64, rest []byte) []byte {
	k := append(tl.key[:0], indexPrefix)
	k = putTime(k, due)
	k = append(k, rest...)
	tl.key = k
	return k
}

// get returns the value of the entry due at due with rest.
func (tl *timeline) get(due int64, rest []byte) ([]byte, bool, error) {
	return tl.st.Get(tl.indexKey(due, rest))
}

// set puts the entry due at due with rest, with value (not nil).
func (tl *timeline) set(due int64, rest, value []byte) error {
	k := tl.indexKey(due, rest)
	if err := tl.st.Put(k, value); err != nil {
		return err
	}
	if due < tl.next {
		tl.next, tl.changed = due, true
	}
	if due <= tl.horizon {
		i, found := slices.BinarySearchFunc(tl.pending, k, func(e entry, k []byte) int { return bytes.Compare(e.key, k) })
		if found {
			tl.pending[i].value = append(tl.pending[i].value[:0], value...)
		} else {
			tl.pending = slices.Insert(tl.pending, i, entry{slices.Clone(k), slices.Clone(value)})
		}
	}
	return nil
}

// scanBatch is how many index entries a load reads ahead (a variable
// for the tests).
var scanBatch = 256

var errScanFull = errors.New("scan batch full")

// due calls fn, earliest first, for every entry due at or before upTo
// (with its due time, rest and value, its own copies), after deleting
// it. fn may set entries, due at any time (one due at or before upTo is
// handed to fn in turn).
func (tl *timeline) due(upTo int64, fn func(due int64, rest, value []byte) error) error {
	for {
		if len(tl.pending) == 0 {
			if tl.horizon >= upTo || tl.next > upTo {
				return nil
			}
			if err := tl.load(upTo); err != nil {
				return err
			}
			continue
		}
		e := tl.pending[0]
		due := getTime(e.key[1:9])
		if due > upTo {
			return nil
		}
		tl.pending = tl.pending[1:]
		if err := tl.st.Delete(e.key); err != nil {
			return err
		}
		if err := fn(due, e.key[9:], e.value); err != nil {
			return err
		}
		tl.lowerBound()
	}
}

// load reads the earliest entries into pending: at least all due at or
// before upTo and up to scanBatch in all (the entries due at one time
// are read together, however many, when they are due: a tumbling
// window's end is one time for every key). It sets horizon and next
// from what it found.
func (tl *timeline) load(upTo int64) error {
	tl.pending = tl.pending[:0]
	full, stop := false, int64(0)
	start := putTime([]byte{indexPrefix}, tl.next)
	err := stages.ScanFrom(tl.st, []byte{indexPrefix}, start, func(key, value []byte) error {
		if len(key) < 9 {
			return fmt.Errorf("store %q: index key %x is truncated", tl.name, key)
		}
		due := getTime(key[1:9])
		if n := len(tl.pending); n >= scanBatch {
			if last := getTime(tl.pending[n-1].key[1:9]); due != last || last > upTo {
				full, stop = true, due
				return errScanFull
			}
		}
		tl.pending = append(tl.pending, entry{slices.Clone(key), slices.Clone(value)})
		return nil
	})
	if err != nil && !errors.Is(err, errScanFull) {
		return err
	}
	tl.horizon = math.MaxInt64
	if full {
		last := getTime(tl.pending[len(tl.pending)-1].key[1:9])
		tl.horizon = last
		if stop == last { // a time's entries were cut: leave them all to a later load
			for len(tl.pending) > 0 && getTime(tl.pending[len(tl.pending)-1].key[1:9]) == last {
				tl.pending = tl.pending[:len(tl.pending)-1]
			}
			tl.horizon = last - 1
		}
	}
	tl.lowerBound()
	return nil
}

// lowerBound sets next from pending and horizon: every entry not in
// pending is due after horizon.
func (tl *timeline) lowerBound() {
	next := int64(math.MaxInt64)
	if tl.horizon < math.MaxInt64 {
		next = tl.horizon + 1
	}
	if len(tl.pending) > 0 {
		next = min(next, getTime(tl.pending[0].key[1:9]))
	}
	if next != tl.next {
		tl.next, tl.changed = next, true
	}
}
