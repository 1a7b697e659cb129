package builtin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

func init() {
	stages.Register(stages.Spec{
		Name:    "aggregate",
		Summary: "count, sum, min, max, average, first and last per key, running or per time window",
		Options: []stages.OptionSpec{
			{Name: "key", Type: stages.TypeExpr, Doc: "expression for the group key; absent: the record key. A null key fails the record. " +
				"With key, the records are repartitioned by it first (<group>-by-<store>-repartition), unless repartition: false."},
			{Name: "repartition", Type: stages.TypeBool, Default: true, Doc: "with key: send the records through a repartition topic by the key first, so every record of " +
				"a key reaches one partition; false says the input topic is already partitioned by that key."},
			{Name: "window", Type: stages.TypeStringMap, Doc: "type: tumbling, hopping or session; size (tumbling, hopping), advance (hopping), " +
				"gap (session), grace (default 0): durations. A window [start, end) closes once stream time (the highest event time seen " +
				"on the partition) reaches end + grace; a session once stream time passes its last record + gap + grace. " +
				"Absent: a running aggregate per key. (idle_close, closing by wall clock, is not available yet.)"},
			{Name: "time", Type: stages.TypeExpr, Doc: "expression for a record's event time, with a window: epoch milliseconds or an " +
				"RFC 3339 string; absent: the record timestamp. A time that does not parse fails the record."},
			{Name: "fields", Type: stages.TypeStringMap, Required: true, Doc: "output field -> count(), sum(x), min(x), max(x), avg(x), " +
				"first(x) or last(x) of an expression x per record. nil values are skipped; sum, min, max and avg need numbers " +
				"(a sum of ints is an int); first and last are in offset order."},
			{Name: "emit", Type: stages.TypeString, Enum: []string{"on_update", "on_close"}, Doc: "on_update: a record per update of a group " +
				"(the default without window); on_close: a record per window when it closes (the default with window)."},
			{Name: "late", Type: stages.TypeString, Default: "drop", Enum: []string{"drop", "dead_letter"}, Doc: "a record whose " +
				"windows have all closed: drop it (counted as event late_records_dropped, and logged) or dead_letter it (the record fails)."},
			{Name: "max_future", Type: stages.TypeDuration, Default: 24 * time.Hour, Doc: "an event time further than this ahead of " +
				"stream time is handled as late (dropped as event future_records_dropped, or dead-lettered), so that one wrong " +
				"clock cannot close every window; 0: no limit."},
			{Name: "store", Type: stages.TypeString, Default: "aggregate", Doc: "the stage's store (its changelog topic is " +
				"{group}-{store}-changelog); two aggregate stages of a pipeline need different names, and so does a change of fields or window."},
		},
		New: newAggregate,
		// Its state is in its store and its only output the records it
		// returns.
		ExactlyOnce: true,
	})
}

// aggregate folds records into per-key (and per-window) fields.
//
// Store layout (one store; the timeline's meta is m):
//
//	a <key>                       running aggregate: the fields' state
//	x <end:8> <start:8> <key>     a time window: the fields' state
//	x <due:8> <start:8> <key>     a session's index entry (empty)
//	s <key>                       the open sessions of key, by start
//
// A time window is its own time index entry: a record's windows are Gets
// (their keys follow from the record's time), and the windows that close
// next are the first entries of x, read with their state. A key's
// sessions are one value, so the ones a record merges are one Get away;
// their index entries say when to look at them.
type aggregate struct {
	store string
	key   *program // nil: the record key
	time  *program // nil: the record timestamp
	// repartition: the pipeline repartitions by key before the stage
	// (stages.Grouper)
	repartition bool
	window      windowSpec
	fields      []aggField
	onClose     bool
	lateDL      bool  // late: dead_letter
	maxFuture   int64 // ms; 0: no limit
	reads       *reads
	shape       uint64
	log         stages.Logger
	dropped     atomic.Int64 // late records dropped, for the log
	// lateDropped and futureDropped count the records dropped under
	// late: drop, whose windows had closed and that were too far ahead
	lateDropped, futureDropped stages.Counter
}

// The aggregate's events (stages.Env.Counter).
const (
	eventLateDropped   = "late_records_dropped"
	eventFutureDropped = "future_records_dropped"
)

