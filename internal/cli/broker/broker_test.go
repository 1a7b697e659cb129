package broker

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/cli/clitest"
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
