package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/fencepost-dev/fencepost/internal/cli/buildinfo"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/cli/broker"
	"github.com/fencepost-dev/fencepost/internal/cli/kafkaclient"
	"github.com/fencepost-dev/fencepost/internal/config"
	"github.com/fencepost-dev/fencepost/internal/logging"
	"github.com/fencepost-dev/fencepost/internal/syncio"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// session is one run of a configuration: the embedded broker if any, the
// stages, the pipeline, and what watches it. execute owns every
// goroutine it starts and returns after they ended.
type session struct {
	cli     *cli
	cfg     *config.Config
	opts    runOptions
	log     *zap.Logger
	stopRun func() // ends the run early (--max-records)
}

// result is what a run did, for the summary.
type result struct {
	elapsed            time.Duration
	stats              pipeline.Stats
	filtered, produced int64
	committedLag       int64 // -1 unknown
	// stopped are the partitions the run ended with stopped.
	stopped []pipeline.PartitionStopped
}

func (r result) print(w io.Writer, reason string) {
	lag := "unknown"
	if r.committedLag >= 0 {
		lag = fmt.Sprint(r.committedLag)
	}
	s := r.stats
	fmt.Fprintf(w, "summary: processed %d records in %s (%.1f/s); filtered %d; produced %d; dead letters %d; resets %d; "+
		"commits %d (%d failed); stopped partitions %d; committed lag %s; stopped by %s\n",
		s.RecordsProcessed, r.elapsed.Round(100*time.Millisecond), float64(s.RecordsProcessed)/max(r.elapsed.Seconds(), 0.001),
		r.filtered, r.produced, s.DeadLetters, s.Resets, s.Commits, s.CommitErrors, len(r.stopped), lag, reason)
	for _, st := range r.stopped {
		fmt.Fprintf(w, "  stopped %s: %v\n", st.Partition, st.Err)
	}
}

// execute runs the pipeline until ctx ends (or it fails) and tears
// everything down, in reverse order of start.
func (r *session) execute(ctx context.Context) (result, error) {
	cfg := r.cfg
	pc := cfg.Pipeline
	if cfg.Embedded != nil {
		e := cfg.Embedded
		cl, err := broker.Start(broker.Options{Brokers: e.Brokers, Partitions: e.Partitions, Topics: cfg.EmbeddedTopics(), DataDir: e.DataDir})
		if err != nil {
			return result{}, err
		}
		defer cl.Close()
		pc.Kafka.Brokers = cl.ListenAddrs()
		r.log.Info("embedded broker started", zap.Strings("bootstrap", pc.Kafka.Brokers), zap.Strings("topics", cfg.EmbeddedTopics()))
	}
	if r.cli.OwnsProcess {
		setMemoryLimit(pc.WithDefaults().Consumer.BufferBytes, cfg.Embedded != nil, r.log)
	}
	adm, err := kafkaclient.NewAdmin(pc.Kafka, "-monitor") // the lag it reports
	if err != nil {
		return result{}, err
	}
	defer adm.Close()

	m := newMetrics()
	producers, err := newProducerPool(pc, m)
	if err != nil {
		return result{}, err
	}
	defer func() {
		if err := producers.close(); err != nil {
			r.log.Warn("closing producers", zap.Error(err))
		}
	}()
	built, limiters, err := r.buildStages(producers, m)
	defer flushAll(limiters)
	if err != nil {
		closeStages(built, r.log)
		return result{}, err
	}
	// The pipeline logs resets and stopped partitions itself; the hooks
	// count them. Dead letters go through the pool's producer, so they are
	// measured like the outputs.
	opts := []pipeline.Option{pipeline.WithLogger(logging.ForStage(r.log)), pipeline.WithObserver(m),
		pipeline.OnReset(m.reset), pipeline.OnPartitionStopped(m.stopped)}
	if dl := pc.DeadLetter; dl.Topic != "" && dl.Policy != pipeline.DeadLetterStop {
		sink, err := producers.deadLetters(dl.Topic)
		if err != nil {
			closeStages(built, r.log)
			return result{}, err
		}
		opts = append(opts, pipeline.WithDeadLetterSink(sink))
	}
	// It checks at start that the topics written to exist.
	opts = append(opts, pipeline.WithOutputTopics(producers.topics()...), pipeline.WithOutputs(producers.outputs))
	var names []string
	for _, b := range built {
		opts = append(opts, pipeline.WithStage(b.name, b.stage))
		names = append(names, b.name)
	}
	p, err := pipeline.New(pc, opts...)
	if err != nil {
		closeStages(built, r.log)
		return result{}, err
	}
	// The pipeline owns the stages now: Run closes them, and so does
	// this if Run is never reached (Close runs once).
	defer func() { _ = p.Close(context.Background()) }()
	return r.runPipeline(ctx, p, adm, m, names)
}

