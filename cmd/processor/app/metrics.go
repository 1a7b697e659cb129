package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// statsCollector exports pipeline.Stats, read at each scrape, and the
// monitor's last lag as Prometheus metrics.
type statsCollector struct {
	p   *pipeline.Pipeline
	mon *monitor

	processed, deadLetters, resets, stale, commits, commitErrors, stops *prometheus.Desc
	buffered, maxBuffered, assigned, stopped, stuck, lag                *prometheus.Desc
}

func newStatsCollector(p *pipeline.Pipeline, mon *monitor) *statsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("fencepost_"+name, help, labels, nil)
	}
	return &statsCollector{
		p: p, mon: mon,
		processed:    d("records_processed_total", "Records that finished every stage."),
		deadLetters:  d("dead_letters_total", "Records sent to the dead-letter topic."),
		resets:       d("resets_total", "Partition resets (seek, out of range, no committed offset)."),
		stale:        d("stale_dropped_total", "Results dropped because their partition had moved on (rebalance, reset)."),
		commits:      d("commits_total", "Offset commits."),
		commitErrors: d("commit_errors_total", "Offset commits that failed."),
		buffered:     d("buffered_bytes", "Bytes of records fetched and not yet finished."),
		maxBuffered:  d("buffered_bytes_max", "Highest buffered_bytes seen."),
		assigned:     d("assigned_partitions", "Partitions assigned to this member."),
		stopped:      d("stopped_partitions", "Assigned partitions stopped with an error (see /readyz for why)."),
		stops:        d("partition_stops_total", "Partitions stopped: a record failed under dead_letter policy stop, could not be dead-lettered, or auto_offset_reset none."),
		stuck:        d("stuck_stage_calls", "Stage calls still running well past processing_timeout: the stage ignores its context and its partition waits."),
		lag:          d("consumer_lag", "Records behind the high watermark, by the processed watermark; refreshed every few seconds.", "topic", "partition"),
	}
}

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.processed, c.deadLetters, c.resets, c.stale, c.commits, c.commitErrors,
		c.buffered, c.maxBuffered, c.assigned, c.stopped, c.stops, c.stuck, c.lag} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, _ := c.p.Stats(ctx) // the counters come back even when not running
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter(c.processed, s.RecordsProcessed)
	counter(c.deadLetters, s.DeadLetters)
	counter(c.resets, s.Resets)
	counter(c.stale, s.StaleDropped)
	counter(c.commits, s.Commits)
	counter(c.commitErrors, s.CommitErrors)
	gauge(c.buffered, s.BufferedBytes)
	gauge(c.maxBuffered, s.MaxBufferedBytes)
	gauge(c.assigned, int64(len(s.Partitions)))
	gauge(c.stopped, int64(countStopped(s)))
	counter(c.stops, s.Stops)
	gauge(c.stuck, s.StuckCalls)
	for tp, l := range c.mon.lags() {
		gauge(c.lag, l, tp.Topic, strconv.Itoa(int(tp.Partition)))
	}
}

func countStopped(s pipeline.Stats) int {
	n := 0
	for _, p := range s.Partitions {
		if p.State == pipeline.Stopped {
			n++
		}
	}
	return n
}

// httpServer serves /metrics and /healthz.
type httpServer struct {
	srv  *http.Server
	ln   net.Listener
	done sync.WaitGroup
}

// startHTTP listens on addr (so a taken port fails the start, not later)
// and serves in the background until shutdown.
func startHTTP(addr string, p *pipeline.Pipeline, mon *monitor) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newStatsCollector(p, mon))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { health(w, r, p) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { ready(w, r, p) })
	h := &httpServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln}
	h.done.Go(func() {
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = ln.Close()
		}
	})
	return h, nil
}

// addr is the address served (useful with port 0).
func (h *httpServer) addr() string { return h.ln.Addr().String() }

// shutdown stops serving and waits for the server goroutine.
func (h *httpServer) shutdown(ctx context.Context) {
	if err := h.srv.Shutdown(ctx); err != nil {
		_ = h.srv.Close()
	}
	h.done.Wait()
}

// health is the liveness probe: 200 while the pipeline runs (its
// coordinator answers), 503 otherwise, with a small JSON body:
// {"status":"ok","partitions":4,"stopped":0}. A stopped partition does
// not make the process unhealthy (restarting it would not help); it
// makes it unready.
func health(w http.ResponseWriter, r *http.Request, p *pipeline.Pipeline) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	body := map[string]any{"status": "ok"}
	code := http.StatusOK
	s, err := p.Stats(ctx)
	if err != nil {
		code, body["status"], body["error"] = http.StatusServiceUnavailable, "not running", err.Error()
	} else {
		body["partitions"], body["stopped"] = len(s.Partitions), countStopped(s)
	}
	writeJSON(w, code, body)
}

// ready is the readiness probe: 200 when the pipeline runs and every
// assigned partition is being consumed; 503 with the reasons when it is
// not running, a partition is stopped (with the partition and its
// error), or a stage call is stuck past processing_timeout:
// {"status":"not ready","reasons":["events/3 stopped: ..."]}.
func ready(w http.ResponseWriter, r *http.Request, p *pipeline.Pipeline) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	s, err := p.Stats(ctx)
	var reasons []string
	if err != nil {
		reasons = append(reasons, "not running: "+err.Error())
	}
	for _, ps := range s.Partitions {
		if ps.State == pipeline.Stopped {
			reasons = append(reasons, fmt.Sprintf("%s stopped: %v", ps.Partition, ps.Err))
		}
	}
	if s.StuckCalls > 0 {
		reasons = append(reasons, fmt.Sprintf("%d stage call(s) stuck past processing_timeout (a stage ignores its context)", s.StuckCalls))
	}
	body := map[string]any{"status": "ready", "partitions": len(s.Partitions), "stopped": countStopped(s)}
	code := http.StatusOK
	if len(reasons) > 0 {
		code, body["status"], body["reasons"] = http.StatusServiceUnavailable, "not ready", reasons
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
