package builtin_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/builtin"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// FuzzExprStages runs the expression stages (and the json stage) on
// arbitrary record bytes. No panic escapes a record, every failure is
// that record's error (a *stages.RecordErrors failing it, never the
// batch's), and the json stage and the expressions agree on the value: a
// value json refuses for a number or its depth is refused by map with
// the same error,
// a value it accepts reaches map as JSON, one it refuses as invalid is
// nil there. A null key, value or header (nulls: bits 1, 2, 4) stays
// null through map's value: value, and an empty one stays empty.
func FuzzExprStages(f *testing.F) {
	for _, v := range []string{
		`{"id":7,"status":"paid","amount":120.5,"items":[{"sku":"a","n":1}],"note":"x"}`,
		`{"amount":1e400}`, `{"id":12345678901234567890}`, `{"id":1234567890123456789}`, `[1,2,{"a":null}]`,
		`"text"`, `null`, `{"a":`, ``, "\xff\xfe", `{"k\"1e400":-0.0e-5}`, `  12  `, `{"a":{"b":{"c":[[[]]]}}}`,
		`{"id":17,"amount":1.0,"n":-0}`, nested(builtin.MaxJSONDepth), nested(builtin.MaxJSONDepth + 1),
		strings.Repeat("[", builtin.MaxJSONDepth+1) + strings.Repeat("]", builtin.MaxJSONDepth+1),
	} {
		f.Add([]byte(v), []byte("user-1"), []byte("a"), byte(0))
	}
	f.Add([]byte(nil), []byte(nil), []byte(nil), byte(7))     // a tombstone, null key and header
	f.Add([]byte{}, []byte{}, []byte{}, byte(0))              // empty, not null
	f.Add([]byte(`{"id":1}`), []byte{}, []byte(nil), byte(4)) // a null header on a JSON record
	env := stagetest.Env(nil, &stagetest.Producer{})
	js := mustBuild(f, "json", stages.Options{}, env)
	jsReq := mustBuild(f, "json", stages.Options{"require": []string{"id", "amount"}}, env)
	whole := mustBuild(f, "map", stages.Options{"value": `toJSON(json)`}, env)
	exprs := []stages.Stage{
		mustBuild(f, "filter", stages.Options{"if": `json?.status == "paid" && (json?.amount ?? 0) > 100`}, env),
		mustBuild(f, "filter", stages.Options{"if": `len(value) > 3 && value matches "a+" || key startsWith "u"`}, env),
		mustBuild(f, "filter", stages.Options{"if": `json.amount > 1`}, env), // fails where json or amount is missing
		mustBuild(f, "map", stages.Options{"value": `{"id": json?.id, "k": key, "h": headers["h"], "v": upper(value), "t": timestamp}`,
			"key": `key + string(offset)`, "headers": map[string]string{"n": `json?.items?.[0]?.n`}}, env),
		mustBuild(f, "map", stages.Options{"value": `json.amount * 2`}, env),
		mustBuild(f, "produce", stages.Options{"topic": "out", "value": `toJSON(json)`, "key": `json?.id`}, env),
		mustBuild(f, "log", stages.Options{"format": "json"}, env),
		mustBuild(f, "filter", stages.Options{"if": `json?.id % 10 != 7 && value != nil && (key ?? "") != "x"`}, env),
		mustBuild(f, "map", stages.Options{"value": `toJSON(fromJSON(value))`}, env),
		js, jsReq,
	}
	identity := mustBuild(f, "map", stages.Options{"value": `value`, "key": `key`, "headers": map[string]string{"h": `headers["h"]`}}, env)
	f.Fuzz(func(t *testing.T, value, key, header []byte, nulls byte) {
		if nulls&1 != 0 {
			value = nil
		}
		if nulls&2 != 0 {
			key = nil
		}
		if nulls&4 != 0 {
			header = nil
		}
		r := stages.Record{Topic: "in", Partition: 2, Offset: 40, Value: value, Key: key,
			Headers: []stages.Header{{Key: "h", Value: header}}}
		same, err := identity.Process(context.Background(), []stages.Record{r})
		if err != nil || len(same) != 1 {
			t.Fatalf("map value: value failed: %v", err)
		}
		if o := same[0]; !sameBytes(o.Value, value) || !sameBytes(o.Key, key) || len(o.Headers) != 1 || !sameBytes(o.Headers[0].Value, header) {
			t.Fatalf("map value: value, key: key changed %q/%q/%q (nil: %v %v %v) into %q/%q/%v",
				value, key, header, value == nil, key == nil, header == nil, o.Value, o.Key, o.Headers)
		}
		for _, st := range exprs {
			if _, err := processOne(st, r); err != nil {
				t.Fatal(err)
			}
		}
		verdict, err := processOne(js, r)
		if err != nil {
			t.Fatal(err)
		}
		out, err := processOne(whole, r)
		if err != nil {
			t.Fatal(err)
		}
		var ne *builtin.NumberError
		var de *builtin.DepthError
		switch {
		case errors.As(verdict, &ne) || errors.As(verdict, &de):
			if out == nil || out.Error() != verdict.Error() {
				t.Fatalf("json refused %q with %v; map: %v", value, verdict, out)
			}
		case out != nil:
			t.Fatalf("json said %v about %q, map failed: %v", verdict, value, out)
		}
	})
}

