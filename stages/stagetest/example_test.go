package stagetest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/process"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// upper is a user's stage: it upper-cases values, after a prefix, and
// rejects empty values.
type upper struct{ prefix []byte }

func (u upper) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	var re stages.RecordErrors
	for i, r := range in { // r is a copy: setting its fields leaves in alone
		if len(r.Value) == 0 {
			re.Fail(i, stages.Permanent(errors.New("empty value")))
			continue
		}
		// a new slice: the input's bytes are never written to
		r.Value = append(append([]byte(nil), u.prefix...), bytes.ToUpper(r.Value)...)
		re.Emit(i, r)
	}
	if re.Failed() {
		return nil, &re
	}
	return re.Out, nil
}

func init() {
	stages.Register(stages.Spec{
		Name:    "upper",
		Summary: "upper-case record values",
		Options: []stages.OptionSpec{
			{Name: "prefix", Type: stages.TypeString, Default: "", Doc: "text put before each value"},
		},
		New: func(opts stages.Options, _ stages.Env) (stages.Stage, error) {
			return upper{prefix: []byte(opts.String("prefix"))}, nil
		},
	})
}

// A custom stage, registered in init, built from options and run through
// the harness: one record is rejected and dead-lettered, the offset to
// commit covers all three.
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
	res := stagetest.Run(context.Background(), records, process.FailurePolicy{},
		process.NamedStage{Name: "upper", Stage: st})

	for _, r := range res.Outputs {
		fmt.Printf("out %d: %s\n", r.Offset, r.Value)
	}
	for _, r := range res.DeadLetters {
		stage, _ := r.Header(process.HeaderStage)
		msg, _ := r.Header(process.HeaderError)
		fmt.Printf("dead letter %d: %s: %s\n", r.Offset, stage, msg)
	}
	fmt.Println("commit:", res.Marks[offsetstore.TopicPartition{Topic: "orders", Partition: 0}])
	// Output:
	// out 41: > HELLO
	// out 43: > BYE
	// dead letter 42: upper: empty value
	// commit: 44
}
