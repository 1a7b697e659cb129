package stagetest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// upper is a user's stage: it upper-cases values, after a prefix, and
// rejects empty values.
type upper struct{ prefix []byte }

func (u upper) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	return stages.ForEach(in, func(r *stages.Record, emit func(stages.Record)) error {
		if len(r.Value) == 0 {
			return stages.Permanent(errors.New("empty value"))
		}
		out := *r // a copy: its fields are ours to set
		// a new slice: the input's bytes are never written to
		out.Value = append(append([]byte(nil), u.prefix...), bytes.ToUpper(r.Value)...)
		emit(out)
		return nil
	})
}

func init() {
	stages.Register(stages.Spec{
		Name:    "upper",
		Summary: "upper-case record values",
		Options: []stages.OptionSpec{
			{Name: "prefix", Type: stages.TypeString, Default: "", Doc: "text put before each value"},
		},
		New: func(opts stages.Options, _ stages.Env) (stages.Stage, error) {
			prefix, err := opts.String("prefix")
			if err != nil {
				return nil, err
			}
			return upper{prefix: []byte(prefix)}, nil
		},
	})
}

// A custom stage, registered in init, built from options and run through
// the harness: one record is rejected and dead-lettered, the offset to
// commit covers all three. In a test, write stagetest.Run(t, records,
// step): the run then fails the test if it breaks a promise of the
// record path.
func Example() {
	st, err := stagetest.Build("upper", stages.Options{"prefix": "> "}, stagetest.Env(nil, nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	records := []stages.Record{
		{Topic: "orders", Offset: 41, Value: []byte("hello")},
		{Topic: "orders", Offset: 42},
		{Topic: "orders", Offset: 43, Value: []byte("bye")},
	}
	res := stagetest.Runner{}.RunContext(context.Background(), nil, records, stagetest.NamedStage{Name: "upper", Stage: st})

	for _, r := range res.Outputs {
		fmt.Printf("out %d: %s\n", r.Offset, r.Value)
	}
	for _, r := range res.DeadLetters {
		stage, _ := r.Header(stages.HeaderErrorStage)
		msg, _ := r.Header(stages.HeaderErrorMessage)
		fmt.Printf("dead letter %d: %s: %s\n", r.Offset, stage, msg)
	}
	fmt.Println("commit:", res.Marks[stagetest.Partition{Topic: "orders"}])
	fmt.Println("violations:", res.Check())
	// Output:
	// out 41: > HELLO
	// out 43: > BYE
	// dead letter 42: upper: empty value
	// commit: 44
	// violations: <nil>
}