// processOne runs st on r alone. It returns the record's own error (nil
// if it passed) or, as the second value, what broke the contract: a
// panic, a batch error, a failure of another record.
func processOne(st stages.Stage, r stages.Record) (recErr error, broken error) {
	defer func() {
		if p := recover(); p != nil {
			broken = errors.New("panic: " + strings.TrimSpace(stringOf(p)))
		}
	}()
	out, err := st.Process(context.Background(), []stages.Record{r})
	if err == nil {
		for _, o := range out {
			if o.Offset != r.Offset {
				return nil, errors.New("output with another offset")
			}
		}
		return nil, nil
	}
	var re *stages.RecordErrors
	if !errors.As(err, &re) || len(re.Errs) != 1 || re.Errs[0] == nil || len(re.Out) != 0 {
		return nil, errors.New("not a record error: " + err.Error())
	}
	if !stages.IsPermanent(re.Errs[0]) {
		return nil, errors.New("a record error retrying cannot fix is not permanent: " + re.Errs[0].Error())
	}
	if strings.Contains(re.Errs[0].Error(), "\n") {
		return nil, errors.New("a record error on more than one line: " + re.Errs[0].Error())
	}
	return re.Errs[0], nil
}

// sameBytes is bytes.Equal that also tells null (nil) from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func stringOf(p any) string {
	if e, ok := p.(error); ok {
		return e.Error()
	}
	if s, ok := p.(string); ok {
		return s
	}
	return "a value"
}

func mustBuild(f *testing.F, name string, opts stages.Options, env stages.Env) stages.Stage {
	st, err := stagetest.Build(name, opts, env)
	if err != nil {
		f.Fatalf("build %s: %v", name, err)
	}
	return st
}

// FuzzToJSONEncoded guards map's direct path for a value toJSON(x) (x
// encoded straight into the record's bytes) against the general one (the
// string toJSON returns, converted to bytes): toJSON(x) + "" takes the
// general path. For arbitrary values both give the same bytes, or fail
// the record with the same error.
func FuzzToJSONEncoded(f *testing.F) {
	for _, v := range []string{
		`{"id":7,"user":"u1","product":"sku-1","price":12.5,"qty":3,"currency":"EUR","ts":1764558000000000}`,
		`{"id":1,"price":1e308,"qty":10}`, `{"user":"a\"b\u00e9\ud800","id":-0}`, `{"id":12345678901234567890}`,
		`[1,2]`, `"text"`, `null`, `{"a":`, ``, "\xff", `{"price":{"x":[1,{}]},"qty":2}`, `{"user":null,"ts":1.5e-7}`,
	} {
		f.Add([]byte(v), byte(0))
	}
	exprs := []string{
		`{"order": json.id, "user": json.user, "product": json.product, "amount": json.price * json.qty, "currency": json.currency, "ts": json.ts}`,
		`{"order": json?.id, "user": json?.user}`,
		`json`,
		`[json?.user, json?.price, key, offset]`,
		`json?.price * 1e308`,
		`{"b": 1, "a": json?.ts, "b": json?.qty}`,
		`json?.user`,
	}
	env := stagetest.Env(nil, &stagetest.Producer{})
	type pair struct{ direct, general stages.Stage }
	pairs := make([]pair, len(exprs))
	for i, x := range exprs {
		pairs[i] = pair{
			direct:  mustBuild(f, "map", stages.Options{"value": "toJSON(" + x + ")", "key": " toJSON( " + x + " ) "}, env),
			general: mustBuild(f, "map", stages.Options{"value": "toJSON(" + x + `) + ""`, "key": " toJSON( " + x + ` ) + ""`}, env),
		}
	}
	f.Fuzz(func(t *testing.T, value []byte, which byte) {
		p := pairs[int(which)%len(pairs)]
		r := stages.Record{Topic: "t", Offset: 3, Key: []byte("k"), Value: value}
		dv, dk, derr := mapOne(p.direct, r)
		gv, gk, gerr := mapOne(p.general, r)
		if derr != gerr || !sameBytes(dv, gv) || !sameBytes(dk, gk) {
			t.Fatalf("%q, %s:\ndirect  %q %q %s\ngeneral %q %q %s", value, exprs[int(which)%len(exprs)], dk, dv, derr, gk, gv, gerr)
		}
	})
}

// mapOne runs a map stage on r alone: the output's value and key, or the
// text of the record's error.
func mapOne(st stages.Stage, r stages.Record) (value, key []byte, err string) {
	out, e := st.Process(context.Background(), []stages.Record{r})
	if e != nil {
		return nil, nil, e.Error()
	}
	return out[0].Value, out[0].Key, ""
}
