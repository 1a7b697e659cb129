// Package latency measures end-to-end latency through a pipeline at a
// fixed input rate: a producer writes shop events stamped with the time
// of their Produce call, and a consumer of the output topic compares the
// time it receives each output record with the stamp the pipeline
// carried through.
package latency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/events"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/stats"
)

// Config is one measurement.
type Config struct {
	Brokers []string
	Input   string        // topic to produce the events to
	Watch   string        // topic whose records are timed: the pipeline's output, or Input itself for the floor
	All     bool          // every event reaches Watch (the floor), not only the kept ones
	Rate    int           // events per second
	For     time.Duration // how long to produce
	Warmup  time.Duration // events produced in the first Warmup are not timed
	Drain   time.Duration // how long to wait, after producing, for the last records
	// ReadCommitted makes the consumer of Watch read_committed: it gets
	// an output record only once the transaction that wrote it commits,
	// as the users of an exactly-once pipeline do, so the figures include
	// that visibility delay.
	ReadCommitted bool
}

// Result is a measurement.
type Result struct {
	Produced  int64         // events produced
	Rate      float64       // events per second actually produced
	Expected  int           // timed records that should reach Watch (events after the warm-up)
	Samples   int           // timed records that did, within the drain time
	Duplicate int           // timed records received more than once (not timed again)
	P50, P99  time.Duration // percentiles of the samples (nearest rank)
	Max       time.Duration
	Took      time.Duration // the whole measurement, warm-up and drain included
}

// Run measures. It produces for cfg.For at cfg.Rate, in steps of about
// a millisecond, each record stamped (in its value's "ts", Unix
// microseconds) just before its Produce call, with kgo and no linger.
// The consumer reads Watch from the start, without a group (read_committed
// with cfg.ReadCommitted), and times a record when the poll that returned
// it returns.
func Run(ctx context.Context, cfg Config) (Result, error) {
	began := time.Now()
	if cfg.Rate <= 0 || cfg.For <= cfg.Warmup {
		return Result{}, fmt.Errorf("latency: rate %d and duration %v (warm-up %v) measure nothing", cfg.Rate, cfg.For, cfg.Warmup)
	}
	cons, err := kgo.NewClient(consumerOpts(cfg)...)
	if err != nil {
		return Result{}, err
	}
	defer cons.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.DefaultProduceTopic(cfg.Input),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	if err != nil {
		return Result{}, err
	}
	defer prod.Close()

	var firstTimed atomic.Int64 // first event id that is timed; -1 until known
	firstTimed.Store(-1)
	rec := newRecorder(&firstTimed)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var consumeErr error
	wg.Go(func() { consumeErr = consume(ctx, cons, rec) })
	// Give the consumer time to find the topic's partitions before the
	// first record, so it is not the one waiting at the start.
	time.Sleep(300 * time.Millisecond)

	produced, rate, err := produce(ctx, prod, cfg, &firstTimed)
	if err != nil {
		cancel()
		wg.Wait()
		return Result{}, err
	}
	first := firstTimed.Load()
	expected := 0
	for id := first; id < produced; id++ {
		if cfg.All || events.Make(id, 0).Type == events.Kept {
			expected++
		}
	}
	deadline := time.Now().Add(cfg.Drain)
	for rec.timed.Load() < int64(expected) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if consumeErr != nil {
		return Result{}, consumeErr
	}
	lat, dups := rec.samples(first)
	res := summarize(produced, rate, expected, lat, dups)
	res.Took = time.Since(began)
	return res, nil
}

// consumerOpts are the options of the consumer of cfg.Watch.
func consumerOpts(cfg Config) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumeTopics(cfg.Watch),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(time.Second)}
	if cfg.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	return opts
}

// summarize sorts the samples and takes their percentiles.
func summarize(produced int64, rate float64, expected int, lat []time.Duration, dups int) Result {
	slices.Sort(lat)
	r := Result{Produced: produced, Rate: rate, Expected: expected, Samples: len(lat), Duplicate: dups}
	if len(lat) > 0 {
		r.P50, r.P99, r.Max = stats.Percentile(lat, 50), stats.Percentile(lat, 99), lat[len(lat)-1]
	}
	return r
}

