package run

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPDebugServesProfiles: Go's profiles are served under
// /debug/pprof/ only with http.debug; without it the path is not found.
func TestHTTPDebugServesProfiles(t *testing.T) {
	for _, tc := range []struct {
		debug bool
		want  int
	}{{true, http.StatusOK}, {false, http.StatusNotFound}} {
		h, err := startHTTP("127.0.0.1:0", tc.debug, nil, newMetrics())
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + h.addr()
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/allocs?debug=1"} {
			code, body := get(t, base+path)
			if code != tc.want {
				t.Errorf("debug %v: GET %s: %d, want %d", tc.debug, path, code, tc.want)
			}
			if tc.debug && path == "/debug/pprof/allocs?debug=1" && !strings.Contains(body, "heap profile") {
				t.Errorf("debug: GET %s is not a heap profile:\n%.200s", path, body)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		h.shutdown(ctx)
		cancel()
	}
}
