package builtin_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

func TestBadOptionsFailAtBuild(t *testing.T) {
	env := stagetest.Env(nil, &stagetest.Producer{})
	tests := []struct {
		stage  string
		opts   stages.Options
		option string // the option the *stages.OptionError names
		msg    string // in the error
	}{
		{"filter", stages.Options{"if": `value ==`}, "if", "unexpected token EOF"},
		{"filter", stages.Options{"if": `nosuch == 1`}, "if", "unknown name nosuch"},
		{"filter", stages.Options{"if": `value`}, "if", "a condition must be a bool"},
		{"filter", stages.Options{"if": `offset + 1`}, "if", "type is int"},
		{"filter", stages.Options{"if": `  `}, "if", "empty expression"},
		{"filter", stages.Options{}, "if", "required"},
		{"filter", stages.Options{"if": 1}, "if", "want expr, got int"},
		{"map", stages.Options{}, "value", "at least one of value, key or headers"},
		{"map", stages.Options{"headers": map[string]string{}}, "value", "at least one of"},
		{"map", stages.Options{"value": `1 +`}, "value", "unexpected token EOF"},
		{"map", stages.Options{"key": `upper(offset)`}, "key", "upper"},
		{"map", stages.Options{"value": `value`, "headers": map[string]string{"ok": `key`, "bad": `)`}}, "headers", `headers["bad"]`},
		{"produce", stages.Options{"value": `value`}, "topic", "required"},
		{"produce", stages.Options{"topic": ""}, "topic", "empty topic"},
		{"produce", stages.Options{"topic": "orders out"}, "topic", `"orders out" is not a valid topic name`},
		{"produce", stages.Options{"topic": "out", "key": `key +`}, "key", "unexpected token"},
		{"produce", stages.Options{"topic": "out", "value": `nosuch`}, "value", "unknown name nosuch"},
		{"produce", stages.Options{"topic": "out", "headers": map[string]string{"h": `[`}}, "headers", `headers["h"]`},
		{"json", stages.Options{"require": []string{"id", ""}}, "require", "empty field name"},
		{"json", stages.Options{"require": []string{"id", "user", "id"}}, "require", `field "id" is listed twice`},
		{"log", stages.Options{"format": "xml"}, "format", `"xml" is not one of text, json, value`},
		{"log", stages.Options{"every": 0}, "every", "at least 1"},
		{"stdout", stages.Options{"every": -3}, "every", "at least 1"},
	}
	for _, tc := range tests {
		t.Run(tc.stage+"/"+tc.msg, func(t *testing.T) {
			st, err := stagetest.Build(tc.stage, tc.opts, env)
			if err == nil {
				t.Fatalf("built %T, want an error", st)
			}
			optionError(t, err, tc.option)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not contain %q", err, tc.msg)
			}
		})
	}
}

func TestProduceWithoutProducer(t *testing.T) {
	// lint builds stages without a cluster: options are checked first,
	// then the missing producer is a recognisable error
	_, err := stagetest.Build("produce", stages.Options{"topic": "out", "value": `1 +`}, stagetest.Env(nil, nil))
	optionError(t, err, "value")

	_, err = stagetest.Build("produce", stages.Options{"topic": "out"}, stagetest.Env(nil, nil))
	if !errors.Is(err, stages.ErrNoProducer) {
		t.Fatalf("error %v, want one wrapping stages.ErrNoProducer", err)
	}
	var oe *stages.OptionError
	if errors.As(err, &oe) {
		t.Errorf("a missing producer is not an option error: %v", err)
	}
	if !strings.Contains(err.Error(), `"out"`) {
		t.Errorf("error %q does not name the topic", err)
	}

	env := stagetest.Env(nil, nil)
	env.Producer = func(topic string) (stages.Producer, error) { return nil, errors.New("broker unreachable") }
	_, err = stagetest.Build("produce", stages.Options{"topic": "out"}, env)
	if err == nil || !strings.Contains(err.Error(), "broker unreachable") {
		t.Fatalf("error %v, want the producer's error", err)
	}
}