func (r *session) runPipeline(ctx context.Context, p *pipeline.Pipeline, adm *kadm.Client, m *metrics, names []string) (result, error) {
	cfg, pc := r.cfg, p.Config()
	// the bounds are shared by /metrics and the progress line: at most
	// 5s old, and no older than a progress interval
	maxAge := 5 * time.Second
	if r.opts.progress > 0 {
		maxAge = min(r.opts.progress, maxAge)
	}
	lag := &lagSampler{adm: adm, topics: pc.Consumer.Topics, maxAge: maxAge, readCommitted: pc.Consumer.ReadCommitted}
	mon := &monitor{p: p, lag: lag, metrics: m, interval: r.opts.progress,
		out: r.cli.Stderr, limit: r.opts.maxRecords, onLimit: r.stopRun}
	if cfg.Log.Format == "json" {
		mon.log = r.log
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newStatsCollector(p, lag, buildinfo.Read(r.cli.Version, r.cli.Commit).Version()))
	var httpAddr string
	if cfg.HTTP.Address != "" {
		h, err := startHTTP(cfg.HTTP.Address, cfg.HTTP.Debug, p, m)
		if err != nil {
			return result{}, fmt.Errorf("http.address %s: %w (choose another address, or off)", cfg.HTTP.Address, err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			h.shutdown(sctx)
		}()
		httpAddr = h.addr()
	}
	fields := []zap.Field{zap.Strings("brokers", pc.Kafka.Brokers), zap.String("group", pc.Consumer.Group),
		zap.Strings("topics", pc.Consumer.Topics), zap.Strings("stages", names), zap.String("metrics", metricsURL(httpAddr))}
	if stores := cfg.Stores(); len(stores) > 0 {
		fields = append(fields, zap.Strings("stores", stores), zap.String("state", stateWhere(pc.State)))
	}
	r.log.Info("starting", fields...)

	var wg sync.WaitGroup
	defer wg.Wait()
	monCtx, stopMon := context.WithCancel(context.Background())
	defer stopMon()
	wg.Go(func() { mon.run(monCtx) })
	if e := cfg.Embedded; e != nil && e.DemoProducer != nil {
		demo, err := newDemoProducer(*e.DemoProducer, pc.Kafka.Brokers, r.log)
		if err != nil {
			return result{}, err
		}
		// It ends with the run, or when the pipeline fails.
		demoCtx, stopDemo := context.WithCancel(ctx)
		defer stopDemo()
		wg.Go(func() { demo.run(demoCtx) })
		r.log.Info("demo producer writing", zap.String("topic", e.DemoProducer.Topic), zap.Int("per_second", e.DemoProducer.Rate))
	}

	start := time.Now()
	runErr := p.Run(ctx)
	res := result{elapsed: time.Since(start), committedLag: -1, filtered: m.filtered.Load(), produced: m.producedTotal.Load()}
	stopMon()
	res.stats, _ = p.Stats(context.Background()) // counters; the partitions are gone
	var stopped *pipeline.StoppedPartitionsError
	if errors.As(runErr, &stopped) {
		// a graceful stop, with partitions stopped: the summary says
		// which and why, and the run fails
		res.stopped = stopped.Partitions
		runErr = errStoppedPartitions
	}
	if runErr != nil && runErr != errStoppedPartitions {
		if res.stats.RecordsProcessed > 0 {
			res.print(r.cfg.Redactor.Writer(r.cli.Stderr), "an error")
		}
		return res, runErr
	}
	lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res.committedLag = committedLag(lctx, adm, pc.Consumer.Group, pc.Consumer.Topics)
	return res, runErr
}

// errStoppedPartitions: the run stopped gracefully with partitions
// stopped (listed in result.stopped).
var errStoppedPartitions = errors.New("partitions were stopped")

// stateWhere says where the stores live: the state directory, or memory.
func stateWhere(s pipeline.StateConfig) string {
	if s.Store == pipeline.StoreMemory {
		return "memory"
	}
	return s.Dir
}

func metricsURL(addr string) string {
	if addr == "" {
		return "off"
	}
	return "http://" + addr + "/metrics"
}

// builtStage is a stage built for the run.
type builtStage struct {
	name  string
	stage stages.Stage
}

// buildStages builds every configured stage for the run: its logger
// (warnings and errors rate-limited, as a stage may log one per record),
// the program's stdout (writes serialized), the shared producers and its
// counters in m. Flush the limiters when the run is over.
func (r *session) buildStages(producers *producerPool, m *metrics) ([]builtStage, []*logging.Limiter, error) {
	out := syncio.NewWriter(r.cli.Stdout)
	var (
		built    []builtStage
		limiters []*logging.Limiter
	)
	for _, s := range r.cfg.Stages {
		log := logging.ForRecords(logging.ForStage(r.log.Named(s.Name)))
		limiters = append(limiters, log)
		st, err := s.Build(stages.Env{Log: log, Stdout: out, Producer: producers.get, Counter: m.stageCounter(s.Name)})
		if err != nil {
			return built, limiters, err
		}
		built = append(built, builtStage{name: s.Name, stage: st})
	}
	return built, limiters, nil
}

func flushAll(limiters []*logging.Limiter) {
	for _, l := range limiters {
		l.Flush()
	}
}

// closeStages closes the built stages that hold resources when no
// pipeline took them over.
func closeStages(built []builtStage, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []string
	for _, b := range built {
		if c, ok := b.stage.(stages.Closer); ok {
			if err := c.Close(ctx); err != nil {
				errs = append(errs, b.name+": "+err.Error())
			}
		}
	}
	if len(errs) > 0 {
		log.Warn("closing stages", zap.Error(errors.New(strings.Join(errs, "; "))))
	}
}