func newAggregate(opts stages.Options, env stages.Env) (stages.Stage, error) {
	a := &aggregate{log: env.Log, lateDropped: env.Counter(eventLateDropped), futureDropped: env.Counter(eventFutureDropped)}
	var err error
	if a.store, err = opts.String("store"); err != nil {
		return nil, err
	}
	if err := stages.ValidStoreName(a.store); err != nil {
		return nil, &stages.OptionError{Option: "store", Err: err}
	}
	if a.key, a.repartition, err = groupKeyOption(opts); err != nil {
		return nil, err
	}
	if opts.Has("window") {
		m, err := opts.StringMap("window")
		if err != nil {
			return nil, err
		}
		if a.window, err = parseWindow(m); err != nil {
			return nil, &stages.OptionError{Option: "window", Err: err}
		}
	}
	windowed := a.window.kind != noWindow
	if opts.Has("time") {
		if !windowed {
			return nil, &stages.OptionError{Option: "time", Err: errors.New("event time applies to windows: without a window the aggregate runs over every record")}
		}
		if a.time, err = compileOption(opts, "time"); err != nil {
			return nil, err
		}
	}
	fm, err := opts.StringMap("fields")
	if err != nil {
		return nil, err
	}
	if a.fields, err = compileFields(fm); err != nil {
		return nil, err
	}
	emit := "on_update"
	if windowed {
		emit = "on_close"
	}
	if opts.Has("emit") {
		if emit, err = opts.String("emit"); err != nil {
			return nil, err
		}
	}
	if emit == "on_close" && !windowed {
		return nil, &stages.OptionError{Option: "emit", Err: errors.New("on_close needs a window (a running aggregate never closes)")}
	}
	a.onClose = emit == "on_close"
	late, err := opts.String("late")
	if err != nil {
		return nil, err
	}
	a.lateDL = late == "dead_letter"
	mf, err := opts.Duration("max_future")
	if err != nil {
		return nil, err
	}
	if mf < 0 || mf%time.Millisecond != 0 {
		return nil, &stages.OptionError{Option: "max_future", Err: fmt.Errorf("%v: want 0 (no limit) or a positive whole number of milliseconds", mf)}
	}
	a.maxFuture = mf.Milliseconds()
	var ps []*program
	for _, p := range []*program{a.key, a.time} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	for _, f := range a.fields {
		if f.prog != nil {
			ps = append(ps, f.prog)
		}
	}
	a.reads = readsOf(ps...)
	a.shape = shapeOf("aggregate", a.window, a.fields)
	return a, nil
}

// groupKeyOption compiles the key option of a stateful stage, and says
// whether the pipeline repartitions by it (a key, and repartition true).
func groupKeyOption(opts stages.Options) (*program, bool, error) {
	if !opts.Has("key") {
		return nil, false, nil
	}
	rep, err := opts.Bool("repartition")
	if err != nil {
		return nil, false, err
	}
	p, err := compileOption(opts, "key")
	return p, rep, err
}

// repartitionBy is the stages.Grouper answer of a stage grouping by p
// (nil: the record key) under the store's name: the key of one record,
// evaluated alone.
func repartitionBy(p *program, rd *reads, repartition bool, store, stage string) (string, func(stages.Record) ([]byte, error), bool) {
	if p == nil || !repartition {
		return "", nil, false
	}
	return "by-" + store, func(r stages.Record) ([]byte, error) {
		e := newEvaluator(context.Background(), rd, 1)
		if err := e.load(&r); err != nil {
			return nil, stages.Permanent(err)
		}
		k, err := groupKey(p, e, &r, stage)
		if err != nil {
			return nil, stages.Permanent(err)
		}
		return k, nil
	}, true
}

// GroupKey implements stages.Grouper: with a key (and repartition true),
// the records go through <group>-by-<store>-repartition first.
func (a *aggregate) GroupKey() (string, func(stages.Record) ([]byte, error), bool) {
	return repartitionBy(a.key, a.reads, a.repartition, a.store, "aggregate")
}

func compileOption(opts stages.Options, name string) (*program, error) {
	src, err := opts.String(name)
	if err != nil {
		return nil, err
	}
	return compile(name, name, src, false)
}

// Stores declares the stage's one store.
func (a *aggregate) Stores() []string { return []string{a.store} }

