package produce

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go/protocol/describeconfigs"
)

// DefaultMaxBatchBytes is the batch limit used for a topic whose
// max.message.bytes cannot be read (no DescribeConfigs permission, an
// old broker): Kafka's default max.message.bytes, 1 MiB (and 12 bytes).
const DefaultMaxBatchBytes = 1<<20 + 12

// limitSource says where a batch limit came from, for RecordTooLargeError.
type limitSource uint8

const (
	limitConfig  limitSource = iota + 1 // Config.MaxBatchBytes
	limitTopic                          // the topic's max.message.bytes
	limitDefault                        // DefaultMaxBatchBytes: the topic's could not be read
)

// batchLimit is one topic's batch limit and where it came from.
type batchLimit struct {
	bytes int
	from  limitSource
	err   error // limitDefault: why the topic's max.message.bytes was not read
}

// limitRetry is how long a limit that fell back to the default is kept
// before the topic's max.message.bytes is asked for again.
const limitRetry = time.Minute

// limitFor returns the batch limit of topic: Config.MaxBatchBytes when
// set, else the topic's max.message.bytes, read once (DescribeConfigs)
// and cached; DefaultMaxBatchBytes for a while when it cannot be read.
func (p *Producer) limitFor(ctx context.Context, topic string) batchLimit {
	if p.cfg.MaxBatchBytes > 0 {
		return batchLimit{bytes: p.cfg.MaxBatchBytes, from: limitConfig}
	}
	p.mu.Lock()
	l, ok := p.limits[topic]
	p.mu.Unlock()
	if ok && (l.from == limitTopic || time.Since(l.at) < limitRetry) {
		return l.batchLimit
	}
	n, err := p.topicMaxMessageBytes(ctx, topic)
	if err != nil {
		if ctx.Err() != nil {
			// not the broker's answer: ask again on the next call
			return batchLimit{bytes: DefaultMaxBatchBytes, from: limitDefault, err: err}
		}
		l = cachedLimit{batchLimit: batchLimit{bytes: DefaultMaxBatchBytes, from: limitDefault, err: err}, at: time.Now()}
	} else {
		l = cachedLimit{batchLimit: batchLimit{bytes: n, from: limitTopic}, at: time.Now()}
	}
	p.mu.Lock()
	if p.limits == nil {
		p.limits = map[string]cachedLimit{}
	}
	p.limits[topic] = l
	p.mu.Unlock()
	return l.batchLimit
}

// cachedLimit is a batchLimit with when it was read.
type cachedLimit struct {
	batchLimit
	at time.Time
}

// topicMaxMessageBytes reads the topic's max.message.bytes (the broker's
// message.max.bytes when the topic does not set it).
func (p *Producer) topicMaxMessageBytes(ctx context.Context, topic string) (int, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := p.client.RoundTrip(dctx, &describeconfigs.Request{Resources: []describeconfigs.RequestResource{{
		ResourceType: 2, ResourceName: topic, ConfigNames: []string{"max.message.bytes"},
	}}})
	if err != nil {
		return 0, err
	}
	for _, r := range resp.(*describeconfigs.Response).Resources {
		if r.ErrorCode != 0 {
			return 0, fmt.Errorf("DescribeConfigs of topic %q: error code %d: %s", topic, r.ErrorCode, r.ErrorMessage)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "max.message.bytes" {
				n, err := strconv.Atoi(e.ConfigValue)
				if err != nil || n <= 0 {
					return 0, fmt.Errorf("topic %q has max.message.bytes %q, not a positive number", topic, e.ConfigValue)
				}
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("DescribeConfigs of topic %q did not give max.message.bytes", topic)
}
