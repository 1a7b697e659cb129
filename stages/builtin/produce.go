package builtin

import (
	"context"
	"fmt"

	"github.com/fencepost-dev/fencepost/internal/limits"
	"github.com/fencepost-dev/fencepost/stages"
)

func init() {
	stages.Register(stages.Spec{
		Name:    "produce",
		Summary: "write each record to a topic; pass the input on once the write is acknowledged",
		Options: []stages.OptionSpec{
			{Name: "topic", Type: stages.TypeString, Required: true, Doc: "topic to write to, on the pipeline's cluster (acks=all)"},
			{Name: "key", Type: stages.TypeExpr, Doc: "expression for the written key; absent: the input record's key." + convertDoc},
			{Name: "value", Type: stages.TypeExpr, Doc: "expression for the written value; absent: the input record's value." + convertDoc},
			{Name: "headers", Type: stages.TypeStringMap, Doc: "header name -> expression: sets those headers on the written " +
				"record, replacing any of the same name; the input's other headers are kept." + convertDoc},
		},
		New: newProduce,
		// It writes only through Env.Producer, which is transactional
		// under exactly_once.
		ExactlyOnce: true,
	})
}

// produce writes converted records and passes its input on after the
// acknowledgement.
type produce struct {
	topic string
	t     *transform
	p     stages.Producer
}

func newProduce(opts stages.Options, env stages.Env) (stages.Stage, error) {
	topic, err := opts.String("topic")
	if err != nil {
		return nil, err
	}
	if err := limits.TopicName(topic); err != nil {
		return nil, &stages.OptionError{Option: "topic", Err: err}
	}
	t, err := compileTransform(opts)
	if err != nil {
		return nil, err
	}
	if env.Producer == nil {
		return nil, fmt.Errorf("produce to %q: %w (the pipeline must run with a Kafka cluster configured)", topic, stages.ErrNoProducer)
	}
	p, err := env.Producer(topic)
	if err != nil {
		return nil, fmt.Errorf("produce to %q: opening the producer: %w", topic, err)
	}
	if p == nil {
		return nil, fmt.Errorf("produce to %q: %w (Env.Producer returned nil)", topic, stages.ErrNoProducer)
	}
	return &produce{topic: topic, t: t, p: p}, nil
}

// Process converts the batch, writes it with one Produce call and, once
// that returned nil (every record acknowledged), returns in itself. A
// Produce error is returned as is: nothing of the batch counts as done.
// Records whose expressions fail are not written and are reported in a
// *stages.RecordErrors (after the others were acknowledged). Once ctx
// has ended it returns ctx.Err() without writing (checked before each
// record; the Produce call gets ctx).
//
// A written record has the stage's topic, Partition -1 and Offset -1
// (the producer picks the partition from the key: the pipeline's as
// kafka.partitioner says, murmur2 by default), the input's timestamp,
// and the key, value and headers described by the options.
func (s *produce) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	e := newEvaluator(ctx, s.t.reads, len(in))
	batch := make([]stages.Record, 0, len(in))
	var re stages.RecordErrors // inputs whose record is in batch, and the failed ones
	done := ctx.Done()
	for i := range in {
		if ended(done) {
			return nil, ctx.Err()
		}
		r, err := in[i], e.load(&in[i])
		if err == nil {
			r, err = s.t.apply(e, in[i])
		}
		if err != nil {
			if !re.Failed() {
				for j := range in[:i] {
					re.Emit(j, in[j])
				}
			}
			re.Fail(i, stages.Permanent(err))
			continue
		}
		if re.Failed() {
			re.Emit(i, in[i])
		}
		r.Topic, r.Partition, r.Offset = s.topic, -1, -1
		batch = append(batch, r)
	}
	if len(batch) > 0 {
		if err := s.p.Produce(ctx, batch); err != nil {
			return nil, err
		}
	}
	if re.Failed() {
		return nil, &re
	}
	return in, nil
}
