package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fencepost-dev/fencepost/internal/fastjson"
	"github.com/fencepost-dev/fencepost/internal/memo"
	"github.com/fencepost-dev/fencepost/stages"
)

func init() {
	stages.Register(stages.Spec{
		Name:    "join",
		Summary: "join each record with the row of a table (a compacted topic) under its key",
		Options: []stages.OptionSpec{
			{Name: "table", Type: stages.TypeString, Required: true, Doc: "the compacted topic that holds the table: key -> JSON value. " +
				"It must be partitioned as the stream (same partition count, keys placed the same way: put a repartition " +
				"stage with the join's key before the join when the stream is keyed otherwise); the pipeline checks the count at start."},
			{Name: "key", Type: stages.TypeExpr, Doc: "expression for the lookup key; absent: the record key. With a key, the " +
				"records are repartitioned by it first (unless repartition: false)." + convertDoc},
			{Name: "repartition", Type: stages.TypeBool, Default: true, Doc: "with a key: send the records through the " +
				"repartition topic <group>-join-<table>-repartition by the key before the join; false: the input is partitioned by it already"},
			{Name: "as", Type: stages.TypeString, Default: "table", Doc: "the member of the output JSON object that holds the table's row: appended to the record's object, whose own text is kept as it was (a member of that name already there is replaced)"},
			{Name: "type", Type: stages.TypeString, Default: "left", Enum: []string{"left", "inner"},
				Doc: "left: a record without a row gets null; inner: it is dropped (counted as event unmatched_records_dropped)"},
			{Name: "global", Type: stages.TypeBool, Default: false, Doc: "true: every instance reads every partition of the " +
				"table into one store, so it may be partitioned in any way and no repartition is needed (it costs every " +
				"instance the whole table); false: each instance reads the partitions it is assigned"},
		},
		New: newJoin,
		// Its only effect is the records it returns; the table is read
		// only.
		ExactlyOnce: true,
	})
}

// joinStage adds a table's row to each record's JSON object.
type joinStage struct {
	topic, store, as string
	inner            bool
	key              *mapStage // nil: the record key
	repartition      bool
	global           bool
	unmatched        stages.Counter // records dropped by an inner join
	asField          *fastjson.FieldSet
}

// eventUnmatchedDropped is the join's event (stages.Env.Counter).
const eventUnmatchedDropped = "unmatched_records_dropped"

func newJoin(opts stages.Options, env stages.Env) (stages.Stage, error) {
	topic, _ := opts.String("table")
	if stages.ValidStoreName(topic) != nil {
		return nil, &stages.OptionError{Option: "table", Err: fmt.Errorf("%q is not a topic name", topic)}
	}
	as, _ := opts.String("as")
	if as == "" {
		return nil, &stages.OptionError{Option: "as", Err: errors.New("must not be empty")}
	}
	kind, _ := opts.String("type")
	global, _ := opts.Bool("global")
	j := &joinStage{topic: topic, store: "table-" + topic, as: as, inner: kind == "inner", global: global,
		unmatched: env.Counter(eventUnmatchedDropped), asField: fastjson.NewFieldSet([]string{as})}
	if opts.Has("key") {
		m, err := newMap(stages.Options{"key": opts["key"]}, env)
		if err != nil {
			return nil, err
		}
		j.key = m.(*mapStage)
		j.repartition, _ = opts.Bool("repartition")
	}
	return j, nil
}

// GroupKey implements stages.Grouper: with a key, the records are
// repartitioned by it before the join, unless repartition: false.
func (j *joinStage) GroupKey() (string, func(stages.Record) ([]byte, error), bool) {
	if j.key == nil || !j.repartition || j.global {
		return "", nil, false
	}
	return "join-" + j.topic, j.key.keyOf, true
}

// Tables implements stages.TableReader (for a table that is not global).
func (j *joinStage) Tables() map[string]string {
	if j.global {
		return nil
	}
	return map[string]string{j.store: j.topic}
}

