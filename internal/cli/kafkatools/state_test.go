package kafkatools

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/stages"
)

// writeStore writes kv to the local store of group's store, partition p,
// under dir, applied with the checkpoint next, and closes it.
func writeStore(t *testing.T, dir, group, store string, p int32, kv map[string]string, next int64) {
	t.Helper()
	st := &state.Storage{Dir: dir}
	part, _, err := st.Open(state.Identity{Group: group, Store: store, Changelog: state.ChangelogTopic(group, store), Partition: p})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range kv {
		if err := part.Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := part.Applied(next); err != nil {
		t.Fatal(err)
	}
	if err := part.Close(); err != nil {
		t.Fatal(err)
	}
}

// holdStore opens a local store in this process, as a running processor
// would, until the test ends.
func holdStore(t *testing.T, dir, group, store string, p int32) {
	t.Helper()
	part, _, err := (&state.Storage{Dir: dir}).Open(state.Identity{Group: group, Store: store, Changelog: state.ChangelogTopic(group, store), Partition: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = part.Close() })
}

// tallyStage declares the store "counts".
type tallyStage struct{ stages.StageFunc }

func (tallyStage) Stores() []string { return []string{"counts"} }

// stateRegistry has a stage "tally" that declares the store "counts".
func stateRegistry() *stages.Registry {
	reg := &stages.Registry{}
	pass := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) { return in, nil })
	if err := reg.Register(stages.Spec{
		Name: "tally", Summary: "Count records per key.",
		New: func(stages.Options, stages.Env) (stages.Stage, error) { return tallyStage{pass}, nil },
	}); err != nil {
		panic(err)
	}
	return reg
}

// stateConfig is a configuration of group g reading orders through tally,
// with its state in dir (store disk or memory).
func stateConfig(t *testing.T, addr, dir, store string) string {
	t.Helper()
	return writeFile(t, t.TempDir(), "app.yaml", fmt.Sprintf(
		"kafka: {brokers: [%q]}\nconsumer: {group: g, topics: [orders]}\npipeline:\n  - stage: tally\nstate: {dir: %q, store: %s}\n", addr, dir, store))
}

const binKey, binValue = "\xff\x00k", "\x01\x02\xfe"

