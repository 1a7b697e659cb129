package run

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// metrics is the run's measurements: a pipeline.Observer, the reset and
// stop hooks, and the producers' wrapper record into Prometheus
// collectors (docs/operations.md explains each), and keep the totals the
// progress line and the summary print. Labels are bounded: stage names,
// brokers, topics, reasons; a partition only on lag and committed
// offsets (see statsCollector).
type metrics struct {
	reg *prometheus.Registry

	stageIn, stageOut, stageDropped, stageFailed, stageDeadLettered *prometheus.CounterVec
	stageSeconds                                                    *prometheus.HistogramVec
	// stageEvents are the stages' own counters (stages.Env.Counter)
	stageEvents *prometheus.CounterVec

	fetchRequests, fetchRecords, fetchBytes, fetchErrors *prometheus.CounterVec
	fetchSeconds                                         *prometheus.HistogramVec

	commits        prometheus.Counter
	txnAborts      prometheus.Counter
	commitFailures *prometheus.CounterVec
	commitSeconds  prometheus.Histogram
	recordAge      *prometheus.HistogramVec

	rebalances, assigned, revoked prometheus.Counter
	rebalancePause                prometheus.Histogram

	resets, resetSkipped, stops *prometheus.CounterVec

	produced, producedBytes, produceErrors *prometheus.CounterVec
	produceSeconds                         *prometheus.HistogramVec

	// totals for the progress line and the summary
	filtered, producedTotal atomic.Int64
}

// Bucket bounds, in seconds.
var (
	stageBuckets   = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	ageBuckets     = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600}
	pauseBuckets   = []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	f := promFactory{reg}
	return &metrics{
		reg: reg,

		stageIn:           f.counters("stage_input_records_total", "Records given to a stage.", "stage"),
		stageOut:          f.counters("stage_output_records_total", "Records a stage passed on to the next.", "stage"),
		stageDropped:      f.counters("stage_dropped_records_total", "Records a stage dropped: no output derives from them and they did not fail (a filter's drops).", "stage"),
		stageFailed:       f.counters("stage_failed_records_total", "Records that failed a stage for good, after the retries: dead-lettered, or stopping their partition.", "stage"),
		stageDeadLettered: f.counters("stage_dead_lettered_records_total", "Records a stage failed that were written to the dead-letter topic.", "stage"),
		stageSeconds:      f.histograms("stage_duration_seconds", "Time a stage took on one unit of records (a batch or a key group), retries and dead letters included.", stageBuckets, "stage"),
		stageEvents: f.counters("stage_events_total", "Events a stage counts itself, by stage and event: records it dropped as late "+
			"(late_records_dropped, future_records_dropped), as duplicates (duplicate_records_dropped), without a match (unmatched_records_dropped), "+
			"or what a Go stage names.", "stage", "event"),

		fetchRequests: f.counters("fetch_requests_total", "Fetch requests answered, by broker node id.", "broker"),
		fetchRecords:  f.counters("fetch_records_total", "Records fetched, by broker.", "broker"),
		fetchBytes:    f.counters("fetch_bytes_total", "Record payload bytes fetched, by broker.", "broker"),
		fetchErrors:   f.counters("fetch_errors_total", "Partitions a fetch answered with an error (not leader, offset out of range, broker or network error), by broker.", "broker"),
		fetchSeconds:  f.histograms("fetch_latency_seconds", "Fetch request latency, by broker; an idle partition's fetch waits up to fetch_max_wait.", latencyBuckets, "broker"),

		commits:        f.counter("commits_total", "Offset commits acknowledged."),
		txnAborts:      f.counter("transactions_aborted_total", "Transactions aborted (guarantee exactly_once); their partitions went back to their committed offsets."),
		commitFailures: f.counters("commit_failures_total", "Offset commits that failed, by reason (fenced: a rebalance ended the generation; timeout; a Kafka error name).", "reason"),
		commitSeconds:  f.histogram("commit_latency_seconds", "Offset commit latency, retries of transient errors included.", latencyBuckets),
		recordAge:      f.histograms("record_commit_age_seconds", "Age of the newest record an acknowledged commit covers (now minus its timestamp), once per partition per commit.", ageBuckets, "topic"),

		rebalances:     f.counter("rebalances_total", "Generations this member joined (the first included)."),
		assigned:       f.counter("partitions_assigned_total", "Partitions assigned to this member, summed over generations."),
		revoked:        f.counter("partitions_revoked_total", "Partitions revoked from this member, summed over generations (the stop's included)."),
		rebalancePause: f.histogram("rebalance_pause_seconds", "Time this member fetched nothing before a generation began: since the previous revoke began (or the start).", pauseBuckets),

		resets:       f.counters("resets_total", "Partition position changes by reason: seek, below_log_start, above_high_watermark, log_truncation, transaction_aborted, topic_recreated; no_committed_offset is where a partition the group never committed started.", "reason"),
		resetSkipped: f.counters("reset_skipped_offsets_total", "Offsets skipped by resets (records not processed), by reason.", "reason"),
		stops:        f.counters("partition_stops_total", "Partitions stopped, by reason: record_failed (dead_letter policy stop), dead_letter_refused, no_valid_offset (auto_offset_reset none), corrupt_records.", "reason"),

		produced:       f.counters("produced_records_total", "Records written to an output or dead-letter topic, by topic.", "topic"),
		producedBytes:  f.counters("produced_bytes_total", "Record bytes (key, value, headers) written, by topic.", "topic"),
		produceErrors:  f.counters("produce_errors_total", "Produce calls that failed (the records are retried or dead-lettered), by topic.", "topic"),
		produceSeconds: f.histograms("produce_latency_seconds", "Produce latency until acknowledged (acks=all), by topic.", latencyBuckets, "topic"),
	}
}

