package stages_test

import (
	"context"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
)

// A factory never has to check Env: Build fills what was left out, and
// passes on what was given.
func TestSpecBuildCompletesEnv(t *testing.T) {
	given := &recordingLogger{}
	for _, tt := range []struct {
		name    string
		env     stages.Env
		wantLog stages.Logger
	}{
		{"zero env", stages.Env{}, stages.NopLogger},
		{"logger given", stages.Env{Log: given}, given},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got stages.Env
			spec := stages.Spec{Name: "probe", New: func(_ stages.Options, env stages.Env) (stages.Stage, error) {
				got = env
				return stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) { return in, nil }), nil
			}}
			if _, err := spec.Build(stages.Options{}, tt.env); err != nil {
				t.Fatal(err)
			}
			if got.Log != tt.wantLog {
				t.Errorf("Log = %#v, want %#v", got.Log, tt.wantLog)
			}
			if got.Stdout == nil {
				t.Error("Stdout is nil")
			} else if _, err := got.Stdout.Write([]byte("x")); err != nil {
				t.Errorf("Stdout.Write: %v", err)
			}
		})
	}
}

type recordingLogger struct{ stages.Logger }
