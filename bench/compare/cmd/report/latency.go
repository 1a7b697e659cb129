package main

import (
	"context"
	"fmt"
	"time"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/kafkaio"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/latency"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/report"
)

// allLatencyVariants are the configurations the latency phase can run:
// each engine at its defaults and at the settings that minimise latency,
// and fencepost at its defaults with exactly-once (read read_committed,
// so its figures include the wait for the transaction's commit); with
// the streams phase, the Kafka Streams variants too.
func (s *suite) allLatencyVariants() []report.LatencyVariant {
	vs := []report.LatencyVariant{
		{Variant: pipebench.Variant{Name: "fencepost, defaults", Engine: pipebench.Fencepost, Config: s.configPath("fencepost-defaults.yaml")},
			Settings: "none"},
		{Variant: pipebench.Variant{Name: "fencepost, low latency", Engine: pipebench.Fencepost, Config: s.configPath("fencepost-latency.yaml")},
			Settings: "`concurrency: 8`, `ordering: key`"},
		{Variant: pipebench.Variant{Name: "fencepost, exactly-once", Engine: pipebench.Fencepost, Config: s.configPath("fencepost-exactly-once.yaml"), ExactlyOnce: true,
			Baseline: "fencepost, defaults"},
			Settings: "`guarantee: exactly_once` (read read_committed)"},
		{Variant: pipebench.Variant{Name: "Benthos, defaults", Engine: pipebench.Benthos, Config: s.configPath("benthos-defaults.yaml")},
			Settings: "none"},
		{Variant: pipebench.Variant{Name: "Benthos, low latency", Engine: pipebench.Benthos, Config: s.configPath("benthos-latency.yaml")},
			Settings: "output `max_in_flight: 64`"},
		{Variant: pipebench.Variant{Name: "Benthos, tuned", Engine: pipebench.Benthos, Config: s.configPath("benthos-tuned.yaml"), Env: benthosTunedEnv},
			Settings: "throughput: input batches of 250 or 2 ms, `checkpoint_limit: 100000`, `max_in_flight: 64`, GOGC=200"},
	}
	if s.phases["streams"] {
		vs = append(vs, s.streamsLatencyVariants()...)
	}
	return vs
}

// latencyVariants are the variants -variants picks of allLatencyVariants.
func (s *suite) latencyVariants() []report.LatencyVariant {
	return picked(s.pick, s.allLatencyVariants(), func(v report.LatencyVariant) string { return v.Name })
}

// latency runs the latency benchmark at half the best throughput (or
// -latency-rate) and at -latency-low-rate.
func (s *suite) latency(ctx context.Context, env pipebench.Env, adm *kafkaio.Admin) error {
	o := s.opts
	main := &report.Latency{Rate: o.latencyRate, RateFrom: "set with -latency-rate"}
	if main.Rate == 0 {
		best := 0.0
		if s.rep.Pipeline != nil {
			for _, v := range s.rep.Pipeline.Variants {
				best = max(best, v.Medians().RecordsPerSec)
			}
		}
		if best == 0 {
			return errNoRate
		}
		main.Rate = int(best / 2)
		main.RateFrom = fmt.Sprintf("half the best median throughput of the pipeline benchmark above (%.0f records/s)", best)
	}
	ls := []*report.Latency{main}
	if o.latencyLow > 0 {
		ls = append(ls, &report.Latency{Rate: o.latencyLow, RateFrom: "a moderate rate, set with -latency-low-rate"})
	}
	for _, l := range ls {
		l.For, l.Warmup, l.Variants = o.latencyFor, o.latencyWarmup, s.latencyVariants()
		s.rep.Latency = append(s.rep.Latency, l)
		if err := s.latencyAt(ctx, env, adm, l); err != nil {
			return err
		}
	}
	return nil
}

