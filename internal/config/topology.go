package config

import (
	"context"
	"time"

	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// Topology returns the sub-pipelines run would start
// (pipeline.Pipeline.Topology): the stages cut at each repartition, with
// their sources, stores, tables and repartition topics. It builds the
// stages as loading did, without a cluster, puts them in a pipeline that
// never runs, and closes them. An error is what pipeline.New refuses and
// loading did not check (two repartitions or tables of one name, say),
// or a stage that could not be built without a cluster (it wraps
// stages.ErrNoProducer then).
func (c *Config) Topology() ([]pipeline.Segment, error) {
	pc := c.Pipeline
	if c.Embedded != nil && len(pc.Kafka.Brokers) == 0 {
		pc.Kafka.Brokers = []string{"embedded:1"} // filled in at start
	}
	var (
		outputs []string
		built   []stages.Stage
		opts    []pipeline.Option
	)
	for _, s := range c.Stages {
		st, err := s.Build(lintEnv(&outputs))
		if err != nil {
			closeAll(built)
			return nil, err
		}
		built = append(built, st)
		opts = append(opts, pipeline.WithStage(s.Name, st))
	}
	p, err := pipeline.New(pc, opts...)
	if err != nil {
		closeAll(built)
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	defer func() { _ = p.Close(ctx) }() // closes the stages
	return p.Topology(), nil
}

// closeAll closes the stages that are stages.Closers.
func closeAll(built []stages.Stage) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, st := range built {
		if c, ok := st.(stages.Closer); ok {
			_ = c.Close(ctx)
		}
	}
}
