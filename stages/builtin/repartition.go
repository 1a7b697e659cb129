package builtin

import (
	"fmt"

	"github.com/fencepost-dev/fencepost/stages"
)

func init() {
	stages.Register(stages.Spec{
		Name:    "repartition",
		Summary: "re-key records and send them through a repartition topic, so the stages after it see each key on one partition",
		Options: []stages.OptionSpec{
			{Name: "key", Type: stages.TypeExpr, Required: true, Doc: "expression for the new key (a null key fails the record)." + convertDoc},
			{Name: "topic", Type: stages.TypeString, Default: "repartition", Doc: "names the repartition topic, " +
				"<group>-<topic>-repartition ([a-zA-Z0-9._-]; unique in the pipeline). It is created at start with the " +
				"consumed topic's partition count; its records are placed by kafka.partitioner (murmur2: as Java clients)."},
		},
		New: newRepartition,
		// Its only effect is the records it returns, which the pipeline
		// writes in the transaction.
		ExactlyOnce: true,
	})
}

// repartitionStage sets each record's new key; the pipeline writes its
// output to the repartition topic (stages.Repartitioner).
type repartitionStage struct {
	*mapStage
	name string
}

func newRepartition(opts stages.Options, env stages.Env) (stages.Stage, error) {
	name, _ := opts.String("topic")
	if stages.ValidStoreName(name) != nil {
		return nil, &stages.OptionError{Option: "topic", Err: fmt.Errorf("%q: use 1 to 200 of the characters a-z A-Z 0-9 . _ - (it is part of a topic name)", name)}
	}
	m, err := newMap(stages.Options{"key": opts["key"]}, env)
	if err != nil {
		return nil, fmt.Errorf("repartition: %w", err)
	}
	return &repartitionStage{mapStage: m.(*mapStage), name: name}, nil
}

// RepartitionName implements stages.Repartitioner.
func (r *repartitionStage) RepartitionName() string { return r.name }