// GlobalTables implements stages.GlobalTableReader (for a global table).
func (j *joinStage) GlobalTables() map[string]string {
	if !j.global {
		return nil
	}
	return map[string]string{j.store: j.topic}
}

// Process looks every record's key up in the table. A record whose key
// expression fails, whose value is not a JSON object, or whose row is not
// JSON fails (it is dead-lettered or stops its partition).
func (j *joinStage) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	table, err := stages.StoreFor(ctx, j.store)
	if err != nil {
		return nil, err
	}
	keys := in
	var failed stages.RecordErrors
	if j.key != nil {
		out, err := j.key.Process(ctx, in)
		var re *stages.RecordErrors
		switch {
		case errors.As(err, &re) && re.Consistent(len(in)):
			failed.Errs = re.Errs
			keys = make([]stages.Record, len(in))
			for n, i := range re.From {
				keys[i] = re.Out[n]
			}
		case err != nil:
			return nil, err
		default:
			keys = out
		}
	}
	var drops int64
	var docs fastjson.Docs
	docs.Reserve(len(in))
	cache := memo.From(ctx) // the record values' docs, shared with the chain's other stages
	for i := range in {
		if _, bad := failed.Errs[i]; bad {
			continue
		}
		r, keep, err := j.join(cache, &docs, table, in[i], keys[i].Key)
		switch {
		case err != nil:
			failed.Fail(i, stages.Permanent(err))
		case keep:
			failed.Emit(i, r)
		default:
			drops++
		}
	}
	// the call's outcome stands, its records named as failed or not: its
	// drops count
	if drops > 0 {
		j.unmatched.Add(drops)
	}
	if failed.Failed() {
		return nil, &failed
	}
	return failed.Out, nil
}

func (j *joinStage) join(cache *memo.Cache, docs *fastjson.Docs, table stages.Store, r stages.Record, key []byte) (stages.Record, bool, error) {
	var row []byte
	if key != nil {
		v, ok, err := table.Get(key)
		if err != nil {
			return r, false, err
		}
		if ok {
			row = fastjson.Text(v)
			if !docs.New(row).Valid() {
				return r, false, fmt.Errorf("join: the row of key %q in table %s is not JSON", key, j.topic)
			}
		}
	}
	if row == nil && j.inner {
		return r, false, nil
	}
	if row == nil {
		row = []byte("null")
	}
	value, err := j.withMember(cache, docs, r.Value, row)
	if err != nil {
		return r, false, err
	}
	out := r
	out.Value = value
	return out, true, nil
}

// withMember returns the JSON object v with the member j.as set to row.
// The object's own bytes are kept as they are (members in their order,
// their text unchanged) and the member appended, unless v has a member
// of that name already: then it is replaced, and the object written
// again (members sorted by name, each value's text kept).
func (j *joinStage) withMember(cache *memo.Cache, docs *fastjson.Docs, v, row []byte) ([]byte, error) {
	text := fastjson.Text(v)
	doc := docFor(cache, docs, text) // checked once per chain call, whichever stage asks first
	if !doc.Object() {
		return nil, errors.New("join: the record's value is not a JSON object")
	}
	var present [1]bool
	doc.Present(text, j.asField, present[:])
	if present[0] {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(text, &obj); err != nil {
			return nil, fmt.Errorf("join: the record's value: %w", err)
		}
		obj[j.as] = row
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // the values' text as it was
		if err := enc.Encode(obj); err != nil {
			return nil, fmt.Errorf("join: the record's value: %w", err)
		}
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
	}
	body := bytes.TrimRight(text, " \t\r\n")
	body = body[:len(body)-1] // the closing brace
	empty := bytes.TrimRight(body, " \t\r\n")
	out := make([]byte, 0, len(body)+len(j.as)+len(row)+8)
	out = append(out, body...)
	if empty[len(empty)-1] != '{' {
		out = append(out, ',')
	}
	out = fastjson.AppendString(out, j.as)
	out = append(out, ':')
	out = append(out, row...)
	return append(out, '}'), nil
}
