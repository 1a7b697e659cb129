package kafkatools

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceDefaultBatch is kgo's default batch limit, used when the
// topic's max.message.bytes cannot be read.
const produceDefaultBatch = 1000012

// batchLimitOpts are the client options that let produce write records
// as large as the topic accepts: the batch limit is kafka.max_batch_bytes
// from the configuration file when set, else the topic's
// max.message.bytes (DescribeConfigs through cl, the client that reached
// the cluster), else kgo's default (about 1 MB). A record over it is
// refused as MESSAGE_TOO_LARGE before it is sent.
func (f *clusterFlags) batchLimitOpts(ctx context.Context, c *cli, cl *kgo.Client, topic string) []kgo.Opt {
	k, _, err := f.settings(c)
	if err != nil {
		return nil // the client's creation reports it
	}
	limit := int64(k.MaxBatchBytes)
	if limit <= 0 {
		dctx, cancel := context.WithTimeout(ctx, min(10*time.Second, max(f.timeout, time.Second)))
		limit = topicMaxMessageBytes(dctx, kadm.NewClient(cl), topic, produceDefaultBatch)
		cancel()
	}
	limit = min(max(limit, 1<<10), 1<<30-1<<16)
	return []kgo.Opt{kgo.ProducerBatchMaxBytes(int32(limit)), kgo.BrokerMaxWriteBytes(int32(max(100<<20, limit+1<<16)))}
}

// topicMaxMessageBytes returns the topic's max.message.bytes, or def
// when it cannot be read.
func topicMaxMessageBytes(ctx context.Context, adm *kadm.Client, topic string, def int64) int64 {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return def
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return def
	}
	for _, c := range rc.Configs {
		if c.Key == "max.message.bytes" && c.Value != nil {
			if n, err := strconv.ParseInt(*c.Value, 10, 32); err == nil && n > 0 {
				return n
			}
		}
	}
	return def
}
