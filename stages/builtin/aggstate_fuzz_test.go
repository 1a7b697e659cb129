package builtin

import (
	"slices"
	"testing"
)

// FuzzAggregateState decodes arbitrary bytes as a stored group state and
// as a key's stored sessions, with a field of every function. A value
// the aggregate did not write (corrupt, or of another version) is an
// error, never a panic; one that decodes encodes back to a value that
// decodes to the same state.
func FuzzAggregateState(f *testing.F) {
	fields, err := compileFields(map[string]string{"n": "count()", "s": "sum(json.p)", "mn": "min(json.p)", "mx": "max(json.p)",
		"a": "avg(json.p)", "f": "first(json.id)", "l": "last(json.id)"})
	if err != nil {
		f.Fatal(err)
	}
	a := &aggregate{store: "fuzz", fields: fields, window: windowSpec{kind: session, gap: 10}}
	newRun := func() *aggRun { return &aggRun{a: a, accs: make([]acc, len(fields))} }
	// seeds: states the aggregate writes
	c := newRun()
	for i, in := range []input{{ok: true, v: num{i: 7}, raw: []byte(`"x"`)}, {ok: true, v: num{float: true, f: -2.5}, raw: []byte(`{"a":[1]}`)}, {}} {
		for j, fd := range fields {
			_ = c.accs[j].add(fd.fn, in, int64(i))
		}
		one := appendAccs([]byte{stateVersion}, fields, c.accs)
		f.Add(one)
		c.st = discard{}
		c.sess = []sessionState{{start: 5, end: 9, accs: slices.Clone(c.accs)}, {start: 40, end: 40, accs: slices.Clone(c.accs)}}
		_ = c.putSessions(nil)
		f.Add(slices.Clone(c.enc))
	}
	f.Add([]byte{})
	f.Add([]byte{stateVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, v []byte) {
		c := newRun()
		if err := c.load(v, true, c.accs); err == nil {
			again := appendAccs([]byte{stateVersion}, fields, c.accs)
			d := newRun()
			if err := d.load(again, true, d.accs); err != nil {
				t.Fatalf("%x decoded, but its encoding %x does not: %v", v, again, err)
			}
			if !slices.Equal(appendAccs(nil, fields, d.accs), again[1:]) {
				t.Fatalf("%x: the state changed on a round trip", v)
			}
		}
		c = newRun()
		c.st = discard{}
		if err := c.sessions(v, true); err == nil && len(c.sess) > 0 { // (none: the value is deleted, not written)
			if err := c.putSessions([]byte("s")); err != nil {
				t.Fatal(err)
			}
			again := slices.Clone(c.enc)
			d := newRun()
			if err := d.sessions(again, true); err != nil || len(d.sess) != len(c.sess) {
				t.Fatalf("%x decoded to %d sessions, but its encoding %x gives %d: %v", v, len(c.sess), again, len(d.sess), err)
			}
		}
	})
}

// discard is a store that keeps nothing.
type discard struct{ memStore }

func (discard) Put([]byte, []byte) error { return nil }
