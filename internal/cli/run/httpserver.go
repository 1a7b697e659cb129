package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// httpServer serves /metrics, /healthz and /readyz, and with http.debug
// Go's profiles under /debug/pprof/.
type httpServer struct {
	srv  *http.Server
	ln   net.Listener
	done sync.WaitGroup
}

// startHTTP listens on addr (so a taken port fails the start, not later)
// and serves in the background until shutdown.
func startHTTP(addr string, debug bool, p *pipeline.Pipeline, m *metrics) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { health(w, r, p) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { ready(w, r, p) })
	if debug {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index) // also serves heap, allocs, goroutine, ...
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
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
// error), an output or the dead-letter topic is unavailable (partitions
// wait for it), the pipeline has held no partition for longer than
// Stats.UnassignedGrace (its topics are missing or were deleted, or the
// group has more members than partitions), or a stage call is stuck
// past processing_timeout:
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
	if s.WaitingForOutput > 0 {
		reasons = append(reasons, fmt.Sprintf("%d partition call(s) waiting for an unavailable output (retrying, nothing dead-lettered): %s",
			s.WaitingForOutput, s.OutputError))
	}
	if d := s.Unassigned(time.Now()); d > 0 {
		reasons = append(reasons, fmt.Sprintf("no partition of the subscribed topics assigned for %v (grace %v: kafka.metadata_max_age + "+
			"consumer.session_timeout + consumer.rebalance_timeout): check that the topics exist (processor topics list) and "+
			"that the group has no more members than partitions", d.Round(time.Second), s.UnassignedGrace))
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

func countStopped(s pipeline.Stats) int {
	n := 0
	for _, p := range s.Partitions {
		if p.State == pipeline.Stopped {
			n++
		}
	}
	return n
}