// promFactory registers metrics in the fencepost_ namespace.
type promFactory struct{ reg *prometheus.Registry }

func (f promFactory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "fencepost", Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f promFactory) counters(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "fencepost", Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f promFactory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "fencepost", Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f promFactory) histograms(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "fencepost", Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// StageDone implements pipeline.Observer.
func (m *metrics) StageDone(d pipeline.StageDone) {
	m.stageIn.WithLabelValues(d.Stage).Add(float64(d.Records))
	m.stageOut.WithLabelValues(d.Stage).Add(float64(d.Out))
	m.stageDropped.WithLabelValues(d.Stage).Add(float64(d.Dropped))
	m.stageFailed.WithLabelValues(d.Stage).Add(float64(d.Failed))
	m.stageDeadLettered.WithLabelValues(d.Stage).Add(float64(d.DeadLettered))
	m.stageSeconds.WithLabelValues(d.Stage).Observe(d.Duration.Seconds())
	m.filtered.Add(int64(d.Dropped))
}

// stageCounter is the stages.Env.Counter of the stage named stage: its
// events count in fencepost_stage_events_total, whose series exist (at
// 0) from the moment the stage asks for them.
func (m *metrics) stageCounter(stage string) func(event string) stages.Counter {
	return func(event string) stages.Counter { return promCounter{m.stageEvents.WithLabelValues(stage, event)} }
}

// promCounter is a stages.Counter in a Prometheus counter.
type promCounter struct{ c prometheus.Counter }

func (p promCounter) Add(n int64) {
	if n > 0 {
		p.c.Add(float64(n))
	}
}

// FetchDone implements pipeline.Observer.
func (m *metrics) FetchDone(d pipeline.FetchDone) {
	b := strconv.Itoa(int(d.Broker))
	m.fetchRequests.WithLabelValues(b).Inc()
	m.fetchRecords.WithLabelValues(b).Add(float64(d.Records))
	m.fetchBytes.WithLabelValues(b).Add(float64(d.Bytes))
	m.fetchErrors.WithLabelValues(b).Add(float64(d.Errors))
	m.fetchSeconds.WithLabelValues(b).Observe(d.Latency.Seconds())
}

// CommitDone implements pipeline.Observer.
func (m *metrics) CommitDone(d pipeline.CommitDone) {
	m.commitSeconds.Observe(d.Latency.Seconds())
	if d.Abort {
		m.txnAborts.Inc()
		return
	}
	if d.Err != nil {
		m.commitFailures.WithLabelValues(d.Reason()).Inc()
		return
	}
	m.commits.Inc()
}

// OffsetsCommitted implements pipeline.Observer.
func (m *metrics) OffsetsCommitted(cs []pipeline.CommittedOffset) {
	now := time.Now()
	for _, c := range cs {
		if !c.RecordTime.IsZero() {
			m.recordAge.WithLabelValues(c.Partition.Topic).Observe(max(now.Sub(c.RecordTime).Seconds(), 0))
		}
	}
}

// Rebalanced implements pipeline.Observer.
func (m *metrics) Rebalanced(r pipeline.Rebalance) {
	if r.Ended {
		m.revoked.Add(float64(r.Partitions))
		return
	}
	m.rebalances.Inc()
	m.assigned.Add(float64(r.Partitions))
	m.rebalancePause.Observe(r.Paused.Seconds())
}

// reset is the pipeline's OnReset hook.
func (m *metrics) reset(ev offsetstore.ResetEvent) {
	reason := ev.Reason.String()
	m.resets.WithLabelValues(reason).Inc()
	m.resetSkipped.WithLabelValues(reason).Add(float64(ev.Skipped))
}

// stopped is the pipeline's OnPartitionStopped hook.
func (m *metrics) stopped(s pipeline.PartitionStopped) {
	m.stops.WithLabelValues(stopCause(s.Err)).Inc()
}

// stopCause names why a partition stopped, for a label.
func stopCause(err error) string {
	var (
		re *offsetstore.ResetError
		ue *stages.UndeliverableError
		se *stages.StoppedError
	)
	switch {
	case errors.As(err, &re):
		return "no_valid_offset"
	case errors.As(err, &ue):
		return "dead_letter_refused"
	case errors.As(err, &se):
		return "record_failed"
	case errors.Is(err, fetch.ErrCorrupt):
		return "corrupt_records"
	}
	return "other"
}

// produceDone records one Produce call to topic; output says whether it
// counts as produced in the summary (the dead-letter topic does not).
func (m *metrics) produceDone(topic string, records []stages.Record, took time.Duration, err error, output bool) {
	m.produceSeconds.WithLabelValues(topic).Observe(took.Seconds())
	if err != nil {
		m.produceErrors.WithLabelValues(topic).Inc()
		return
	}
	size := 0
	for _, r := range records {
		size += r.Size()
	}
	m.produced.WithLabelValues(topic).Add(float64(len(records)))
	m.producedBytes.WithLabelValues(topic).Add(float64(size))
	if output {
		m.producedTotal.Add(int64(len(records)))
	}
}
