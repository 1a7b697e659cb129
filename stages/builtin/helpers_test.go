package builtin_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

var ts0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// rec is a record of topic "in", partition 0; headers are name, value
// pairs. A value "<nil>" is a null value.
func rec(offset int64, key, value string, headers ...string) stages.Record {
	r := stages.Record{Topic: "in", Offset: offset, Timestamp: ts0.Add(time.Duration(offset) * time.Second)}
	if key != "" {
		r.Key = []byte(key)
	}
	if value != "<nil>" {
		r.Value = []byte(value)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, stages.Header{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

// build builds a registered stage or fails the test.
func build(t *testing.T, name string, opts stages.Options, env stages.Env) stages.Stage {
	t.Helper()
	st, err := stagetest.Build(name, opts, env)
	if err != nil {
		t.Fatalf("build %s %v: %v", name, opts, err)
	}
	return st
}

// run runs records through one stage with a failure policy of no retries
// and checks the harness saw no contract violation.
func run(t *testing.T, name string, st stages.Stage, records ...stages.Record) stagetest.Result {
	t.Helper()
	res := stagetest.Run(t, records, stagetest.NamedStage{Name: name, Stage: st})
	if len(res.Mutated) > 0 {
		t.Fatalf("stage %s modified its input records: %v", name, res.Mutated)
	}
	for tp, err := range res.Stopped {
		t.Fatalf("partition %v stopped: %v", tp, err)
	}
	return res
}

// values returns the values of records as strings ("<nil>" for null).
func values(rs []stages.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = str(r.Value)
	}
	return out
}

func offsets(rs []stages.Record) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Offset
	}
	return out
}

func str(b []byte) string {
	if b == nil {
		return "<nil>"
	}
	return string(b)
}

// header returns a record's header as a string, "<absent>" if it has none.
func header(r stages.Record, name string) string {
	v, ok := r.Header(name)
	if !ok {
		return "<absent>"
	}
	return str(v)
}

// optionError checks err is a *stages.OptionError for option and returns
// it.
func optionError(t *testing.T, err error, option string) *stages.OptionError {
	t.Helper()
	var oe *stages.OptionError
	if !errors.As(err, &oe) {
		t.Fatalf("error %v (%T) is not a *stages.OptionError", err, err)
	}
	if oe.Option != option {
		t.Fatalf("OptionError names option %q, want %q (error: %v)", oe.Option, option, err)
	}
	return oe
}
