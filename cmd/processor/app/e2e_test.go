package app

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// process is a subprocess of the test binary.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *stagetest.Buffer
	done           chan struct{}
	err            error
}

// startProcess starts the test binary with args and env additions; it
// is killed at the end of the test if still running.
func startProcess(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	return startBinary(t, testBinary(t), env, args...)
}

// startBinary starts the program at path with args and env additions; it
// is killed at the end of the test if still running.
func startBinary(t *testing.T, path string, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(path, args...), stdout: &stagetest.Buffer{}, stderr: &stagetest.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits up to timeout for the process to exit and returns its exit
// code.
func (p *process) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("%v did not exit within %v\nstderr:\n%s", p.cmd.Args, timeout, p.stderr)
		return -1
	}
}

// terminate sends SIGTERM and returns the exit code.
func (p *process) terminate(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return p.wait(t, 30*time.Second)
}

// startBroker runs "processor broker" on free ports and returns its
// bootstrap address and process; it is stopped (and must exit 0) at the
// end of the test, if not before.
func startBroker(t *testing.T, args ...string) (string, *process) {
	t.Helper()
	p := startProcess(t, nil, append([]string{"broker", "--port", "0"}, args...)...)
	var addr string
	waitUntil(t, 20*time.Second, "the broker's bootstrap line", func() bool {
		sc := bufio.NewScanner(strings.NewReader(p.stdout.String()))
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "bootstrap: "); ok {
				addr = a
				return true
			}
		}
		return false
	})
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			if code := p.terminate(t); code != 0 {
				t.Errorf("broker exited %d on SIGTERM\n%s", code, p.stderr)
			}
		}
	})
	return addr, p
}

const recordConfig = `kafka:
  brokers: ["${BROKERS}"]
  dial_timeout: 5s
consumer:
  group: e2e
  topics: [in]
  commit_interval: 200ms
  session_timeout: 3s
  heartbeat_interval: 300ms
  rebalance_timeout: 5s
pipeline:
  - stage: record
    file: ${RECORD_FILE}
    delay: ${DELAY:-0s}
http: {address: off}
shutdown_timeout: 15s
`

// produce writes n records to topic in, spread over 4 partitions.
func produce(t *testing.T, cl *kgo.Client, from, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Partition: int32((from + i) % 4), Value: fmt.Appendf(nil, "v%d", from+i)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// recorded reads the record stage's file: how often each
// "topic partition offset" was processed.
func recorded(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			seen[l]++
		}
	}
	return seen
}

// TestBinaryRestartLosesNothing runs the built binary against "processor
// broker" in another process: records produced before, during and
// between two runs, the first stopped by SIGTERM mid-stream, are every
// one processed at least once, and the group's committed offsets end at
// the end of every partition.
func TestBinaryRestartLosesNothing(t *testing.T) {
	addr, _ := startBroker(t, "--topics", "in", "--partitions", "4")
	binaryRestartLosesNothing(t, addr)
}

// binaryRestartLosesNothing runs on the cluster at addr, which has a topic
// "in" of 4 partitions.
func binaryRestartLosesNothing(t *testing.T, addr string) {
	cl := testClient(t, addr)
	defer cl.Close()
	adm := kadm.NewClient(cl)

	dir := t.TempDir()
	cfg := writeFile(t, dir, "e2e.yaml", recordConfig)
	file := filepath.Join(dir, "records.txt")
	env := []string{"BROKERS=" + addr, "RECORD_FILE=" + file, "DELAY=1ms"}

	produce(t, cl, 0, 2000)
	run1 := startProcess(t, env, "run", "-c", cfg, "--progress", "1s")
	waitUntil(t, 30*time.Second, "the first run to process 500 records", func() bool { return len(recorded(t, file)) >= 500 })
	produce(t, cl, 2000, 1000) // while it runs
	if code := run1.terminate(t); code != 0 {
		t.Fatalf("first run exited %d on SIGTERM\n%s", code, run1.stderr)
	}
	if !strings.Contains(run1.stderr.String(), "stopped by a signal") {
		t.Errorf("first run's summary does not say it was signalled:\n%s", run1.stderr)
	}
	first := len(recorded(t, file))
	if first >= 3000 {
		t.Fatalf("the first run processed all %d records before SIGTERM: the test did not stop it mid-stream", first)
	}
	produce(t, cl, 3000, 1000) // while none runs

	run2 := startProcess(t, env, "run", "-c", cfg, "--progress", "1s")
	ends := map[int32]int64{0: 1000, 1: 1000, 2: 1000, 3: 1000}
	waitUntil(t, 60*time.Second, "every record processed and committed", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(ctx, "e2e")
		if err != nil {
			return false
		}
		for p, end := range ends {
			if o, ok := offs.Lookup("in", p); !ok || o.At != end {
				return false
			}
		}
		return true
	})
	if code := run2.terminate(t); code != 0 {
		t.Fatalf("second run exited %d on SIGTERM\n%s", code, run2.stderr)
	}
	seen := recorded(t, file)
	for p, end := range ends {
		for off := int64(0); off < end; off++ {
			if seen[fmt.Sprintf("in %d %d", p, off)] == 0 {
				t.Fatalf("record in/%d@%d was never processed (first run saw %d, both %d)", p, off, first, len(seen))
			}
		}
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	t.Logf("first run processed %d distinct records; %d processed twice after the restart", first, dups)
	if dups > 1000 {
		t.Errorf("%d records processed twice: the restart did not resume from the committed offsets", dups)
	}
}

// TestBinaryUnreachableBroker: a broker that refuses connections, and one
// that accepts them and never answers, each give a clear error within a
// bounded time, not a hang.
func TestBinaryUnreachableBroker(t *testing.T) {
	refused := freeAddr(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold the connection open, say nothing
		}
	}()
	for name, addr := range map[string]string{"refused": refused, "silent": silent.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := writeFile(t, dir, "c.yaml", strings.Replace(recordConfig, "dial_timeout: 5s", "dial_timeout: 3s", 1))
			start := time.Now()
			p := startProcess(t, []string{"BROKERS=" + addr, "RECORD_FILE=" + filepath.Join(dir, "r.txt")}, "run", "-c", cfg)
			code := p.wait(t, 15*time.Second)
			if code != ExitFailure || !strings.Contains(p.stderr.String(), "cannot reach the Kafka cluster at ["+addr+"]") ||
				!strings.Contains(p.stderr.String(), "check kafka.brokers") {
				t.Errorf("exit %d after %v; stderr:\n%s", code, time.Since(start), p.stderr)
			}
		})
	}
}

// TestBrokerDataDir: with --data-dir, records outlive the broker process.
func TestBrokerDataDir(t *testing.T) {
	dir := t.TempDir()
	endOffsets := func(addr string) map[int32]int64 {
		cl := testClient(t, addr)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "in")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return out
	}
	addr, broker := startBroker(t, "--topics", "in", "--partitions", "4", "--data-dir", dir)
	cl := testClient(t, addr)
	produce(t, cl, 0, 40)
	cl.Close()
	if code := broker.terminate(t); code != 0 {
		t.Fatalf("broker exited %d\n%s", code, broker.stderr)
	}
	addr, _ = startBroker(t, "--data-dir", dir)
	if got := endOffsets(addr); len(got) != 4 || got[0] != 10 || got[3] != 10 {
		t.Errorf("after restart the end offsets are %v, want 10 on each of 4 partitions", got)
	}
}
