package builtin_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

func TestFilter(t *testing.T) {
	in := []stages.Record{
		rec(10, "a", `{"status":"paid","amount":150}`, "tenant", "x"),
		rec(11, "b", `{"status":"paid","amount":50}`, "tenant", "y"),
		rec(12, "c", `{"status":"open"}`),
		rec(13, "", `not json`, "tenant", "x"),
	}
	tests := []struct {
		name     string
		cond     string
		kept     []int64 // offsets that come out
		failed   []int64 // offsets dead-lettered (condition failed)
		errMatch string  // in the dead letters' error header
	}{
		{name: "json fields", cond: `json?.status == "paid" && (json?.amount ?? 0) > 100`, kept: []int64{10}},
		{name: "keep all", cond: `true`, kept: []int64{10, 11, 12, 13}},
		{name: "drop all", cond: `false`, kept: []int64{}},
		{name: "header", cond: `headers["tenant"] == "x"`, kept: []int64{10, 13}},
		{name: "missing header", cond: `"tenant" in headers`, kept: []int64{10, 11, 13}},
		{name: "key and value", cond: `key in ["a", "c"] || value startsWith "not"`, kept: []int64{10, 12, 13}},
		{name: "offset and partition", cond: `offset % 2 == 1 && partition == 0 && topic == "in"`, kept: []int64{11, 13}},
		{name: "timestamp", cond: `timestamp.After(date("2026-03-01T12:00:11Z"))`, kept: []int64{12, 13}},
		{name: "json is nil for invalid JSON", cond: `json == nil`, kept: []int64{13}},
		{name: "non-bool result fails the record", cond: `json?.status`, failed: []int64{10, 11, 12, 13},
			kept: nil, errMatch: "not a bool"},
		{name: "runtime error fails only its record", cond: `json.amount > 100`, kept: []int64{10},
			failed: []int64{12, 13}, errMatch: `expression if:`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := build(t, "filter", stages.Options{"if": tc.cond}, stagetest.Env(nil, nil))
			res := run(t, "filter", st, in...)
			if got := offsets(res.Outputs); !slices.Equal(got, tc.kept) && !(len(got) == 0 && len(tc.kept) == 0) {
				t.Errorf("kept offsets %v, want %v", got, tc.kept)
			}
			if got := offsets(res.DeadLetters); !slices.Equal(got, tc.failed) && !(len(got) == 0 && len(tc.failed) == 0) {
				t.Errorf("dead-lettered offsets %v, want %v", got, tc.failed)
			}
			for _, dl := range res.DeadLetters {
				if msg := header(dl, stages.HeaderErrorMessage); !strings.Contains(msg, tc.errMatch) || strings.Contains(msg, "\n") {
					t.Errorf("dead letter error %q: want one line containing %q", msg, tc.errMatch)
				}
				if stage := header(dl, stages.HeaderErrorStage); stage != "filter" {
					t.Errorf("dead letter stage header %q, want filter", stage)
				}
			}
			// every record is finished (kept, dropped or dead-lettered)
			if m := res.Marks[stagetest.Partition{Topic: "in"}]; m != 14 {
				t.Errorf("mark %d, want 14", m)
			}
		})
	}
}

func TestFilterNonBoolStringFailsRecords(t *testing.T) {
	// json?.status is "paid" for 10 and 11: strings, not bools
	st := build(t, "filter", stages.Options{"if": `json?.status`}, stagetest.Env(nil, nil))
	res := run(t, "filter", st, rec(10, "", `{"status":"paid"}`), rec(11, "", `{"status":true}`), rec(12, "", `{}`))
	if got := offsets(res.Outputs); !slices.Equal(got, []int64{11}) {
		t.Errorf("kept %v, want [11]", got)
	}
	if got := offsets(res.DeadLetters); !slices.Equal(got, []int64{10, 12}) {
		t.Errorf("dead letters %v, want [10 12] (a string and a nil are not bools)", got)
	}
	if msg := header(res.DeadLetters[0], stages.HeaderErrorMessage); !strings.Contains(msg, "string, not a bool") {
		t.Errorf("error %q does not say the result is a string", msg)
	}
}