// Process folds the records into the store, in order, and returns the
// updates (on_update) or the windows that closed (on_close), each with
// the source of the record that caused it. A record that fails (its key,
// time or a field) fails the call: the pipeline takes the call's writes
// back and runs its records one by one, so the record fails alone and
// leaves the state as it was. (A *stages.RecordErrors would keep the
// other records' outputs but not their writes.)
func (a *aggregate) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	if len(in) == 0 {
		return nil, nil
	}
	st, err := stages.StoreFor(ctx, a.store)
	if err != nil {
		return nil, err
	}
	tl, err := loadTimeline(st, a.store, a.shape)
	if err != nil {
		return nil, err
	}
	c := &aggRun{a: a, st: st, tl: tl, e: newEvaluator(ctx, a.reads, len(in)),
		vals: make([]input, len(a.fields)), accs: make([]acc, len(a.fields))}
	if !a.onClose {
		c.out = make([]stages.Record, 0, len(in)) // an update per record, mostly
	}
	done := ctx.Done()
	for i := range in {
		if ended(done) {
			return nil, ctx.Err()
		}
		if err := c.record(&in[i]); err != nil {
			return nil, err
		}
	}
	if err := tl.save(); err != nil {
		return nil, err
	}
	// the call succeeds: its drops count (a failed one runs again)
	if c.lateDrops > 0 {
		a.lateDropped.Add(c.lateDrops)
	}
	if c.futureDrops > 0 {
		a.futureDropped.Add(c.futureDrops)
	}
	return c.out, nil
}

// aggRun is one Process call.
type aggRun struct {
	a   *aggregate
	st  stages.Store
	tl  *timeline
	e   *evaluator
	out []stages.Record

	r       *stages.Record // the record being processed
	vals    []input        // its field values, once evaluated
	valued  bool
	scratch []byte   // what vals' raw values are in
	spans   [][3]int // field, start, end of each raw value in scratch
	accs    []acc
	starts  []int64
	skey    []byte // store key scratch
	rest    []byte // index rest scratch
	enc     []byte // encoded state scratch
	sess    []sessionState

	// lateDrops and futureDrops are the records the call dropped as
	// late: their windows had closed, or they were beyond max_future
	lateDrops, futureDrops int64
}

// stateVersion is the first byte of a stored state value.
const stateVersion = 1

func (c *aggRun) record(r *stages.Record) error {
	a := c.a
	c.r, c.valued = r, false
	if err := c.e.load(r); err != nil {
		return stages.Permanent(err)
	}
	key, err := groupKey(a.key, c.e, r, "aggregate")
	if err != nil {
		return stages.Permanent(err)
	}
	if a.window.kind == noWindow {
		return c.running(key)
	}
	t, err := evalTime(a.time, c.e, r)
	if err != nil {
		return stages.Permanent(err)
	}
	tl := c.tl
	if a.maxFuture > 0 && tl.known && t > tl.stream+a.maxFuture {
		return c.late(t, true, fmt.Sprintf("it is more than max_future (%v) ahead of stream time", time.Duration(a.maxFuture)*time.Millisecond),
			"raise max_future (0: no limit) if such times are right")
	}
	tl.advance(t)
	if err := tl.due(a.window.closes(tl.stream), c.closed); err != nil {
		return err
	}
	if a.window.kind == session {
		return c.session(key, t)
	}
	return c.timeWindows(key, t)
}

// values evaluates the record's field values, once.
func (c *aggRun) values() error {
	if c.valued {
		return nil
	}
	c.scratch = c.scratch[:0]
	c.spans = c.spans[:0]
	for i, f := range c.a.fields {
		in := &c.vals[i]
		*in = input{ok: true}
		if f.prog == nil {
			continue
		}
		v, err := c.e.run(f.prog)
		if err != nil {
			return stages.Permanent(err)
		}
		if f.fn.numeric() {
			n, ok, err := toNum(v)
			if err != nil {
				return stages.Permanent(&EvalError{Expr: f.prog.label, Err: fmt.Errorf("%s needs numbers: %w", fnNames[f.fn], err)})
			}
			in.ok, in.v = ok, n
			continue
		}
		if v == nil {
			in.ok = false
			continue
		}
		start := len(c.scratch)
		if c.scratch, err = appendJSON(c.scratch, v); err != nil {
			return stages.Permanent(&EvalError{Expr: f.prog.label, Err: fmt.Errorf("the value has no JSON encoding: %w", err)})
		}
		c.spans = append(c.spans, [3]int{i, start, len(c.scratch)})
	}
	for _, sp := range c.spans { // scratch has stopped growing
		c.vals[sp[0]].raw = c.scratch[sp[1]:sp[2]:sp[2]]
	}
	c.valued = true
	return nil
}

