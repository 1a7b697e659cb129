package run

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/config"
)

// demoProducer writes the quickstart's events (see config.DemoProducer)
// at a steady rate.
type demoProducer struct {
	cfg  config.DemoProducer
	cl   *kgo.Client
	log  *zap.Logger
	rng  *rand.Rand
	sent int64
}

func newDemoProducer(cfg config.DemoProducer, brokers []string, log *zap.Logger) (*demoProducer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(cfg.Topic),
		kgo.ClientID("fencepost-demo-producer"), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("demo producer: %w", err)
	}
	return &demoProducer{cfg: cfg, cl: cl, log: log, rng: rand.New(rand.NewPCG(17, 42))}, nil
}

// run produces until ctx ends, then flushes what it started (for at
// most a few seconds) and closes its client.
func (d *demoProducer) run(ctx context.Context) {
	defer d.cl.Close()
	tick := min(time.Second/time.Duration(d.cfg.Rate), 50*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_ = d.cl.Flush(fctx)
			return
		case now := <-t.C:
			due := int64(now.Sub(start).Seconds() * float64(d.cfg.Rate))
			for ; d.sent < due; d.sent++ {
				d.cl.Produce(ctx, d.event(d.sent+1, now), d.failed)
			}
		}
	}
}

func (d *demoProducer) failed(_ *kgo.Record, err error) {
	if err != nil && err != context.Canceled {
		d.log.Warn("demo producer: write failed", zap.Error(err))
	}
}

// event returns the id-th event: mostly views, some clicks, few
// purchases; every MalformedEvery-th is not JSON.
func (d *demoProducer) event(id int64, now time.Time) *kgo.Record {
	user := fmt.Sprintf("u%d", d.rng.IntN(d.cfg.Users)+1)
	kind, amount := "view", 0.0
	switch n := d.rng.IntN(100); {
	case n < 8:
		kind, amount = "purchase", float64(d.rng.IntN(20000)+100)/100
	case n < 30:
		kind = "click"
	}
	value := fmt.Appendf(nil, `{"id":%d,"user":%q,"type":%q,"amount":%.2f,"ts":%q}`,
		id, user, kind, amount, now.UTC().Format(time.RFC3339Nano))
	if m := int64(d.cfg.MalformedEvery); m > 0 && id%m == 0 {
		value = fmt.Appendf(nil, `{"id":%d,"user":%q,"type":`, id, user) // cut short: not JSON
	}
	return &kgo.Record{Key: []byte(user), Value: value, Timestamp: now}
}
