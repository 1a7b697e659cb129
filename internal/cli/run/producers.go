package run

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// producerPool hands stages one shared producer per topic (the
// stages.Env Producer function) from the pipeline's Outputs, measures
// what each writes, and closes them all at the end.
type producerPool struct {
	outputs *pipeline.Outputs
	metrics *metrics
	mu      sync.Mutex
	byTop   map[string]*measuredProducer
}

func newProducerPool(cfg pipeline.Config, m *metrics) (*producerPool, error) {
	out, err := pipeline.NewOutputs(cfg)
	if err != nil {
		return nil, err
	}
	return &producerPool{outputs: out, metrics: m, byTop: map[string]*measuredProducer{}}, nil
}

// get returns the producer to topic, creating it on first use.
func (pp *producerPool) get(topic string) (stages.Producer, error) {
	return pp.open(topic, true)
}

// deadLetters returns the producer to the dead-letter topic: what it
// writes is measured but not counted as produced in the summary.
func (pp *producerPool) deadLetters(topic string) (stages.Producer, error) {
	return pp.open(topic, false)
}

func (pp *producerPool) open(topic string, output bool) (*measuredProducer, error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if p, ok := pp.byTop[topic]; ok {
		if output {
			p.output.Store(true)
		}
		return p, nil
	}
	p, err := pp.outputs.Producer(topic)
	if err != nil {
		return nil, err
	}
	mp := &measuredProducer{p: p, topic: topic, metrics: pp.metrics}
	mp.output.Store(output)
	pp.byTop[topic] = mp
	return mp, nil
}

// topics returns the topics producers were opened for, sorted.
func (pp *producerPool) topics() []string {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	out := make([]string, 0, len(pp.byTop))
	for t := range pp.byTop {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// close flushes and closes every producer; call it after the last
// stage returned.
func (pp *producerPool) close() error {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.byTop = map[string]*measuredProducer{}
	return pp.outputs.Close()
}

// measuredProducer records every Produce call in the metrics.
type measuredProducer struct {
	p       stages.Producer
	topic   string
	output  atomic.Bool // a stage writes to it (it is not only the dead-letter topic)
	metrics *metrics
}

// Produce implements stages.Producer.
func (mp *measuredProducer) Produce(ctx context.Context, records []stages.Record) error {
	began := time.Now()
	err := mp.p.Produce(ctx, records)
	if mp.metrics != nil {
		mp.metrics.produceDone(mp.topic, records, time.Since(began), err, mp.output.Load())
	}
	return err
}
