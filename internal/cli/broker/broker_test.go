package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/cli/clitest"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// TestBrokerCommandHints: a data directory that cannot be used is named
// as the cause, and only a port in use is asked about.
func TestBrokerCommandHints(t *testing.T) {
	file := writeFile(t, t.TempDir(), "f", "")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	cases := []struct {
		name    string
		args    []string
		want    string
		notWant string
	}{
		{"data dir is a file", []string{"broker", "--port", "0", "--data-dir", filepath.Join(file, "sub")},
			"check --data-dir " + filepath.Join(file, "sub"), "port"},
		{"port in use", []string{"broker", "--port", fmt.Sprint(port)}, "is the port free? try --port 0", "data-dir"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runCLI(context.Background(), clitest.Registry(), c.args...)
			if code != ExitFailure || !strings.Contains(errOut, c.want) || strings.Contains(errOut, c.notWant) {
				t.Errorf("exit %d, stderr:\n%s\nwant %q, not %q", code, errOut, c.want, c.notWant)
			}
		})
	}
}

// TestBrokerMaxMessageBytes: --max-message-bytes is the largest batch the
// brokers accept; the help says how topics come to exist, as the tools
// behave (they never create one).
func TestBrokerMaxMessageBytes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut stagetest.Buffer
	done := make(chan int, 1)
	go func() {
		env := &clibase.Env{Stdout: &out, Stderr: &errOut}
		done <- clibase.Execute(ctx, env, []string{"broker", "--port", "0", "--topics", "t", "--max-message-bytes", "1024"}, Command(env))
	}()
	var addr string
	clitest.WaitUntil(t, 10*time.Second, "the bootstrap line", func() bool {
		s, found := strings.CutPrefix(out.String(), "bootstrap: ")
		var ended bool
		addr, _, ended = strings.Cut(s, "\n")
		return found && ended
	})
	cl := clitest.Client(t, addr, kgo.ProducerBatchCompression(kgo.NoCompression()))
	defer cl.Close()
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	if err := cl.ProduceSync(pctx, &kgo.Record{Topic: "t", Value: make([]byte, 2000)}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("a 2000-byte record: %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := cl.ProduceSync(pctx, &kgo.Record{Topic: "t", Value: make([]byte, 500)}).FirstErr(); err != nil {
		t.Errorf("a 500-byte record: %v", err)
	}
	cl.Close()
	cancel()
	if code := <-done; code != ExitOK {
		t.Errorf("exit %d: %s", code, errOut.String())
	}

	_, help, _ := runCLI(context.Background(), nil, "broker", "--help")
	for _, want := range []string{"'processor\ntopics create'", "never ask: a\ntopic that does not exist is an error", "--max-message-bytes BYTES"} {
		if !strings.Contains(help, want) {
			t.Errorf("broker --help lacks %q:\n%s", want, help)
		}
	}
}
