// Package run is the processor's run command: a session runs the
// pipeline a configuration describes (with the embedded broker if it asks
// for one), serves /metrics, /healthz and /readyz, prints progress and a
// summary, stops gracefully on the first signal and at once on the
// second, and explains an error that ended it before it got going.
package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/config"
)

// runOptions are the run command's flags.
type runOptions struct {
	config     string
	forDur     time.Duration
	maxRecords int64
	progress   time.Duration
	http       string
	httpSet    bool
}

// cli is the environment the run command runs in.
type cli struct{ *clibase.Env }

// Command returns the run command.
func Command(env *clibase.Env) *cobra.Command { return (&cli{env}).runCmd() }

func (c *cli) runCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run -c FILE",
		Short: "Run the pipeline a configuration file describes",
		Long: `run consumes the configured topics through the pipeline until SIGINT or
SIGTERM, then stops gracefully within shutdown_timeout: in-flight records
finish, offsets are committed, the group is left. A second signal exits at
once (exit code 130); what was not committed is processed again after
restart. It prints progress every few seconds (records/s, consumer lag,
stopped partitions, records filtered, produced and dead-lettered, resets,
buffered bytes) and a summary at the end, on stderr; stages that print
write to stdout. /metrics, /healthz (liveness) and /readyz (readiness: 503
while a partition is stopped) are served on http.address;
docs/operations.md explains the metrics.

--max-records N stops gracefully once at least N records were processed:
the records fetched by then finish and are committed, so a fast pipeline
processes more than N (as many as its buffers hold). --for stops the same
way after a time.

The exit code is 1 when the run ends with stopped partitions: a record
failed under dead_letter policy stop (or could not be dead-lettered), or
auto_offset_reset none found no valid offset.

At start it logs the topology, a line per sub-pipeline (the stages cut at
each repartition, with the topics each reads, its stores and their
changelog topics, its tables and the repartition topic it writes), as
lint prints it. With stages that keep state, the start line names their
stores and where they live (state.dir, or memory); the changelog topics
follow once they are checked. "processor state" inspects and resets them.

The configuration is checked first, as lint does: with any problem nothing
starts.`,
		Example: "  processor run -c configs/quickstart.yaml\n  processor run -c app.yaml --for 30s\n  processor run -c app.yaml --max-records 100000 --http off",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.config == "" {
				return errors.New("run: name the configuration file with -c FILE")
			}
			if o.forDur < 0 || o.maxRecords < 0 || o.progress < 0 {
				return errors.New("run: --for, --max-records and --progress must not be negative")
			}
			o.httpSet = cmd.Flags().Changed("http")
			return c.run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.config, "config", "c", "", "configuration `FILE` (required)")
	f.DurationVar(&o.forDur, "for", 0, "stop gracefully after this long (0: run until signalled)")
	f.Int64Var(&o.maxRecords, "max-records", 0, "stop gracefully once at least `N` records were processed (0: no limit)")
	f.DurationVar(&o.progress, "progress", 5*time.Second, "print progress this often (0: never)")
	f.StringVar(&o.http, "http", "", "serve /metrics and /healthz on `ADDR` instead of http.address (off: disable)")
	return cmd
}

// stopReason records why a run ended.
type stopReason struct{ limit atomic.Bool }

func (c *cli) run(ctx context.Context, o runOptions) error {
	cfg, err := config.Load(o.config, c.Registry)
	if err != nil {
		clibase.PrintConfigError(c.Stderr, err)
		return clibase.Failure("%s: nothing was started (fix the problems above)", o.config)
	}
	if o.httpSet {
		cfg.HTTP.Address = strings.TrimSpace(o.http)
		if strings.EqualFold(cfg.HTTP.Address, "off") {
			cfg.HTTP.Address = ""
		}
	}
	log, err := newLogger(cfg.Log, c.Stderr, cfg.Redactor)
	if err != nil {
		return clibase.Failure("log: %v", err)
	}
	defer func() { _ = log.Sync() }()
	for _, w := range cfg.Warnings() { // what lint warns about, once at start
		log.Warn(w.Msg, zap.String("at", fmt.Sprintf("%s:%d:%d", w.File, w.Line, w.Col)), zap.String("key", w.Key))
	}

	sigCtx, stopSignals := c.notifySignals(ctx, log)
	defer stopSignals()
	runCtx := sigCtx
	if o.forDur > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(sigCtx, o.forDur)
		defer cancel()
	}
	runCtx, stopRun := context.WithCancel(runCtx)
	defer stopRun()

	var why stopReason
	r := &session{cli: c, cfg: cfg, opts: o, log: log, stopRun: func() { why.limit.Store(true); stopRun() }}
	res, err := r.execute(runCtx)
	if err != nil && !errors.Is(err, errStoppedPartitions) {
		return clibase.Failure("%s", cfg.Redactor.Redact(explainRunError(ctx, o, cfg, err).Error()))
	}
	reason := "the end of --for"
	switch {
	case why.limit.Load():
		reason = fmt.Sprintf("--max-records %d (a graceful stop: the records in flight finished too, so at least %d were processed)", o.maxRecords, o.maxRecords)
	case sigCtx.Err() != nil && ctx.Err() == nil:
		reason = "a signal"
	case ctx.Err() != nil:
		reason = "cancellation"
	}
	res.print(cfg.Redactor.Writer(c.Stderr), reason)
	if err != nil {
		return clibase.Failure("%d partition(s) ended stopped (see above): fix the cause, then restart to retry the record, "+
			"or move the group's offset past it", len(res.stopped))
	}
	return nil
}

// notifySignals returns a context that ends at the first SIGINT or
// SIGTERM (a graceful stop). A second one exits the process at once with
// clibase.ExitForced: records in flight are not committed and are redelivered
// after restart. stop releases the signals.
func (c *cli) notifySignals(ctx context.Context, log *zap.Logger) (context.Context, func()) {
	sigCtx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case s := <-sigs:
			log.Info("signal received: stopping gracefully (send it again to exit at once)", zap.Stringer("signal", s))
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			fmt.Fprintf(c.Stderr, "error: second %v: exiting now without waiting for in-flight records; "+
				"they are not committed and are processed again after restart\n", s)
			exit := c.Exit
			if exit == nil {
				exit = os.Exit
			}
			exit(clibase.ExitForced)
		case <-done:
		}
	})
	return sigCtx, func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
		cancel()
	}
}
