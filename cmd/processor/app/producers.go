package app

import (
	"errors"
	"slices"
	"sync"

	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// producerPool hands stages one shared producer per topic (the
// stages.Env Producer function) and closes them all at the end.
type producerPool struct {
	kafka pipeline.KafkaConfig
	mu    sync.Mutex
	byTop map[string]*pipeline.Producer
}

func newProducerPool(k pipeline.KafkaConfig) *producerPool {
	return &producerPool{kafka: k, byTop: map[string]*pipeline.Producer{}}
}

// get returns the producer to topic, creating it on first use.
func (pp *producerPool) get(topic string) (stages.Producer, error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if p, ok := pp.byTop[topic]; ok {
		return p, nil
	}
	p, err := pipeline.NewProducer(pp.kafka, topic)
	if err != nil {
		return nil, err
	}
	pp.byTop[topic] = p
	return p, nil
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
	var errs []error
	for _, p := range pp.byTop {
		errs = append(errs, p.Close())
	}
	pp.byTop = map[string]*pipeline.Producer{}
	return errors.Join(errs...)
}