var fnNames = map[aggFunc]string{fnCount: "count", fnSum: "sum", fnMin: "min", fnMax: "max", fnAvg: "avg", fnFirst: "first", fnLast: "last"}

// fold adds the record's values to accs.
func (c *aggRun) fold(accs []acc) error {
	if err := c.values(); err != nil {
		return err
	}
	for i, f := range c.a.fields {
		if err := accs[i].add(f.fn, c.vals[i], c.r.Offset); err != nil {
			return stages.Permanent(&EvalError{Expr: fmt.Sprintf("fields[%q]", f.name), Err: err})
		}
	}
	return nil
}

// load decodes a stored state into accs, or resets them when v is not
// there.
func (c *aggRun) load(v []byte, ok bool, accs []acc) error {
	if !ok {
		resetAccs(accs)
		return nil
	}
	if len(v) == 0 || v[0] != stateVersion {
		return c.corrupt(v)
	}
	rd := stateReader{b: v[1:]}
	rd.accs(c.a.fields, accs)
	if rd.err != nil || len(rd.b) != 0 {
		return c.corrupt(v)
	}
	return nil
}

func resetAccs(accs []acc) {
	for i := range accs {
		accs[i] = acc{raw: accs[i].raw[:0]}
	}
}

func (c *aggRun) corrupt(v []byte) error {
	return fmt.Errorf("store %q: a stored state (%d bytes) is not one this version of the aggregate reads", c.a.store, len(v))
}

// put encodes accs and stores them under key.
func (c *aggRun) put(key []byte, accs []acc) error {
	c.enc = appendAccs(append(c.enc[:0], stateVersion), c.a.fields, accs)
	return c.st.Put(key, c.enc)
}

// emit outputs the state of key (and window) as a record derived from
// the record being processed. key must not be changed afterwards.
func (c *aggRun) emit(key []byte, accs []acc, start, end int64) {
	windowed := c.a.window.kind != noWindow
	v := appendValue(make([]byte, 0, 48+len(key)+16*len(accs)+48), key, c.a.fields, accs, windowed, start, end)
	r := c.r
	c.out = append(c.out, stages.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp, Key: key, Value: v})
}

// running folds the record into its key's running aggregate.
func (c *aggRun) running(key []byte) error {
	c.skey = append(append(c.skey[:0], 'a'), key...)
	v, ok, err := c.st.Get(c.skey)
	if err != nil {
		return err
	}
	if err := c.load(v, ok, c.accs); err != nil {
		return err
	}
	if err := c.fold(c.accs); err != nil {
		return err
	}
	if err := c.put(c.skey, c.accs); err != nil {
		return err
	}
	c.emit(key, c.accs, 0, 0)
	return nil
}

// windowRest is the index rest of key's window or session starting at
// start: start, then key.
func (c *aggRun) windowRest(key []byte, start int64) []byte {
	c.rest = append(putTime(c.rest[:0], start), key...)
	return c.rest
}

// timeWindows folds the record into each of its tumbling or hopping
// windows still open; it is late if none is.
func (c *aggRun) timeWindows(key []byte, t int64) error {
	w := c.a.window
	c.starts = w.starts(c.starts[:0], t)
	counted := false
	closes := w.closes(c.tl.stream)
	for _, s := range c.starts {
		end := s + w.size
		if end <= closes {
			continue // closed: the record is late for this one
		}
		counted = true
		rest := c.windowRest(key, s)
		v, ok, err := c.tl.get(end, rest)
		if err != nil {
			return err
		}
		if err := c.load(v, ok, c.accs); err != nil {
			return err
		}
		if err := c.fold(c.accs); err != nil {
			return err
		}
		c.enc = appendAccs(append(c.enc[:0], stateVersion), c.a.fields, c.accs)
		if err := c.tl.set(end, rest, c.enc); err != nil {
			return err
		}
		if !c.onClose() {
			c.emit(key, c.accs, s, end)
		}
	}
	if !counted {
		return c.late(t, false, "its windows have closed", graceHint)
	}
	return nil
}

func (c *aggRun) onClose() bool { return c.a.onClose }