// TestStateLocal: get, scan and count read a local store offline, from
// the directory the file names or --dir: text as it is, what is not
// UTF-8 as base64 with a note, -o json in key/key_base64 and
// value/value_base64; each says what the copy reflects; a missing key,
// store or partition is a failure saying what there is.
func TestStateLocal(t *testing.T) {
	dir := t.TempDir()
	writeStore(t, dir, "g", "counts", 0, map[string]string{"a": "1", "ab": "2", "b": "3", "sp ace": "x y", binKey: binValue}, 42)
	writeStore(t, dir, "g", "counts", 2, map[string]string{"z": "26"}, 7)
	writeStore(t, dir, "other-group", "foreign", 0, map[string]string{"k": "v"}, 1)
	cfg := stateConfig(t, "localhost:9092", dir, "disk")
	memory := stateConfig(t, "localhost:9092", dir, "memory")
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string // text each must hold
	}{
		{"get", []string{"get", "counts", "a", "-p", "0", "-c", cfg}, ExitOK, "1\n", "the changelog up to offset 42"},
		{"get with --dir", []string{"get", "counts", "z", "--partition", "2", "--dir", dir}, ExitOK, "26\n", "up to offset 7"},
		{"get as JSON", []string{"get", "counts", "sp ace", "-p", "0", "-c", cfg, "-o", "json"}, ExitOK,
			`{"store":"counts","partition":0,"key":"sp ace","value":"x y"}` + "\n", ""},
		{"get a value that is not UTF-8", []string{"get", "counts", b64(binKey), "--base64", "-p", "0", "-c", cfg}, ExitOK,
			b64(binValue) + "\n", "the value is not UTF-8: printed as base64"},
		{"get it as JSON", []string{"get", "counts", b64(binKey), "--base64", "-p", "0", "-c", cfg, "-o", "json"}, ExitOK,
			fmt.Sprintf(`"key_base64":%q,"value_base64":%q`, b64(binKey), b64(binValue)), ""},
		{"get a missing key", []string{"get", "counts", "nope", "-p", "0", "-c", cfg}, ExitFailure, "", `store "counts", partition 0: no key nope`},
		{"get without a partition", []string{"get", "counts", "a", "-c", cfg}, ExitUsage, "", "name the partition with --partition N"},
		{"get from an unknown store", []string{"get", "nope", "a", "-p", "0", "-c", cfg}, ExitFailure, "",
			`no store "nope": ` + dir + " holds stores counts, foreign; the stages of " + cfg + " declare counts (check the name)"},
		{"get from a store not kept here", []string{"get", "nope", "a", "-p", "0", "--dir", dir}, ExitFailure, "",
			`no local store "nope" in ` + dir + " (it holds stores counts, foreign; this machine may not have processed it: try --from changelog)"},
		{"get from a partition not kept here", []string{"get", "counts", "a", "-p", "1", "-c", cfg}, ExitFailure, "",
			`store "counts" has no local copy of partition 1 in ` + dir + " (it has partitions 0, 2"},
		{"a foreign store is noted", []string{"get", "foreign", "k", "-p", "0", "-c", cfg}, ExitOK, "v\n",
			`holds the store of group "other-group", not "g"`},
		{"a bad store name", []string{"get", "a/b", "k", "-p", "0", "-c", cfg}, ExitUsage, "", `store name "a/b"`},
		{"bad base64", []string{"get", "counts", "!!", "--base64", "-p", "0", "-c", cfg}, ExitUsage, "", `KEY "!!" is not base64`},
		{"scan a prefix", []string{"scan", "counts", "a", "-p", "0", "-c", cfg}, ExitOK, "a\t1\nab\t2\n", "2 key(s)"},
		{"scan everything", []string{"scan", "counts", "-p", "0", "--dir", dir}, ExitOK,
			"a\t1\nab\t2\nb\t3\n\"sp ace\"\tx y\nbase64:" + b64(binKey) + "\tbase64:" + b64(binValue) + "\n", "5 key(s)"},
		{"scan notes the encodings", []string{"scan", "counts", "-p", "0", "--dir", dir}, ExitOK, "", "printed as base64:<base64>"},
		{"scan as JSON lines", []string{"scan", "counts", "b", "-p", "0", "--dir", dir, "-o", "json"}, ExitOK,
			`{"store":"counts","partition":0,"key":"b","value":"3"}` + "\n", "1 key(s)"},
		{"count", []string{"count", "counts", "-c", cfg}, ExitOK, "", ""},
		{"count a partition not kept here", []string{"count", "counts", "-p", "1", "-c", cfg}, ExitFailure, "", "no local copy of partition 1"},
		{"count an unknown store", []string{"count", "nope", "--dir", dir}, ExitFailure, "", `no local store "nope"`},
		{"memory keeps nothing on disk", []string{"count", "counts", "-c", memory}, ExitFailure, "", "state.store is memory: nothing is kept on disk"},
		{"no directory", []string{"count", "counts"}, ExitUsage, "", "name the state directory with --dir"},
		{"a bad --from", []string{"count", "counts", "--dir", dir, "--from", "disk"}, ExitUsage, "", `--from "disk": use local`},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(ctx, stateRegistry(), append([]string{"state"}, tt.args...)...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nwant %q\nstderr:\n%s\nwant %q", code, tt.code, out, tt.stdout, errOut, tt.stderr)
			}
		})
	}
	code, out, errOut := runCLI(ctx, stateRegistry(), "state", "count", "counts", "-c", cfg)
	for _, row := range []string{"PARTITION KEYS CHANGELOG-OFFSET", "0 5 42", "2 1 7", "store counts: 6 key(s) in 2 partition(s) in " + dir} {
		if !hasRow(out, row) {
			t.Errorf("count: exit %d; no row %q:\n%s%s", code, row, out, errOut)
		}
	}
	code, out, errOut = runCLI(ctx, stateRegistry(), "state", "count", "counts", "-p", "2", "--dir", dir, "-o", "json")
	var n StateCount
	if err := json.Unmarshal([]byte(out), &n); err != nil || code != ExitOK {
		t.Fatalf("count -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if n.Keys != 1 || n.From != "local" || len(n.Partitions) != 1 || n.Partitions[0].Partition != 2 || *n.Partitions[0].ChangelogOffset != 7 ||
		n.Partitions[0].Dir != filepath.Join(dir, "counts", "2") {
		t.Errorf("count -o json: %+v", n)
	}
}

// TestStateLocalInUse: a store a processor holds open, in this process
// or another, is refused with what to do, and read once it is closed.
func TestStateLocalInUse(t *testing.T) {
	dir := t.TempDir()
	writeStore(t, dir, "g", "counts", 0, map[string]string{"a": "1"}, 1)
	args := []string{"state", "get", "counts", "a", "-p", "0", "--dir", dir}
	const refusal = "a running processor holds this store open (pebble locks its directory): stop it first, or read the group's state from the changelog with --from changelog"
	ctx := context.Background()

	t.Run("another process", func(t *testing.T) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "FENCEPOST_HOLD_STORE="+dir)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "held\n" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the helper did not hold the store: %q %v", line, err)
		}
		code, _, errOut := runCLI(ctx, nil, args...)
		_ = stdin.Close() // the helper closes the store and exits
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper: %v", err)
		}
		if code != ExitFailure || !strings.Contains(errOut, refusal) {
			t.Errorf("held by another process: exit %d: %s", code, errOut)
		}
	})
	t.Run("this process", func(t *testing.T) {
		part, _, err := (&state.Storage{Dir: dir}).Open(state.Identity{Group: "g", Store: "counts", Changelog: state.ChangelogTopic("g", "counts")})
		if err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runCLI(ctx, nil, args...)
		_ = part.Close()
		if code != ExitFailure || !strings.Contains(errOut, refusal) {
			t.Errorf("held in process: exit %d: %s", code, errOut)
		}
	})
	if code, out, errOut := runCLI(ctx, nil, args...); code != ExitOK || out != "1\n" {
		t.Errorf("once closed: exit %d: %q %s", code, out, errOut)
	}
}