// latencyAt measures the floor once, then every variant -runs times.
func (s *suite) latencyAt(ctx context.Context, env pipebench.Env, adm *kafkaio.Admin, l *report.Latency) error {
	o := s.opts
	cfg := latency.Config{Brokers: env.Brokers, Rate: l.Rate, For: l.For, Warmup: l.Warmup, Drain: 5 * time.Second}
	// The floor: the same producer and consumer with no pipeline between
	// them, what the method itself adds.
	end := s.prog.step(fmt.Sprintf("latency: the floor at %d events/s (no pipeline)", l.Rate), s.latencyWeight())
	topic := fmt.Sprintf("lat-floor-%d", l.Rate)
	err := adm.CreateTopic(ctx, topic, o.partitions)
	var res latency.Result
	if err == nil {
		c := cfg
		c.Input, c.Watch, c.All = topic, topic, true
		res, err = latency.Run(ctx, c)
	}
	end()
	if err != nil {
		return fmt.Errorf("latency floor: %w", err)
	}
	l.Floor = append(l.Floor, res)
	s.logLatency("floor", l.Rate, 1, res, 0)
	_ = adm.DeleteTopics(ctx, topic)
	for run := 1; run <= o.runs; run++ {
		for i := range l.Variants {
			v := &l.Variants[i]
			end := s.prog.step(fmt.Sprintf("latency: %s at %d events/s, run %d of %d", v.Name, l.Rate, run, o.runs), s.latencyWeight())
			r, err := s.latencyRun(ctx, env, adm, v.Variant, cfg, fmt.Sprintf("lat%d-%s-r%d", l.Rate, slug(v.Name), run))
			end()
			if err != nil {
				return fmt.Errorf("latency %s at %d events/s, run %d: %w", v.Name, l.Rate, run, err)
			}
			v.Runs = append(v.Runs, r)
			s.logLatency(v.Name, l.Rate, run, r.Result, r.CPU.Seconds()/r.Took.Seconds())
		}
	}
	return nil
}

func (s *suite) logLatency(name string, rate, run int, r latency.Result, cores float64) {
	s.prog.logf("latency  %-22s %6d/s run %d: p50 %8.2f ms  p99 %8.2f ms  max %8.2f ms  %d of %d timed records, %.0f events/s, %.2f cores",
		name, rate, run, ms(r.P50), ms(r.P99), ms(r.Max), r.Samples, r.Expected, r.Rate, cores)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// latencyRun starts v on fresh topics, waits until its group holds every
// input partition, and measures.
func (s *suite) latencyRun(ctx context.Context, env pipebench.Env, adm *kafkaio.Admin, v pipebench.Variant, cfg latency.Config, tag string) (report.LatencyRun, error) {
	input, output, group := tag+"-in", tag+"-out", tag
	for _, t := range []string{input, output} {
		if err := adm.CreateTopic(ctx, t, s.opts.partitions); err != nil {
			return report.LatencyRun{}, err
		}
	}
	defer func() { _ = adm.DeleteTopics(context.Background(), input, output) }()
	child, err := env.Start(v, tag, group, input, output)
	if err != nil {
		return report.LatencyRun{}, err
	}
	defer func() { _, _ = child.Stop(10 * time.Second) }()
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := adm.Assigned(ctx, group, input)
		if err == nil && n == s.opts.partitions {
			break
		}
		if exited, werr := child.Exited(); exited {
			return report.LatencyRun{}, fmt.Errorf("%s exited (%v); its log ends:\n%s", tag, werr, child.Tail(15))
		}
		if time.Now().After(deadline) {
			return report.LatencyRun{}, fmt.Errorf("group %s holds %d of %d partitions after a minute (%v)", group, n, s.opts.partitions, err)
		}
		select {
		case <-ctx.Done():
			return report.LatencyRun{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	cfg.Input, cfg.Watch, cfg.ReadCommitted = input, output, v.ExactlyOnce
	cpu0, err := child.CPU()
	if err != nil {
		return report.LatencyRun{}, err
	}
	res, err := latency.Run(ctx, cfg)
	if err != nil {
		return report.LatencyRun{}, err
	}
	cpu1, err := child.CPU()
	if err != nil {
		return report.LatencyRun{}, err
	}
	if exited, werr := child.Exited(); exited {
		return report.LatencyRun{}, fmt.Errorf("%s exited during the run (%v); its log ends:\n%s", tag, werr, child.Tail(15))
	}
	return report.LatencyRun{Result: res, CPU: cpu1 - cpu0}, nil
}
