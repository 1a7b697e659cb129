package app

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestBinaryToolsEndWithinTimeout: every tool command, against a port
// nothing listens on, a listener that never answers, and a broker
// without SASL asked for SASL, exits 1 within its --timeout (and a
// little) with an error saying what to check.
func TestBinaryToolsEndWithinTimeout(t *testing.T) {
	plain, _ := startBroker(t, "--topics", "in")
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() }) // after the parallel subtests
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // hold it open, say nothing
		}
	}()
	targets := []struct {
		name, addr string
		args       []string
		want       string // in stderr: the cause
	}{
		{"refused", freeAddr(t), nil, "connection refused"},
		{"silent", silent.Addr().String(), nil, "no answer within --timeout 2s"},
		{"SASL to a broker without it", plain, []string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u"}, "SASL"},
	}
	commands := []struct {
		name  string
		args  []string
		stdin string
	}{
		{"produce", []string{"produce", "--topic", "in"}, "x\n"},
		{"consume", []string{"consume", "--topic", "in"}, ""},
		{"offsets describe", []string{"offsets", "describe", "--group", "g"}, ""},
		{"offsets reset", []string{"offsets", "reset", "--group", "g", "--topic", "in", "--to-earliest", "--execute"}, ""},
		{"topics list", []string{"topics", "list"}, ""},
		{"topics create", []string{"topics", "create", "new"}, ""},
	}
	const timeout = 2 * time.Second
	for _, tg := range targets {
		for _, cmd := range commands {
			t.Run(tg.name+"/"+cmd.name, func(t *testing.T) {
				t.Parallel()
				args := append(append(append([]string{}, cmd.args...), "--brokers", tg.addr, "--timeout", timeout.String()), tg.args...)
				start := time.Now()
				code, _, errOut := runProgram(t, testBinary(t), []string{"KAFKA_PASSWORD=p"}, cmd.stdin, args...)
				took := time.Since(start)
				if code != ExitFailure || took > timeout+5*time.Second || !strings.Contains(errOut, tg.want) || !strings.Contains(errOut, "check") {
					t.Errorf("exit %d after %v (timeout %v), want 1 within it; stderr lacks %q or \"check\":\n%s", code, took.Round(time.Millisecond), timeout, tg.want, errOut)
				}
			})
		}
	}
}
