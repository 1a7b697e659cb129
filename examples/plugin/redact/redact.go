// Package redact is an example fencepost stage: it replaces what a
// regular expression matches in record values. Importing it registers
// the stage "redact" in stages.Default, so configuration files can name
// it.
package redact

import (
	"context"
	"errors"
	"regexp"

	"github.com/fencepost-dev/fencepost/stages"
)

func init() {
	stages.Register(stages.Spec{
		Name:    "redact",
		Summary: "replace what a regular expression matches in record values",
		Options: []stages.OptionSpec{
			{Name: "pattern", Type: stages.TypeString, Required: true, Doc: "RE2 regular expression to replace"},
			{Name: "with", Type: stages.TypeString, Default: "***", Doc: "replacement text"},
		},
		New: newRedact,
		// Its only effect is the records it returns (the debug log line
		// is a diagnostic), so it takes part in exactly-once.
		ExactlyOnce: true,
	})
}

type redact struct {
	re   *regexp.Regexp
	with []byte
	log  stages.Logger
}

func newRedact(opts stages.Options, env stages.Env) (stages.Stage, error) {
	pattern, err := opts.String("pattern")
	if err != nil {
		return nil, err
	}
	with, err := opts.String("with")
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, &stages.OptionError{Option: "pattern", Err: err}
	}
	return &redact{re: re, with: []byte(with), log: env.Log}, nil
}

// Process redacts each record's value. A null value fails its record for
// good (there is nothing to redact: the producer of the topic is at
// fault), which sends it to the dead-letter topic.
func (s *redact) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	return stages.ForEach(in, func(r *stages.Record, emit func(stages.Record)) error {
		if r.Value == nil {
			s.log.Debug("null value", "partition", r.Partition, "offset", r.Offset)
			return stages.Permanent(errors.New("null value: nothing to redact (check the producer of this topic)"))
		}
		out := *r                                    // a copy: its Offset says where it comes from
		out.Value = s.re.ReplaceAll(r.Value, s.with) // a new slice; r.Value is untouched
		emit(out)
		return nil
	})
}
