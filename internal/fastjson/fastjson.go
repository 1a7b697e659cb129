// Package fastjson reads record values as JSON for the built-in stages,
// and writes JSON for them: the fast path of the json, filter, map and
// produce stages, kept apart from the stages themselves.
//
// Reading is its own, two passes linear in a value's size whatever its
// shape: a check (Docs.New, Parse) that finds whether a value is JSON,
// refuses one nested deeper than MaxDepth (a *DepthError) or holding a
// number no int or float64 holds (a *NumberError), and records where a
// top-level object's members are; then, as needed, the whole value
// (Doc.Value), the few fields a stage reads (Doc.ProjectInto), or one
// field's comparison with a string answered from its bytes
// (Doc.FieldEquals). What it reads is what encoding/json reads, numbers
// excepted: a whole number (no fraction, no exponent) is an int, any
// other a float64. FuzzFastJSONAgreesWithStd holds it to encoding/json.
//
// Values are read without copying: decoded strings, and the scalars a
// Boxer boxes, share the bytes they come from and the chunks the Docs
// and the Boxer allocate, so the bytes given must never be written again
// (record bytes are not: see stages.Record), and what is returned is
// read-only. The conversions that share memory are in
// internal/unsafeconv. Nothing here is safe for concurrent use but a
// FieldSet: a stage makes its Docs and Boxer per Process call.
//
// Writing (Append) is encoding/json's output without HTML escaping,
// with segmentio/encoding/json for all but the common scalars.
package fastjson