// closed handles an index entry that fell due, and left the store: a
// time window closes (emitted under on_close), or a session's entry is
// looked at (see sessionClosed).
func (c *aggRun) closed(due int64, rest, value []byte) error {
	if len(rest) < 8 {
		return fmt.Errorf("store %q: index entry %x is truncated", c.a.store, rest)
	}
	start, key := getTime(rest[:8]), rest[8:]
	if c.a.window.kind == session {
		return c.sessionClosed(due, key, start)
	}
	if !c.onClose() {
		return nil
	}
	if err := c.load(value, true, c.accs); err != nil {
		return err
	}
	c.emit(key, c.accs, start, due)
	return nil
}

const graceHint = "raise the window's grace to count such records"

// late handles a record that counts in no window, or is beyond
// max_future (future): under late: dead_letter it fails; under drop it
// is dropped, counted in the call's drops, and logged (at the 1st, 2nd,
// 4th, 8th... drop of the stage).
func (c *aggRun) late(t int64, future bool, why, hint string) error {
	a, r := c.a, c.r
	at, now := string(formatTime(nil, t)), string(formatTime(nil, c.tl.stream))
	if a.lateDL {
		return stages.Permanent(fmt.Errorf("late record: event time %s: %s (stream time %s); %s, or set late: drop", at, why, now, hint))
	}
	if future {
		c.futureDrops++
	} else {
		c.lateDrops++
	}
	if n := a.dropped.Add(1); n&(n-1) == 0 {
		a.log.Warn("dropped a late record (late: drop)", "dropped_so_far", n, "partition", r.Partition, "offset", r.Offset,
			"event_time", at, "stream_time", now, "why", why)
	}
	return nil
}

// groupKey returns a record's group key: the record key, or the key
// expression's result as bytes. A null key fails the record.
func groupKey(p *program, e *evaluator, r *stages.Record, stage string) ([]byte, error) {
	if p == nil {
		if r.Key == nil {
			return nil, fmt.Errorf("the record key is null: %s groups by the record key (set key: to an expression to group by)", stage)
		}
		return r.Key, nil
	}
	v, err := e.run(p)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, &EvalError{Expr: p.label, Err: errors.New("the key is nil (a missing field?): every record needs a key (write key ?? \"none\" to give it one)")}
	}
	b, err := toBytes(v)
	if err != nil {
		return nil, &EvalError{Expr: p.label, Err: err}
	}
	return b, nil
}

// evalTime returns a record's event time: the time expression's, or the
// record timestamp.
func evalTime(p *program, e *evaluator, r *stages.Record) (int64, error) {
	if p == nil {
		return recordTime(r)
	}
	v, err := e.run(p)
	if err != nil {
		return 0, err
	}
	t, err := eventTime(v)
	if err != nil {
		return 0, &EvalError{Expr: p.label, Err: err}
	}
	return t, nil
}

// sessionState is one open session of a key.
type sessionState struct {
	start, end int64
	accs       []acc
}

// sessions decodes the value of a key's sessions into c.sess.
func (c *aggRun) sessions(v []byte, ok bool) error {
	c.sess = c.sess[:0]
	if !ok {
		return nil
	}
	if len(v) == 0 || v[0] != stateVersion {
		return c.corrupt(v)
	}
	rd := stateReader{b: v[1:]}
	n := rd.uvarint()
	if n > uint64(len(v)) {
		return c.corrupt(v)
	}
	for range n {
		s := c.nextSession()
		s.start = rd.varint()
		s.end = s.start + int64(rd.uvarint())
		rd.accs(c.a.fields, s.accs)
	}
	if rd.err != nil || len(rd.b) != 0 {
		return c.corrupt(v)
	}
	return nil
}

// nextSession appends a session to c.sess, reusing what an earlier one
// there allocated.
func (c *aggRun) nextSession() *sessionState {
	if len(c.sess) < cap(c.sess) {
		c.sess = c.sess[:len(c.sess)+1]
	} else {
		c.sess = append(c.sess, sessionState{})
	}
	s := &c.sess[len(c.sess)-1]
	if len(s.accs) != len(c.a.fields) {
		s.accs = make([]acc, len(c.a.fields))
	}
	return s
}

// putSessions stores c.sess as key's sessions (deletes the value when
// there are none).
func (c *aggRun) putSessions(sk []byte) error {
	if len(c.sess) == 0 {
		return c.st.Delete(sk)
	}
	b := append(c.enc[:0], stateVersion)
	b = binary.AppendUvarint(b, uint64(len(c.sess)))
	for i := range c.sess {
		s := &c.sess[i]
		b = binary.AppendVarint(b, s.start)
		b = binary.AppendUvarint(b, uint64(s.end-s.start))
		b = appendAccs(b, c.a.fields, s.accs)
	}
	c.enc = b
	return c.st.Put(sk, b)
}

