package builtin

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

func init() {
	stages.Register(stages.Spec{
		Name:    "dedupe",
		Summary: "drop a record whose key was seen within a period of event time",
		Options: []stages.OptionSpec{
			{Name: "key", Type: stages.TypeExpr, Doc: "expression for what makes records duplicates; absent: the record key. A null key " +
				"fails the record. With key, the records are repartitioned by it first (<group>-by-<store>-repartition), unless repartition: false."},
			{Name: "repartition", Type: stages.TypeBool, Default: true, Doc: "with key: send the records through a repartition topic by the key first, so every record of " +
				"a key reaches one partition; false says the input topic is already partitioned by that key."},
			{Name: "within", Type: stages.TypeDuration, Required: true, Doc: "a record is dropped (counted as event duplicate_records_dropped) " +
				"when a record of its key passed less than this before or after it in event time; a key is remembered until stream time (the highest event time seen on the partition) " +
				"reaches the time of the record that passed + within."},
			{Name: "time", Type: stages.TypeExpr, Doc: "expression for a record's event time: epoch milliseconds or an RFC 3339 string; " +
				"absent: the record timestamp. A time that does not parse fails the record."},
			{Name: "store", Type: stages.TypeString, Default: "dedupe", Doc: "the stage's store (its changelog topic is {group}-{store}-changelog); " +
				"two dedupe stages of a pipeline need different names."},
		},
		New: newDedupe,
		// Its state is in its store and its only output the records it
		// passes on.
		ExactlyOnce: true,
	})
}

// dedupe passes the first record of a key and drops the ones within a
// period of event time of it.
//
// Store layout (with the timeline's m and x keys):
//
//	k <key>                the event time of the key's record that passed
//	x <expiry:8> <key>     time index (empty): the key is forgotten at expiry
type dedupe struct {
	store  string
	key    *program // nil: the record key
	time   *program // nil: the record timestamp
	within int64    // ms
	// repartition: the pipeline repartitions by key before the stage
	// (stages.Grouper)
	repartition bool
	reads       *reads
	shape       uint64
	duplicates  stages.Counter // the records dropped
}

// eventDuplicatesDropped is the dedupe's event (stages.Env.Counter).
const eventDuplicatesDropped = "duplicate_records_dropped"

func newDedupe(opts stages.Options, env stages.Env) (stages.Stage, error) {
	d := &dedupe{duplicates: env.Counter(eventDuplicatesDropped)}
	var err error
	if d.store, err = opts.String("store"); err != nil {
		return nil, err
	}
	if err := stages.ValidStoreName(d.store); err != nil {
		return nil, &stages.OptionError{Option: "store", Err: err}
	}
	if d.key, d.repartition, err = groupKeyOption(opts); err != nil {
		return nil, err
	}
	if opts.Has("time") {
		if d.time, err = compileOption(opts, "time"); err != nil {
			return nil, err
		}
	}
	within, err := opts.Duration("within")
	if err != nil {
		return nil, err
	}
	if within <= 0 || within%time.Millisecond != 0 {
		return nil, &stages.OptionError{Option: "within", Err: fmt.Errorf("%v: want a positive whole number of milliseconds", within)}
	}
	d.within = within.Milliseconds()
	var ps []*program
	for _, p := range []*program{d.key, d.time} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	d.reads = readsOf(ps...)
	d.shape = shapeOf("dedupe", windowSpec{}, nil)
	return d, nil
}

// Stores declares the stage's one store.
func (d *dedupe) Stores() []string { return []string{d.store} }

// Process passes on the records that are not duplicates, unchanged. As
// aggregate's, a record that fails (its key or time) fails the call, so
// that it fails alone and changes nothing.
func (d *dedupe) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	if len(in) == 0 {
		return nil, nil
	}
	st, err := stages.StoreFor(ctx, d.store)
	if err != nil {
		return nil, err
	}
	tl, err := loadTimeline(st, d.store, d.shape)
	if err != nil {
		return nil, err
	}
	e := newEvaluator(ctx, d.reads, len(in))
	var (
		out   []stages.Record
		skey  []byte
		tbuf  []byte
		drops int64
	)
	forget := func(_ int64, key, _ []byte) error {
		skey = append(append(skey[:0], 'k'), key...)
		return st.Delete(skey)
	}
	done := ctx.Done()
	for i := range in {
		if ended(done) {
			return nil, ctx.Err()
		}
		r := &in[i]
		if err := e.load(r); err != nil {
			return nil, stages.Permanent(err)
		}
		key, err := groupKey(d.key, e, r, "dedupe")
		if err != nil {
			return nil, stages.Permanent(err)
		}
		t, err := evalTime(d.time, e, r)
		if err != nil {
			return nil, stages.Permanent(err)
		}
		tl.advance(t)
		if err := tl.due(tl.stream, forget); err != nil {
			return nil, err
		}
		skey = append(append(skey[:0], 'k'), key...)
		v, seen, err := st.Get(skey)
		if err != nil {
			return nil, err
		}
		if seen {
			t0, n := binary.Varint(v)
			if n <= 0 {
				return nil, fmt.Errorf("store %q: the stored time of key %q is corrupt", d.store, key)
			}
			if t-t0 < d.within && t0-t < d.within {
				drops++ // a duplicate
				continue
			}
		} else if expiry := t + d.within; expiry > tl.stream {
			tbuf = binary.AppendVarint(tbuf[:0], t)
			if err := st.Put(skey, tbuf); err != nil {
				return nil, err
			}
			if err := tl.set(expiry, key, []byte{}); err != nil {
				return nil, err
			}
		}
		if out == nil {
			out = make([]stages.Record, 0, len(in)-i)
		}
		out = append(out, *r)
	}
	if err := tl.save(); err != nil {
		return nil, err
	}
	if drops > 0 { // the call succeeds: its drops count (a failed one runs again)
		d.duplicates.Add(drops)
	}
	return out, nil
}

// GroupKey implements stages.Grouper: with a key (and repartition true),
// the records go through <group>-by-<store>-repartition first.
func (d *dedupe) GroupKey() (string, func(stages.Record) ([]byte, error), bool) {
	return repartitionBy(d.key, d.reads, d.repartition, d.store, "dedupe")
}
