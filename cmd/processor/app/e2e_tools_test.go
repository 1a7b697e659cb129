package app

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// runBinary runs the test binary to its end with stdin and returns its
// exit code and output.
func runBinary(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runProgram(t, testBinary(t), nil, stdin, args...)
}

// runProgram runs the program at path to its end with env additions and
// stdin, and returns its exit code and output.
func runProgram(t *testing.T, path string, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not exit within 60s\n%s", args, errOut.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// describeJSON runs the binary's offsets describe of the group.
func describeJSON(t *testing.T, addr, group string) groupDescription {
	t.Helper()
	code, out, errOut := runBinary(t, "", "offsets", "describe", "--brokers", addr, "--group", group, "-o", "json")
	if code != 0 {
		t.Fatalf("describe: exit %d: %s", code, errOut)
	}
	var d groupDescription
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return d
}

// TestBinaryTools runs the built binary's produce, consume and offsets
// against "processor broker" in another process: binary records with keys
// and headers go in and come back out the same; after a run, describe
// shows every partition committed to its end; a reset is refused while
// the processor runs and applied once it stopped.
func TestBinaryTools(t *testing.T) {
	addr, _ := startBroker(t, "--topics", "tools", "--partitions", "4")
	binaryTools(t, addr)
}

// binaryTools runs on the cluster at addr, which has a topic "tools" of
// 4 partitions; it uses the group "tools".
func binaryTools(t *testing.T, addr string) {
	var input strings.Builder
	var want []jsonRecord
	for i := range 40 {
		v := base64.StdEncoding.EncodeToString([]byte{0, 0xff, byte(i), '\n'})
		j := jsonRecord{Key: strp(fmt.Sprintf("k%d", i)), ValueBase64: &v, Headers: []jsonHeader{{Key: "n", Value: strp(fmt.Sprint(i))}}}
		b, _ := json.Marshal(j)
		input.Write(append(b, '\n'))
		want = append(want, j)
	}
	if code, _, errOut := runBinary(t, input.String(), "produce", "--brokers", addr, "--topic", "tools", "-i", "json"); code != 0 ||
		!strings.Contains(errOut, `produced 40 record(s) to "tools"`) {
		t.Fatalf("produce: exit %d: %s", code, errOut)
	}
	code, out, errOut := runBinary(t, "", "consume", "--brokers", addr, "--topic", "tools", "-o", "json")
	if code != 0 {
		t.Fatalf("consume: exit %d: %s", code, errOut)
	}
	got := jsonLines(t, out)
	for i := range got {
		got[i] = content(got[i])
		got[i].Timestamp = ""
	}
	byKey := func(a, b jsonRecord) int { return strings.Compare(*a.Key, *b.Key) }
	slices.SortFunc(got, byKey)
	slices.SortFunc(want, byKey)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("consumed\n%+v\nwant\n%+v", got, want)
	}

	dir := t.TempDir()
	cfg := writeFile(t, dir, "tools.yaml", strings.NewReplacer("group: e2e", "group: tools", "topics: [in]", "topics: [tools]").Replace(recordConfig))
	env := []string{"BROKERS=" + addr, "RECORD_FILE=" + filepath.Join(dir, "records.txt")}
	run := startProcess(t, env, "run", "-c", cfg, "--max-records", "40")
	if code := run.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, run.stderr)
	}
	d := describeJSON(t, addr, "tools")
	if d.Members != 0 || len(d.Partitions) != 4 {
		t.Fatalf("after the run: %+v", d)
	}
	total := int64(0)
	for _, p := range d.Partitions {
		if p.Committed == nil || *p.Committed != p.HighWatermark || p.Lag != 0 || p.Member != "" {
			t.Errorf("after the run, partition %d: %+v, want committed at the high watermark", p.Partition, p)
		}
		total += p.HighWatermark
	}
	if total != 40 {
		t.Errorf("the high watermarks add up to %d, want 40", total)
	}

	running := startProcess(t, env, "run", "-c", cfg)
	waitUntil(t, 30*time.Second, "the processor in the group", func() bool {
		d := describeJSON(t, addr, "tools")
		return d.Members == 1 && d.Partitions[0].Member != ""
	})
	reset := []string{"offsets", "reset", "--brokers", addr, "--group", "tools", "--topic", "tools", "--to-earliest", "--execute"}
	if code, _, errOut := runBinary(t, "", reset...); code != ExitFailure || !strings.Contains(errOut, `not applied: group "tools" has 1 live member(s)`) {
		t.Errorf("reset of a live group: exit %d: %s", code, errOut)
	}
	if code := running.terminate(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, running.stderr)
	}
	if code, out, errOut := runBinary(t, "", reset...); code != 0 || !strings.Contains(out, "0 record(s) skipped, 40 processed again") {
		t.Fatalf("reset of a stopped group: exit %d\n%s%s", code, out, errOut)
	}
	for _, p := range describeJSON(t, addr, "tools").Partitions {
		if p.Committed == nil || *p.Committed != 0 || p.Lag != p.HighWatermark {
			t.Errorf("after the reset, partition %d: %+v, want committed 0", p.Partition, p)
		}
	}
}