func (c *aggRun) sessionKey(key []byte) []byte {
	c.skey = append(append(c.skey[:0], 's'), key...)
	return c.skey
}

// session folds the record into its key's session: a new one, or the
// one or two sessions within gap of it, merged. It is late if that
// session has closed.
func (c *aggRun) session(key []byte, t int64) error {
	w := c.a.window
	sk := c.sessionKey(key)
	v, ok, err := c.st.Get(sk)
	if err != nil {
		return err
	}
	if err := c.sessions(v, ok); err != nil {
		return err
	}
	// the sessions within gap of t: lo..hi-1 (sessions are apart by more
	// than gap, so at most two)
	lo := 0
	for lo < len(c.sess) && c.sess[lo].end+w.gap < t {
		lo++
	}
	hi := lo
	for hi < len(c.sess) && c.sess[hi].start-w.gap <= t {
		hi++
	}
	start, end := t, t
	for _, s := range c.sess[lo:hi] {
		start, end = min(start, s.start), max(end, s.end)
	}
	if w.sessionDue(end) <= w.closes(c.tl.stream) {
		return c.late(t, false, "its session has closed", graceHint)
	}
	merged := sessionState{start: start, end: end, accs: c.accs}
	resetAccs(merged.accs)
	for i := lo; i < hi; i++ {
		s := &c.sess[i]
		for j, f := range c.a.fields {
			if err := merged.accs[j].merge(f.fn, &s.accs[j]); err != nil {
				return stages.Permanent(&EvalError{Expr: fmt.Sprintf("fields[%q]", f.name), Err: err})
			}
		}
	}
	if err := c.fold(merged.accs); err != nil {
		return err
	}
	// The index keeps an entry per session start, due no later than the
	// session closes: one added when a session starts, moved on when it
	// falls due and the session has grown since (see sessionClosed). A
	// session that grows is not re-indexed, nor is one merged into an
	// earlier: its entry finds no session when it falls due.
	if lo == hi || start < c.sess[lo].start {
		if err := c.tl.set(w.sessionDue(end), c.windowRest(key, start), []byte{}); err != nil {
			return err
		}
	}
	// c.sess[lo:hi] becomes merged (its accs copied into the slot's own)
	if lo == hi {
		c.nextSession()
		copy(c.sess[lo+1:], c.sess[lo:len(c.sess)-1])
		c.sess[lo] = sessionState{accs: make([]acc, len(c.a.fields))}
	} else {
		c.sess = slices.Delete(c.sess, lo+1, hi)
	}
	slot := &c.sess[lo]
	slot.start, slot.end = start, end
	for j := range merged.accs {
		slot.accs[j] = copyAcc(slot.accs[j], &merged.accs[j])
	}
	if err := c.putSessions(c.sessionKey(key)); err != nil {
		return err
	}
	if !c.onClose() {
		c.emit(key, merged.accs, start, end)
	}
	return nil
}

// copyAcc returns a copy of src that reuses dst's buffer.
func copyAcc(dst acc, src *acc) acc {
	raw := append(dst.raw[:0], src.raw...)
	dst = *src
	dst.raw = raw
	return dst
}

// sessionClosed handles the index entry of key's session starting at
// start, due at due: the session closes (emitted under on_close, and
// removed) if it is due then; if it grew since the entry was made, the
// entry moves to when it is due now; if it was merged into an earlier
// session, there is nothing to do.
func (c *aggRun) sessionClosed(due int64, key []byte, start int64) error {
	sk := c.sessionKey(key)
	v, ok, err := c.st.Get(sk)
	if err != nil {
		return err
	}
	if err := c.sessions(v, ok); err != nil {
		return err
	}
	i := slices.IndexFunc(c.sess, func(s sessionState) bool { return s.start == start })
	if i < 0 {
		return nil // merged into an earlier session
	}
	s := c.sess[i]
	if now := c.a.window.sessionDue(s.end); now > due {
		return c.tl.set(now, c.windowRest(key, start), []byte{})
	}
	if c.onClose() {
		c.emit(key, s.accs, s.start, s.end)
	}
	// the emitted value is encoded already: the slot may be reused
	c.sess = append(c.sess[:i], c.sess[i+1:]...)
	c.sess = append(c.sess, s)[:len(c.sess)] // keep its accs for reuse
	return c.putSessions(c.sessionKey(key))
}
