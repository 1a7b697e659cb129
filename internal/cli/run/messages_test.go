package run

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/cli/clitest"
	"github.com/fencepost-dev/fencepost/internal/kafkatest"
)

// silentListener accepts connections and never answers; it stops when
// the test ends.
func silentListener(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// TestRunForShorterThanConnecting: --for ending before the pipeline
// connected says so, not a bare "context deadline exceeded".
func TestRunForShorterThanConnecting(t *testing.T) {
	cfg := writeFile(t, t.TempDir(), "c.yaml", "kafka:\n  brokers: ['"+silentListener(t)+"']\n  dial_timeout: 5s\n"+
		"consumer: {group: g, topics: [orders]}\npipeline: []\n")
	code, _, errOut := runCLI(context.Background(), clitest.Registry(), "run", "-c", cfg, "--for", "300ms", "--http", "off", "--progress", "0")
	if code != ExitFailure || !strings.Contains(errOut, "--for 300ms ended before the pipeline had connected to Kafka") ||
		strings.HasSuffix(strings.TrimSpace(errOut), "error: context deadline exceeded") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

// TestRunSaysWhatAnswered: when the brokers cannot be reached, run says
// what it found at their address: an HTTP server, a TLS listener while
// kafka.tls is not set, a plaintext Kafka listener while it is, nothing.
func TestRunSaysWhatAnswered(t *testing.T) {
	httpSrv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(httpSrv.Close)
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(tlsSrv.Close)
	kafka := kafkatest.New(t, 1)
	refused := freeAddr(t)
	cases := []struct {
		name, addr, tls, want string
	}{
		{"http server", httpSrv.Listener.Addr().String(), "", "an HTTP server answers at " + httpSrv.Listener.Addr().String() + ", not Kafka"},
		{"tls listener without kafka.tls", tlsSrv.Listener.Addr().String(), "", "speaks TLS, but kafka.tls is not set"},
		{"plaintext kafka with kafka.tls", kafka.Addrs[0], "  tls: {insecure_skip_verify: true}\n", "answers Kafka without TLS, but kafka.tls is set"},
		{"nothing", refused, "", "nothing listens at " + refused},
		{"silent", silentListener(t), "", "accepts connections but answers neither Kafka, TLS nor HTTP"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := writeFile(t, t.TempDir(), "c.yaml", "kafka:\n  brokers: ['"+c.addr+"']\n  dial_timeout: 1s\n"+c.tls+
				"consumer: {group: g, topics: [orders]}\npipeline: []\n")
			code, _, errOut := runCLI(context.Background(), clitest.Registry(), "run", "-c", cfg, "--http", "off", "--progress", "0")
			if code != ExitFailure || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant %q", code, errOut, c.want)
			}
		})
	}
}
