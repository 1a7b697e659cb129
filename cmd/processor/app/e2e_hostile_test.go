package app

import (
	"fmt"
	"net"
	"path/filepath"
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
		{"state get --from changelog", []string{"state", "get", "counts", "k", "-p", "0", "--from", "changelog", "--group", "g"}, ""},
		{"state reset", []string{"state", "reset", "counts", "--group", "g", "--dir", t.TempDir(), "--execute"}, ""},
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

// TestBinaryProduceJSONOneRecordPerLine: produce -i json takes one record
// a line; more on a line is an error naming the line, after which
// nothing more is written; blank lines are skipped.
func TestBinaryProduceJSONOneRecordPerLine(t *testing.T) {
	topics := []string{"j0", "j1", "j2", "j3", "j4"}
	addr, _ := startBroker(t, "--topics", strings.Join(topics, ","))
	tests := []struct {
		name, input string
		code        int
		errText     string   // in stderr
		want        []string // the values written
	}{
		{"two records on a line", `{"value":"a"}{"value":"b"}` + "\n", ExitFailure,
			`line 1: "{\"value\":\"b\"}" follows the record: write one JSON record per line`, nil},
		{"garbage after a record", `{"value":"x"}` + "\n" + `{"value":"c"} garbage` + "\n", ExitFailure,
			`line 2: "garbage" follows the record`, []string{"x"}},
		{"blank lines are skipped", "\n" + `{"value":"a"}` + "\n  \n\r\n" + `{"value":"b"}` + "\n\n", ExitOK,
			`produced 2 record(s)`, []string{"a", "b"}},
		{"a line number counts blank lines", `{"value":"a"}` + "\n\n" + `{"value":` + "\n", ExitFailure,
			`line 3: not a record as consume -o json prints it`, []string{"a"}},
		{"spaces around a record", `  {"value":"a"}  ` + "\r\n", ExitOK, `produced 1 record(s)`, []string{"a"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := topics[i]
			code, _, errOut := runBinary(t, tt.input, "produce", "--brokers", addr, "--topic", topic, "-i", "json")
			if code != tt.code || !strings.Contains(errOut, tt.errText) {
				t.Fatalf("exit %d, want %d; stderr %q lacks %q", code, tt.code, errOut, tt.errText)
			}
			code, out, errOut := runBinary(t, "", "consume", "--brokers", addr, "--topic", topic, "-o", "value")
			if code != ExitOK {
				t.Fatalf("consume: exit %d: %s", code, errOut)
			}
			got := strings.Fields(out)
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("written %q, want %q", got, tt.want)
			}
		})
	}
}

// TestBinaryToolsHideSecrets: a tool reading a configuration (-c) hides
// the secrets it was given (${VAR} values) as run's log does, in text and
// JSON output and in its messages.
func TestBinaryToolsHideSecrets(t *testing.T) {
	addr, _ := startBroker(t, "--topics", "in")
	const token = "tok-5f3a9c2e71"
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", strings.NewReplacer("group: e2e", "group: g-${MY_API_TOKEN}").Replace(recordConfig))
	env := []string{"BROKERS=" + addr, "RECORD_FILE=" + filepath.Join(dir, "r.txt"), "MY_API_TOKEN=" + token}
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"offsets describe", []string{"offsets", "describe"}, ExitOK},
		{"offsets describe -o json", []string{"offsets", "describe", "-o", "json"}, ExitOK},
		{"offsets describe --topic", []string{"offsets", "describe", "--topic", "in"}, ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runProgram(t, testBinary(t), env, "", append(tt.args, "-c", cfg)...)
			if code != tt.code || strings.Contains(out+errOut, token) || !strings.Contains(out+errOut, "g-[redacted]") {
				t.Errorf("exit %d, want %d; the token shows or g-[redacted] does not:\n%s%s", code, tt.code, out, errOut)
			}
		})
	}
}

// TestBinaryLintAssignorUnderKIP848: lint reports consumer.assignor at
// its line when group_protocol is consumer (the broker assigns), even
// set to the default; without it, or under classic, the file is fine.
func TestBinaryLintAssignorUnderKIP848(t *testing.T) {
	const file = `kafka: {brokers: ["localhost:9092"]}
consumer:
  group: g
  topics: [in]
  %s
pipeline:
  - stage: record
    file: %s
`
	tests := []struct {
		name, consumer string
		code           int
		want           string // in the output
	}{
		{"assignor under consumer", "group_protocol: consumer\n  assignor: range", ExitFailure,
			"c.yaml:6:3: consumer.assignor: the consumer group protocol (KIP-848) does not use it: the broker assigns the partitions " +
				"(remove it; consumer.remote_assignor chooses the broker's assignor, Kafka's group.remote.assignor)"},
		{"the default assignor, named", "group_protocol: consumer\n  assignor: cooperative-sticky", ExitFailure, "c.yaml:6:3: consumer.assignor:"},
		{"remote_assignor under consumer", "group_protocol: consumer\n  remote_assignor: uniform", ExitOK, ""},
		{"assignor under classic", "group_protocol: classic\n  assignor: range", ExitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := writeFile(t, dir, "c.yaml", fmt.Sprintf(file, tt.consumer, filepath.Join(dir, "r.txt")))
			code, out, errOut := runBinary(t, "", "lint", cfg)
			if code != tt.code || !strings.Contains(out+errOut, tt.want) {
				t.Errorf("exit %d, want %d; output lacks %q:\n%s%s", code, tt.code, tt.want, out, errOut)
			}
		})
	}
}