// holdStoreProcess is TestStateLocalInUse's other process (TestMain runs it
// when $FENCEPOST_HOLD_STORE is set): it holds the store counts,
// partition 0, of that directory open until its stdin closes.
func holdStoreProcess(dir string) int {
	part, _, err := (&state.Storage{Dir: dir}).Open(state.Identity{Group: "g", Store: "counts", Changelog: state.ChangelogTopic("g", "counts")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer part.Close()
	fmt.Println("held")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// TestStateChangelog: with --from changelog, get, scan and count fold the
// changelog read_committed: the latest value of each key, tombstones
// removing keys, aborted transactions and the open one left out, the
// read ending at the last stable offset even when transaction markers
// end the log; an unknown store or partition is a failure naming it.
func TestStateChangelog(t *testing.T) {
	const topic = "g-counts-changelog"
	addr := testCluster(t, 2, "orders", topic)
	rec := func(k, v string) *kgo.Record {
		r := &kgo.Record{Topic: topic, Partition: 0, Key: []byte(k), Value: []byte(v)}
		if v == "<tombstone>" {
			r.Value = nil
		}
		return r
	}
	writeRecords(t, addr, rec("a", "1"), rec("b", "2"), rec("a", "3"), rec("c", "x"), rec("c", "<tombstone>"), rec(binKey, binValue), rec("e", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	txn := testClient(t, addr, kgo.TransactionalID("changelog-writer"))
	defer txn.Close()
	inTxn := func(commit bool, recs ...*kgo.Record) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	inTxn(true, rec("d", "4"))
	inTxn(false, rec("aborted", "5"), rec("a", "aborted"))
	// a transaction left open: beyond the last stable offset
	open := testClient(t, addr, kgo.TransactionalID("open-writer"))
	defer open.Close()
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, rec("open", "6")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := stateConfig(t, addr, t.TempDir(), "memory")
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"get the latest value", []string{"get", "counts", "a", "-p", "0"}, ExitOK, "3\n", ""},
		{"get a committed transaction's", []string{"get", "counts", "d", "-p", "0"}, ExitOK, "4\n", ""},
		{"an empty value is a value", []string{"get", "counts", "e", "-p", "0", "-o", "json"}, ExitOK, `"key":"e","value":""`, ""},
		{"a tombstone removes the key", []string{"get", "counts", "c", "-p", "0"}, ExitFailure, "", "no key c"},
		{"an aborted transaction's key is not there", []string{"get", "counts", "aborted", "-p", "0"}, ExitFailure, "", "no key aborted"},
		{"the open transaction's key is not there", []string{"get", "counts", "open", "-p", "0"}, ExitFailure, "", "no key open"},
		{"scan", []string{"scan", "counts", "-p", "0"}, ExitOK,
			"a\t3\nb\t2\nd\t4\ne\t\nbase64:" + base64.StdEncoding.EncodeToString([]byte(binKey)) + "\tbase64:" + base64.StdEncoding.EncodeToString([]byte(binValue)) + "\n", "5 key(s)"},
		{"scan an empty partition", []string{"scan", "counts", "-p", "1"}, ExitOK, "", "0 key(s)"},
		{"an unknown store", []string{"get", "nope", "a", "-p", "0"}, ExitFailure, "",
			`changelog topic "g-nope-changelog" does not exist: group "g" has no store "nope", or has not run with it yet; the stages of`},
		{"an unknown partition", []string{"scan", "counts", "-p", "5"}, ExitFailure, "", `changelog topic "g-counts-changelog" has no partition 5 (it has 2`},
		{"another group", []string{"count", "counts", "--group", "h"}, ExitFailure, "", `changelog topic "h-counts-changelog" does not exist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{"state"}, tt.args...), "--from", "changelog", "-c", cfg, "--timeout", "20s")
			code, out, errOut := runCLI(ctx, stateRegistry(), args...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) || strings.Contains(errOut, "nothing more arrived") {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nwant %q\nstderr:\n%s\nwant %q", code, tt.code, out, tt.stdout, errOut, tt.stderr)
			}
		})
	}
	code, out, errOut := runCLI(ctx, stateRegistry(), "state", "count", "counts", "--from", "changelog", "-c", cfg, "-o", "json")
	var n StateCount
	if err := json.Unmarshal([]byte(out), &n); err != nil || code != ExitOK {
		t.Fatalf("count -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	// partition 0: 7 records, a committed transaction (2 offsets), an
	// aborted one (3); the open one starts at 12
	if n.Keys != 5 || n.From != "changelog" || len(n.Partitions) != 2 || n.Partitions[0].Keys != 5 || *n.Partitions[0].ChangelogOffset != 12 ||
		n.Partitions[1].Keys != 0 || *n.Partitions[1].ChangelogOffset != 0 {
		t.Errorf("count -o json: %+v\n%s", n, out)
	}
	if err := open.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(ctx, stateRegistry(), "state", "get", "counts", "open", "-p", "0", "--from", "changelog", "-c", cfg); code != ExitOK || out != "6\n" {
		t.Errorf("once committed: exit %d: %q %s", code, out, errOut)
	}
	code, _, errOut = runCLI(ctx, stateRegistry(), "state", "count", "counts", "--from", "changelog", "--group", "g")
	if code != ExitFailure || !strings.Contains(errOut, "name the cluster") {
		t.Errorf("no cluster: exit %d: %s", code, errOut)
	}
}
