package redact_test

import (
	"errors"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"

	_ "example.com/fencepost-plugin/redact"
)

func TestRedact(t *testing.T) {
	st, err := stagetest.Build("redact", stages.Options{"pattern": `\d{4}`}, stagetest.Env(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	in := []stages.Record{
		{Topic: "cards", Offset: 7, Key: []byte("a"), Value: []byte("card 1234")},
		{Topic: "cards", Offset: 8, Key: []byte("b")}, // null value: rejected
		{Topic: "cards", Offset: 9, Key: []byte("a"), Value: []byte("no number")},
	}
	// key ordering, one record per batch: the harness checks that no key
	// runs twice at once and that no mark passes an unfinished record
	runner := stagetest.Runner{KeyOrdering: true, BatchSize: 1}
	res := runner.Run(t, in, stagetest.NamedStage{Name: "redact", Stage: st})

	if len(res.Outputs) != 2 || string(res.Outputs[0].Value) != "card ***" || string(res.Outputs[1].Value) != "no number" {
		t.Errorf("outputs %v", res.Outputs)
	}
	if len(res.DeadLetters) != 1 || res.DeadLetters[0].Offset != 8 {
		t.Fatalf("dead letters %v, want the null record", res.DeadLetters)
	}
	if stage, _ := res.DeadLetters[0].Header(stages.HeaderErrorStage); string(stage) != "redact" {
		t.Errorf("dead letter names stage %q", stage)
	}
	if m := res.Marks[stagetest.Partition{Topic: "cards"}]; m != 10 {
		t.Errorf("commit offset %d, want 10", m)
	}
}

func TestRedactStopsOnNullUnderStopPolicy(t *testing.T) {
	st, err := stagetest.Build("redact", stages.Options{"pattern": "x"}, stagetest.Env(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	in := []stages.Record{{Topic: "t", Offset: 0, Value: []byte("x")}, {Topic: "t", Offset: 1}, {Topic: "t", Offset: 2, Value: []byte("y")}}
	res := stagetest.Runner{Policy: stagetest.Policy{Stop: true}}.Run(t, in, stagetest.NamedStage{Name: "redact", Stage: st})
	var stop *stages.StoppedError
	if !errors.As(res.Stopped[stagetest.Partition{Topic: "t"}], &stop) || stop.Offset != 1 {
		t.Fatalf("stopped %v, want a stop at offset 1", res.Stopped)
	}
	if len(res.Outputs) != 1 || string(res.Outputs[0].Value) != "***" {
		t.Errorf("outputs %v, want only the record before the stop", res.Outputs)
	}
}

func TestRedactRejectsBadPattern(t *testing.T) {
	_, err := stagetest.Build("redact", stages.Options{"pattern": "("}, stagetest.Env(nil, nil))
	var oe *stages.OptionError
	if !errors.As(err, &oe) || oe.Option != "pattern" {
		t.Fatalf("error %v, want one about option pattern", err)
	}
}
