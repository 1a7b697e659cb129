// Package builtin holds the stages every fencepost binary knows. Importing
// it (blank import is enough) registers them in stages.Default:
//
//	filter   if: expr (required)             keep records for which if is true
//	map      value, key: expr; headers: map  rewrite value, key or headers
//	json     require: []string               fail records that are not valid JSON
//	produce  topic (required); key, value:   write to a topic, pass the input on
//	         expr; headers: map               once the write is acknowledged
//	log      format: text|json|value;        print records to Env.Stdout
//	         every: int                       (stdout is the same stage)
//	aggregate fields (required); key, time:   count, sum, min, max, avg, first,
//	         expr; window, emit, late, ...    last per key, running or per window
//	dedupe   within (required); key, time     drop a record whose key passed
//	                                          within a period of event time
//
// # Expressions
//
// Options of type expr (and the values of the headers maps) are
// expressions in the expr language (https://expr-lang.org). Each is
// compiled once, when the stage is built, and type-checked against the
// variables below: a syntax error, an unknown name or a known wrong type
// (a filter condition that is a string, say) fails the configuration
// with a *stages.OptionError naming the option, not a record.
//
// The variables describe the record being processed:
//
//	key        string or nil      the key; nil if null
//	value      string or nil      the value; nil if null (a tombstone)
//	headers    map of string/nil  the headers; of repeated names the last
//	                              wins; a null header value is nil
//	topic      string             the source topic
//	partition  int                the source partition
//	offset     int                the source offset
//	timestamp  time.Time          the record's timestamp
//	json       any                the value parsed as JSON: map, array, number,
//	                              string, bool; nil if the value is not
//	                              valid JSON (or is null); a leading
//	                              UTF-8 byte order mark is skipped
//
// Null is not empty: value == nil is true for a tombstone only, value ==
// "" for an empty value only, and headers["h"] is nil for a null header
// value and for an absent header ("h" in headers tells them apart). An
// expression that passes a null on unchanged (map value: value) keeps it
// null. A string function or operator applied to nil fails the record
// (upper(value) on a tombstone): write value ?? "" to read null as
// empty, or test value == nil first. (key, value and header values are
// typed string for the checker, which so still refuses key + 1.)
//
// A JSON number is an int when written as a whole number (no fraction or
// exponent: 1, -7, -0, which is 0), else a float64 (1.0, 1e2, 0.5), so
// 64-bit ids stay exact and json.id % 10 works. A number neither holds,
// such as 1e400 or a whole number beyond 64 bits (write it with an
// exponent to accept a rounded float64), fails the record with a
// *NumberError (and so does the json stage): it never becomes nil or a
// rounded value. A value nesting arrays and objects deeper than
// MaxJSONDepth (1000) fails the record with a *DepthError, in the same
// stages; reading JSON costs time linear in the value's size.
//
// Besides expr's built-in functions and operators (string, list and time
// functions, ?. and ?? for missing fields, "in", matches, ...), toJSON(x)
// returns x encoded as compact JSON, and fromJSON(s) reads a string as
// json reads the value (same numbers, same depth limit). Examples:
//
//	json?.status == "paid" && (json?.amount ?? 0) > 100
//	headers["tenant"] in ["a", "b"]
//	{"id": json.id, "total": json.amount * 1.2, "seen": timestamp}
//	upper(key)
//
// json is parsed at most once per record, and only by stages whose
// expressions name it; key, value and headers are read without copying.
// In a map or produce stage every expression sees the input record: the
// value expression's key is the old key, whatever the key expression says.
//
// An expression that fails at run time (json.id where json is nil, a
// string compared with a number) fails that record only: the pipeline
// retries it and then dead-letters it or stops, by policy. A filter
// condition must be a bool: a nil result (json.missing, say) fails the
// record. Write json?.field == "x", or json?.n ?? 0, to give a missing
// field a value.
//
// # Results
//
// The result of a key, value or header expression becomes bytes: a
// string is its bytes, nil is null (a null key or value, a header with a
// null value), and any other value is its JSON encoding: true, 42, 1.5,
// {"a":1}. So map's value: '{"id": json.id}' writes a JSON object, and
// value: 'toJSON(json.items)' and value: 'json.items' write the same bytes.
//
// # Contract
//
// Every stage here leaves its input records untouched (outputs are new
// records sharing the unchanged slices), is safe for concurrent use,
// reports records that fail in a *stages.RecordErrors so only they are
// retried, and returns ctx.Err() for the whole batch once its context
// has ended (checked before every record; an expression that runs is
// not interrupted, and log's Write to Env.Stdout cannot be).
//
// # Source
//
// Each stage is a file of its own (json.go, filter.go, map.go,
// produce.go, log.go, aggregate.go, dedupe.go), over the helpers they
// share: expr.go compiles the expressions and runs them over records,
// budget.go bounds the memory an expression builds, loop.go is the
// per-record loop. The stateful stages keep their event time and time
// index in their store (eventtime.go); aggregate's windows are in
// window.go, its fields and their stored form in aggstate.go. How the
// stages read and write JSON fast (a scanner of their own, field values
// decoded without copying, scalars boxed from slabs) is in
// internal/fastjson; the conversions that share memory behind it are in
// internal/unsafeconv, the module's only use of package unsafe for them.
package builtin
