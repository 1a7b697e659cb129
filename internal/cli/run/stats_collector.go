package run

import (
	"context"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// statsCollector exports, at each scrape, what pipeline.Stats holds and
// the lag of the assigned partitions (the only metrics with a partition
// label: lag and committed offset, one series per assigned partition).
type statsCollector struct {
	p   *pipeline.Pipeline
	lag *lagSampler

	processed, deadLettered, stale, buffered, maxBuffered *prometheus.Desc
	assigned, stopped, stuck, lagProcessed, lagCommitted  *prometheus.Desc
	committedOffset, buildInfo, fetchesInFlight, waiting  *prometheus.Desc

	restoring, restoreLeft, restored, restoredBytes, changelog *prometheus.Desc

	build prometheus.Metric // buildInfo's one series: its labels never change
}

// newStatsCollector exports p's stats and lag's; version is the
// processor's, for fencepost_build_info.
func newStatsCollector(p *pipeline.Pipeline, lag *lagSampler, version string) *statsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("fencepost_"+name, help, labels, nil)
	}
	tp := []string{"topic", "partition"}
	c := &statsCollector{
		p: p, lag: lag,
		processed:       d("processed_records_total", "Records that finished every stage."),
		deadLettered:    d("dead_lettered_records_total", "Records sent to the dead-letter topic."),
		stale:           d("stale_results_total", "Results dropped because their partition had moved on (rebalance, reset)."),
		buffered:        d("buffered_bytes", "Bytes of records fetched and not yet finished."),
		maxBuffered:     d("buffered_max_bytes", "Highest buffered_bytes seen."),
		assigned:        d("assigned_partitions", "Partitions assigned to this member."),
		stopped:         d("stopped_partitions", "Assigned partitions stopped with an error (see /readyz for why)."),
		waiting:         d("waiting_for_output_calls", "Stage calls and dead-letter writes holding their partition because their destination takes no record now (unknown topic, not authorized, no leader, brokers down); /readyz says why."),
		stuck:           d("stuck_stage_calls", "Stage calls still running well past processing_timeout: the stage ignores its context and its partition waits."),
		lagProcessed:    d("consumer_lag_records", "Records between the processed watermark and the high watermark, per assigned partition.", tp...),
		lagCommitted:    d("consumer_committed_lag_records", "Records between the committed offset (the log start if none) and the high watermark, per assigned partition: what a crash would process again.", tp...),
		committedOffset: d("committed_offset", "Last offset committed, per assigned partition (absent until the first commit or a committed offset found at assignment).", tp...),
		fetchesInFlight: d("fetches_in_flight", "Fetch requests in flight now: at most fetch_concurrency per broker leading assigned partitions."),
		restoring:       d("state_restoring_partitions", "Store partitions being restored from their changelogs now (their input partitions wait)."),
		restoreLeft:     d("state_restore_left_records", "Changelog offsets the running restores have left to read."),
		restored:        d("state_restored_records_total", "Changelog records restored into stores."),
		restoredBytes:   d("state_restored_bytes_total", "Key and value bytes restored into stores."),
		changelog:       d("state_changelog_records_total", "State changes written to changelog topics."),
		buildInfo:       d("build_info", "The processor's version, Go version and Kafka client version; always 1.", "version", "go", "kafka_go"),
	}
	c.build = prometheus.MustNewConstMetric(c.buildInfo, prometheus.GaugeValue, 1, version, runtime.Version(), kafkaGoVersion())
	return c
}

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.processed, c.deadLettered, c.stale, c.buffered, c.maxBuffered, c.assigned,
		c.stopped, c.stuck, c.lagProcessed, c.lagCommitted, c.committedOffset, c.buildInfo, c.fetchesInFlight, c.waiting,
		c.restoring, c.restoreLeft, c.restored, c.restoredBytes, c.changelog} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s, _ := c.p.Stats(ctx) // the counters come back even when not running
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter(c.processed, s.RecordsProcessed)
	counter(c.deadLettered, s.DeadLetters)
	counter(c.stale, s.StaleDropped)
	gauge(c.buffered, s.BufferedBytes)
	gauge(c.maxBuffered, s.MaxBufferedBytes)
	gauge(c.assigned, int64(len(s.Partitions)))
	gauge(c.stopped, int64(countStopped(s)))
	gauge(c.stuck, s.StuckCalls)
	gauge(c.waiting, s.WaitingForOutput)
	gauge(c.fetchesInFlight, s.FetchesInFlight)
	gauge(c.restoring, s.State.Restoring)
	gauge(c.restoreLeft, s.State.RestoreLeft)
	counter(c.restored, s.State.RestoredRecords)
	counter(c.restoredBytes, s.State.RestoredBytes)
	counter(c.changelog, s.State.ChangelogRecords)
	ch <- c.build
	for _, ps := range s.Partitions {
		if ps.Committed >= 0 {
			gauge(c.committedOffset, ps.Committed, ps.Partition.Topic, strconv.Itoa(int(ps.Partition.Partition)))
		}
	}
	lags, err := c.lag.lags(ctx, s)
	if err != nil {
		return // the lag series are absent while the brokers do not answer
	}
	for tp, l := range lags {
		part := strconv.Itoa(int(tp.Partition))
		gauge(c.lagProcessed, l.processed, tp.Topic, part)
		gauge(c.lagCommitted, l.committed, tp.Topic, part)
	}
}

// kafkaGoVersion is the version of the Kafka client the binary was
// built with.
func kafkaGoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/segmentio/kafka-go" {
				return d.Version
			}
		}
	}
	return "unknown"
}
