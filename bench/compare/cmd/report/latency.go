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

// latencyVariants are the configurations the latency phase runs: each
// engine at its defaults and at the settings that minimise latency.
func (s *suite) latencyVariants() []report.LatencyVariant {
	return []report.LatencyVariant{
		{Variant: pipebench.Variant{Name: "fencepost, defaults", Engine: pipebench.Fencepost, Config: s.configPath("fencepost-defaults.yaml")},
			Settings: "none set"},
		{Variant: pipebench.Variant{Name: "fencepost, low latency", Engine: pipebench.Fencepost, Config: s.configPath("fencepost-latency.yaml")},
			Settings: "see fencepost-latency.yaml"},
		{Variant: pipebench.Variant{Name: "Benthos, defaults", Engine: pipebench.Benthos, Config: s.configPath("benthos-defaults.yaml")},
			Settings: "none set"},
		{Variant: pipebench.Variant{Name: "Benthos, low latency", Engine: pipebench.Benthos, Config: s.configPath("benthos-latency.yaml")},
			Settings: "see benthos-latency.yaml"},
	}
}

func (s *suite) latency(ctx context.Context, env pipebench.Env, adm *kafkaio.Admin) error {
	o := s.opts
	l := &report.Latency{Rate: o.latencyRate, For: o.latencyFor, Warmup: o.latencyWarmup, Variants: s.latencyVariants()}
	l.RateFrom = "set with -latency-rate"
	if l.Rate == 0 {
		best := 0.0
		if s.rep.Pipeline != nil {
			for _, v := range s.rep.Pipeline.Variants {
				best = max(best, v.Medians().RecordsPerSec)
			}
		}
		if best == 0 {
			return errNoRate
		}
		l.Rate = int(best / 2)
		l.RateFrom = fmt.Sprintf("half the best median throughput of the pipeline benchmark (%.0f records/s)", best)
	}
	s.rep.Latency = l
	cfg := latency.Config{Brokers: env.Brokers, Rate: l.Rate, For: l.For, Warmup: l.Warmup, Drain: 10 * time.Second}
	parts := o.partitions
	for run := 1; run <= o.runs; run++ {
		// The floor: the same producer and consumer with no pipeline
		// between them, what the method itself adds.
		if run == 1 {
			end := s.prog.step("latency: the floor (producer to consumer, no pipeline)", s.latencyWeight())
			topic := "lat-floor"
			err := adm.CreateTopic(ctx, topic, parts)
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
			s.logLatency("floor", run, res, 0)
			_ = adm.DeleteTopics(ctx, topic)
		}
		for i := range l.Variants {
			v := &l.Variants[i]
			end := s.prog.step(fmt.Sprintf("latency: %s at %d events/s, run %d of %d", v.Name, l.Rate, run, o.runs), s.latencyWeight())
			r, err := s.latencyRun(ctx, env, adm, v.Variant, cfg, fmt.Sprintf("lat-%s-r%d", slug(v.Name), run))
			end()
			if err != nil {
				return fmt.Errorf("latency %s, run %d: %w", v.Name, run, err)
			}
			v.Runs = append(v.Runs, r)
			s.logLatency(v.Name, run, r.Result, r.CPU.Seconds()/r.Took.Seconds())
		}
	}
	return nil
}

func (s *suite) logLatency(name string, run int, r latency.Result, cores float64) {
	s.prog.logf("latency  %-22s run %d: p50 %7.2f ms  p99 %7.2f ms  max %8.2f ms  %d of %d timed records at %.0f events/s, %.2f cores",
		name, run, ms(r.P50), ms(r.P99), ms(r.Max), r.Samples, r.Expected, r.Rate, cores)
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
	cfg.Input, cfg.Watch = input, output
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
