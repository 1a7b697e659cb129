package builtin_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

func TestLogFormats(t *testing.T) {
	in := []stages.Record{
		rec(1, "k", `{"a":1}`, "h", "x y"),
		rec(2, "", "line1\nline2"),
		rec(3, "", "<nil>"),
	}
	tests := []struct {
		stage string
		opts  stages.Options
		want  []string
	}{
		{"log", stages.Options{}, []string{ // default format text
			`in/0@1 2026-03-01T12:00:01Z key="k" value="{\"a\":1}" "h"="x y"`,
			`in/0@2 2026-03-01T12:00:02Z key=null value="line1\nline2"`,
			`in/0@3 2026-03-01T12:00:03Z key=null value=null`,
		}},
		{"stdout", stages.Options{"format": "json"}, []string{
			// the shape of processor consume -o json (package recordjson): a null key or value is left out
			`{"topic":"in","partition":0,"offset":1,"timestamp":"2026-03-01T12:00:01Z","key":"k","value":"{\"a\":1}","headers":[{"key":"h","value":"x y"}]}`,
			`{"topic":"in","partition":0,"offset":2,"timestamp":"2026-03-01T12:00:02Z","value":"line1\nline2"}`,
			`{"topic":"in","partition":0,"offset":3,"timestamp":"2026-03-01T12:00:03Z"}`,
		}},
		{"log", stages.Options{"format": "value"}, []string{`{"a":1}`, "line1", "line2", ""}},
		{"stdout", stages.Options{"format": "value", "every": 2}, []string{`{"a":1}`, ""}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.stage, tc.opts), func(t *testing.T) {
			var out stagetest.Buffer
			st := build(t, tc.stage, tc.opts, stagetest.Env(&out, nil))
			res := run(t, tc.stage, st, in...)
			if got := out.Lines(); !slices.Equal(got, tc.want) {
				t.Errorf("printed\n%q\nwant\n%q", got, tc.want)
			}
			if !slices.Equal(offsets(res.Outputs), []int64{1, 2, 3}) || !slices.Equal(values(res.Outputs), values(in)) {
				t.Errorf("outputs %v: the stage must pass every record on", res.Outputs)
			}
		})
	}
}

func TestLogSamplingAndConcurrency(t *testing.T) {
	const parts, perPart, every = 8, 50, 7
	var records []stages.Record
	for p := range parts {
		for o := range perPart {
			r := rec(int64(o), "", fmt.Sprintf(`{"p":%d,"o":%d}`, p, o))
			r.Partition = int32(p)
			records = append(records, r)
		}
	}
	var out stagetest.Buffer
	st := build(t, "log", stages.Options{"format": "json", "every": every}, stagetest.Env(&out, nil))
	res := run(t, "log", st, records...)
	if len(res.Outputs) != parts*perPart {
		t.Fatalf("%d outputs, want %d", len(res.Outputs), parts*perPart)
	}
	lines := out.Lines()
	if want := (parts*perPart + every - 1) / every; len(lines) != want {
		t.Errorf("printed %d lines, want %d (one in every %d of %d)", len(lines), want, every, parts*perPart)
	}
	for _, l := range lines { // concurrent partitions never interleave within a line
		var v struct {
			Partition int32
			Value     string
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q is not one JSON record: %v", l, err)
		}
		if v.Value != fmt.Sprintf(`{"p":%d,"o":%d}`, v.Partition, mustOffset(t, v.Value)) {
			t.Errorf("line %q mixes records", l)
		}
	}
}

func mustOffset(t *testing.T, value string) int {
	var v struct{ O int }
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		t.Fatalf("value %q: %v", value, err)
	}
	return v.O
}

type failingWriter struct{}

func (failingWriter) Write(p []byte) (int, error) { return 0, errors.New("broken pipe") }

func TestLogWriteFailureFailsRecords(t *testing.T) {
	st := build(t, "log", stages.Options{"every": 2}, stagetest.Env(failingWriter{}, nil))
	res := stagetest.Run(t, []stages.Record{rec(1, "", "a"), rec(2, "", "b"), rec(3, "", "c")}, stagetest.NamedStage{Name: "log", Stage: st})
	// records 1 and 3 are printed (one in every 2), so they fail; record
	// 2 is not printed and passes
	if got := offsets(res.Outputs); !slices.Equal(got, []int64{2}) {
		t.Errorf("outputs %v, want [2]", got)
	}
	if got := offsets(res.DeadLetters); !slices.Equal(got, []int64{1, 3}) {
		t.Errorf("dead letters %v, want [1 3]", got)
	}
}
