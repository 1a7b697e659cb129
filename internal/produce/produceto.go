package produce

import (
	"context"

	"github.com/fencepost-dev/fencepost/stages"
)

// ProduceTo writes records to one partition of topic, whatever their
// keys (a state store's changelog partition is its input partition's),
// and returns the offset after the last record written: the broker's
// base offset of the last acknowledged batch plus its records, or -1 when
// the broker did not say (a batch acknowledged as a duplicate). Errors
// and transactions are as for Produce; a partition the topic does not
// have is a *SinkError.
func (p *Producer) ProduceTo(ctx context.Context, topic string, partition int32, records []stages.Record) (next int64, err error) {
	if len(records) == 0 {
		return -1, nil
	}
	if err := p.enter(); err != nil {
		if p.Transactional() {
			return -1, txnOver(err)
		}
		return -1, err
	}
	wrote, next, err := p.produce(ctx, topic, nil, partition, records)
	if p.leave(err, wrote) {
		return -1, txnOver(err)
	}
	return next, err
}