// produce writes events 0, 1, ... at cfg.Rate for cfg.For and sets
// firstTimed to the first id produced after the warm-up. It returns the
// number produced and the rate achieved.
func produce(ctx context.Context, cl *kgo.Client, cfg Config, firstTimed *atomic.Int64) (int64, float64, error) {
	var failed atomic.Pointer[error]
	start := time.Now()
	var sent int64
	for {
		elapsed := time.Since(start)
		if elapsed >= cfg.For || ctx.Err() != nil {
			break
		}
		if elapsed >= cfg.Warmup && firstTimed.Load() < 0 {
			firstTimed.Store(sent)
		}
		due := int64(elapsed.Seconds() * float64(cfg.Rate))
		for ; sent < due; sent++ {
			now := time.Now().UnixMicro()
			e := events.Make(sent, now)
			v, err := json.Marshal(e)
			if err != nil {
				return 0, 0, err
			}
			cl.Produce(ctx, &kgo.Record{Key: events.Key(e), Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			})
		}
		time.Sleep(time.Until(start.Add(time.Duration(float64(sent+1) / float64(cfg.Rate) * float64(time.Second)))))
	}
	took := time.Since(start)
	if err := cl.Flush(ctx); err != nil {
		return 0, 0, fmt.Errorf("latency: produce to %s: %w", cfg.Input, err)
	}
	if p := failed.Load(); p != nil {
		return 0, 0, fmt.Errorf("latency: produce to %s: %w", cfg.Input, *p)
	}
	return sent, float64(sent) / took.Seconds(), nil
}

// stamp is the part of an input or output value the consumer needs.
type stamp struct {
	ID    *int64 `json:"id"`    // input events
	Order *int64 `json:"order"` // outputs
	TS    int64  `json:"ts"`
}

// consume times every record of the watched topic until ctx ends.
func consume(ctx context.Context, cl *kgo.Client, rec *recorder) error {
	for {
		fs := cl.PollFetches(ctx)
		now := time.Now().UnixMicro()
		if ctx.Err() != nil {
			return nil
		}
		var errs []error
		fs.EachError(func(t string, p int32, err error) { errs = append(errs, fmt.Errorf("%s/%d: %w", t, p, err)) })
		if len(errs) > 0 {
			return fmt.Errorf("latency: consume: %w", errors.Join(errs...))
		}
		fs.EachRecord(func(r *kgo.Record) {
			var s stamp
			if err := json.Unmarshal(r.Value, &s); err != nil {
				return
			}
			id := s.ID
			if id == nil {
				id = s.Order
			}
			if id != nil {
				rec.add(*id, time.Duration(now-s.TS)*time.Microsecond)
			}
		})
	}
}

// recorder holds each id's latency, the first time it was seen.
type recorder struct {
	first *atomic.Int64 // ids from this one on are timed; -1 until the producer knows
	timed atomic.Int64  // distinct timed ids seen

	mu   sync.Mutex
	lat  map[int64]time.Duration
	dups map[int64]int
}

func newRecorder(first *atomic.Int64) *recorder {
	return &recorder{first: first, lat: map[int64]time.Duration{}, dups: map[int64]int{}}
}

// add records id's latency d. An id at or past the first timed one is
// always produced after the producer set it, so the count is exact.
func (r *recorder) add(id int64, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.lat[id]; ok {
		r.dups[id]++
		return
	}
	r.lat[id] = d
	if f := r.first.Load(); f >= 0 && id >= f {
		r.timed.Add(1)
	}
}

// samples returns the latencies of ids from first on, and how many of
// their records came more than once.
func (r *recorder) samples(first int64) ([]time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	dups := 0
	for id, d := range r.lat {
		if id >= first {
			out = append(out, d)
			dups += r.dups[id]
		}
	}
	return out, dups
}
