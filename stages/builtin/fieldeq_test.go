package builtin

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
)

// TestFieldEqualsRecognized: only a comparison of one top-level json
// field with a string constant takes the raw-bytes path.
func TestFieldEqualsRecognized(t *testing.T) {
	for _, tc := range []struct {
		src   string
		field string // "" with want "": not recognized
		want  string
	}{
		{`json.type == "purchase"`, "type", "purchase"},
		{`"purchase" == json.type`, "type", "purchase"},
		{`json["a b"] == "x y"`, "a b", "x y"},
		{`json.type == ""`, "type", ""},
		{`json?.type == "purchase"`, "", ""},
		{`json.type != "purchase"`, "", ""},
		{`json.type == 1`, "", ""},
		{`json.a.b == "x"`, "", ""},
		{`json.type == json.kind`, "", ""},
		{`key == "x"`, "", ""},
		{`json.type == "a" && json.b == "c"`, "", ""},
	} {
		p, err := compile("if", "if", tc.src, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		eq := p.equals
		switch {
		case tc.field == "" && eq != nil:
			t.Errorf("%s: recognized as %q == %q, want not", tc.src, eq.field, eq.want)
		case tc.field != "" && (eq == nil || eq.field != tc.field || eq.want != tc.want):
			t.Errorf("%s: got %+v, want field %q == %q", tc.src, eq, tc.field, tc.want)
		}
	}
}

// fieldEqualsValues are values the raw-bytes path must answer as the
// expression does: escapes, duplicates, other types, non-UTF-8, numbers
// refused, non-objects, invalid JSON.
var fieldEqualsValues = []string{
	`{"type":"purchase"}`, `{"type":"view"}`, `{"kind":"purchase"}`, `{}`,
	`{"type":"purc\u0068ase"}`, `{"t\u0079pe":"purchase"}`, `{"type":"purchase\""}`,
	`{"type":"purchase","type":"view"}`, `{"type":"view","type":"purchase"}`,
	`{"type":1}`, `{"type":null}`, `{"type":true}`, `{"type":["purchase"]}`, `{"type":{"a":"purchase"}}`,
	"{\"type\":\"purchase\xff\"}", `{"type":"é"}`, `{"a b":"x y"}`, `{"é":"purchase"}`, `{"":"purchase"}`,
	`{"a":1e400,"type":"purchase"}`, `{"a":123456789012345678901234567890,"type":"purchase"}`,
	`["purchase"]`, `"purchase"`, `null`, `not json`, ``, `{"type":"purchase"`, ` {"type" : "purchase"} `,
}

var fieldEqualsExprs = []string{
	`json.type == "purchase"`, `"purchase" == json.type`, `json.type == ""`, `json.type == "é"`,
	`json["a b"] == "x y"`, `json["é"] == "purchase"`, `json[""] == "purchase"`, `json.type == "purchase\""`,
	`json.type == "purchase\uFFFD"`,
}

// outcomeOf runs f over one record of value v: "keep", "drop" or
// "fail: <error>".
func outcomeOf(t testing.TB, f *filter, v []byte) string {
	t.Helper()
	out, err := f.Process(context.Background(), []stages.Record{{Value: v}})
	var re *stages.RecordErrors
	switch {
	case errors.As(err, &re):
		return "fail: " + err.Error()
	case err != nil:
		t.Fatalf("%s over %q: %v", f.cond.label, v, err)
	case len(out) == 1:
		return "keep"
	}
	return "drop"
}

// checkFieldEquals compares, over v, the filter of src with and without
// its raw-bytes path.
func checkFieldEquals(t testing.TB, src string, v []byte) {
	t.Helper()
	s, err := newFilter(stages.Options{"if": src}, stages.Env{})
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	fast := s.(*filter)
	if fast.cond.equals == nil {
		t.Fatalf("%s: not recognized", src)
	}
	cond := *fast.cond
	cond.equals = nil
	slow := filter{cond: &cond, reads: fast.reads}
	if got, want := outcomeOf(t, fast, v), outcomeOf(t, &slow, v); got != want {
		t.Fatalf("%s over %q: %s from the raw bytes, %s as written", src, v, got, want)
	}
}

// TestFieldEqualsMatchesAsWritten: over every value above, the raw-bytes
// path keeps, drops and fails what the expression as written does.
func TestFieldEqualsMatchesAsWritten(t *testing.T) {
	for _, src := range fieldEqualsExprs {
		for _, v := range fieldEqualsValues {
			checkFieldEquals(t, src, []byte(v))
		}
	}
}

// FuzzFieldEqualsMatchesAsWritten: over any value and any constant, the
// raw-bytes path answers as the expression as written does.
func FuzzFieldEqualsMatchesAsWritten(f *testing.F) {
	for _, v := range fieldEqualsValues {
		f.Add([]byte(v), "purchase")
	}
	f.Add([]byte(`{"type":"\ud800"}`), "\uFFFD")
	f.Fuzz(func(t *testing.T, v []byte, want string) {
		for _, src := range []string{`json.type == %q`, `%q == json["é"]`, `json[""] == %q`} {
			src = fmt.Sprintf(src, want)
			if _, err := compile("if", "if", src, true); err != nil {
				continue // %q wrote what expr does not read: nothing to compare
			}
			checkFieldEquals(t, src, v)
		}
	})
}
