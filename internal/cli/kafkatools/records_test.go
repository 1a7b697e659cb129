package kafkatools

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/cli/broker"
	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// testCluster starts an in-process cluster (the embedded broker) with
// the topics, of the given partitions each, and returns its bootstrap
// address.
func testCluster(t *testing.T, partitions int, topics ...string) string {
	t.Helper()
	cl, err := broker.Start(broker.Options{Brokers: 1, Partitions: partitions, Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl.ListenAddrs()[0]
}

// writeRecords produces records with kgo, synchronously.
func writeRecords(t *testing.T, addr string, recs ...*kgo.Record) {
	t.Helper()
	cl := testClient(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// jsonLines parses consume -o json's output.
func jsonLines(t *testing.T, out string) []JSONRecord {
	t.Helper()
	var recs []JSONRecord
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var j JSONRecord
		if err := json.Unmarshal([]byte(l), &j); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		recs = append(recs, j)
	}
	return recs
}

// content is a record without where it was (what produce writes).
func content(j JSONRecord) JSONRecord {
	j.Topic, j.Partition, j.Offset = "", 0, 0
	return j
}

func strp(s string) *string { return &s }

// TestProduceConsumeRoundTrip: what produce reads from stdin, consume
// prints back: keys, values and headers, binary ones included (base64 in
// JSON), null keys and values, timestamps; a topic copied with consume -o
// json | produce -i json is the same; a bad line stops produce with an
// error naming it, after the lines before it were written.
func TestProduceConsumeRoundTrip(t *testing.T) {
	addr := testCluster(t, 2, "rt0", "rt1", "rt2", "rt3", "rt4", "rt5", "rt6", "rt7", "copy")
	ts := "2026-01-02T03:04:05.006Z"
	tests := []struct {
		name    string
		args    []string
		input   string
		want    []JSONRecord
		code    int
		errText string
	}{
		{"text with a key separator and headers", []string{"-K", ":", "-H", "src=test", "-H", "empty="},
			"k1:hello world\nk2:{\"a\":1}\r\n:no key\nk3:\n",
			[]JSONRecord{
				{Key: strp("k1"), Value: strp("hello world"), Headers: []JSONHeader{{Key: "src", Value: strp("test")}, {Key: "empty", Value: strp("")}}},
				{Key: strp("k2"), Value: strp(`{"a":1}`), Headers: []JSONHeader{{Key: "src", Value: strp("test")}, {Key: "empty", Value: strp("")}}},
				{Key: strp(""), Value: strp("no key"), Headers: []JSONHeader{{Key: "src", Value: strp("test")}, {Key: "empty", Value: strp("")}}},
				{Key: strp("k3"), Value: strp(""), Headers: []JSONHeader{{Key: "src", Value: strp("test")}, {Key: "empty", Value: strp("")}}},
			}, ExitOK, `produced 4 record(s) to "`},
		{"text lines are values", nil, "one\n\nthree",
			[]JSONRecord{{Value: strp("one")}, {Value: strp("")}, {Value: strp("three")}}, ExitOK, "produced 3 record(s)"},
		{"json with binary data, null key and value, a timestamp", []string{"-i", "json"},
			`{"key_base64":"AAEC/w==","value_base64":"gICA","headers":[{"key":"bin","value_base64":"AP8="},{"key":"txt","value":"é"}],"timestamp":"` + ts + `"}` + "\n" +
				`{"value":"no key"}` + "\n" + `{"key":"tombstone"}` + "\n",
			[]JSONRecord{
				{Timestamp: ts, KeyBase64: strp("AAEC/w=="), ValueBase64: strp("gICA"), Headers: []JSONHeader{{Key: "bin", ValueBase64: strp("AP8=")}, {Key: "txt", Value: strp("é")}}},
				{Value: strp("no key")},
				{Key: strp("tombstone")},
			}, ExitOK, "produced 3 record(s)"},
		{"a line without the separator stops, the lines before are written", []string{"-K", ":"}, "k1:v1\nno separator\nk3:v3\n",
			[]JSONRecord{{Key: strp("k1"), Value: strp("v1")}}, ExitFailure, `line 2: no key separator ":"; the 1 record(s) before it were written`},
		{"bad json names the line", []string{"-i", "json"}, `{"value":"ok"}` + "\n" + `{"value":` + "\n",
			[]JSONRecord{{Value: strp("ok")}}, ExitFailure, "line 2: not a record as consume -o json prints it"},
		{"key and key_base64 both", []string{"-i", "json"}, `{"key":"a","key_base64":"YQ=="}` + "\n",
			nil, ExitFailure, "line 1: key and key_base64 are both set"},
		{"a header without =", []string{"-H", "nope"}, "x\n", nil, ExitUsage, `-H "nope": write a header as key=value`},
		{"json with a key separator", []string{"-i", "json", "-K", ":"}, "{}\n", nil, ExitUsage, "--key-separator and -H are for --input text"},
	}
	ctx := context.Background()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := fmt.Sprintf("rt%d", i)
			args := append([]string{"produce", "--brokers", addr, "--topic", topic, "-p", "1"}, tt.args...)
			code, _, errOut := runCLIInput(ctx, nil, tt.input, args...)
			if code != tt.code || !strings.Contains(errOut, tt.errText) {
				t.Fatalf("produce: exit %d, want %d; stderr %q lacks %q", code, tt.code, errOut, tt.errText)
			}
			if code == ExitUsage {
				return
			}
			code, out, errOut := runCLI(ctx, nil, "consume", "--brokers", addr, "--topic", topic, "-o", "json")
			if code != ExitOK {
				t.Fatalf("consume: exit %d: %s", code, errOut)
			}
			got := jsonLines(t, out)
			if len(got) != len(tt.want) {
				t.Fatalf("consumed %d records, want %d:\n%s", len(got), len(tt.want), out)
			}
			for i, g := range got {
				if g.Topic != topic || g.Partition != 1 || g.Offset != int64(i) {
					t.Errorf("record %d at %s/%d@%d, want %s/1@%d", i, g.Topic, g.Partition, g.Offset, topic, i)
				}
				w := tt.want[i]
				if w.Timestamp == "" {
					w.Timestamp = g.Timestamp // the broker's or the client's clock
				}
				if !reflect.DeepEqual(content(g), w) {
					gb, _ := json.Marshal(content(g))
					wb, _ := json.Marshal(w)
					t.Errorf("record %d:\n got %s\nwant %s", i, gb, wb)
				}
			}
		})
	}
	t.Run("a topic that does not exist", func(t *testing.T) {
		code, _, errOut := runCLIInput(ctx, nil, "x\n", "produce", "--brokers", addr, "--topic", "absent")
		if code != ExitFailure || !strings.Contains(errOut, `0 of 1 record(s) acknowledged; writing to "absent" failed: UNKNOWN_TOPIC_OR_PARTITION`) {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})
	t.Run("a topic copied through json lines is the same", func(t *testing.T) {
		code, src, _ := runCLI(ctx, nil, "consume", "--brokers", addr, "--topic", "rt2", "-o", "json")
		if code != ExitOK {
			t.Fatal(code)
		}
		if code, _, errOut := runCLIInput(ctx, nil, src, "produce", "--brokers", addr, "--topic", "copy", "-i", "json", "-p", "1"); code != ExitOK {
			t.Fatal(errOut)
		}
		_, dst, _ := runCLI(ctx, nil, "consume", "--brokers", addr, "--topic", "copy", "-o", "json")
		a, b := jsonLines(t, src), jsonLines(t, dst)
		if len(a) != 3 || len(a) != len(b) {
			t.Fatalf("copied %d of %d records", len(b), len(a))
		}
		for i := range a {
			if !reflect.DeepEqual(content(a[i]), content(b[i])) {
				t.Errorf("record %d: %+v became %+v", i, a[i], b[i])
			}
		}
	})
}

// TestConsumeFrom: where consume starts, how many it prints, and that it
// stops at the end the partitions had when it started.
func TestConsumeFrom(t *testing.T) {
	addr := testCluster(t, 2, "ten")
	base := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: "ten", Partition: 0, Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(i) * time.Minute)})
	}
	recs = append(recs, &kgo.Record{Topic: "ten", Partition: 1, Key: []byte{0, 1}, Value: []byte("tab\there, \"quoted\""),
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("a b")}}, Timestamp: base})
	writeRecords(t, addr, recs...)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"earliest", nil, "v0 v1 v2 v3 v4 v5 v6 v7 v8 v9"},
		{"latest prints nothing", []string{"--from", "latest"}, ""},
		{"an offset", []string{"--from", "6"}, "v6 v7 v8 v9"},
		{"the last n", []string{"--from", "-3"}, "v7 v8 v9"},
		{"more than there are", []string{"--from", "-30"}, "v0 v1 v2 v3 v4 v5 v6 v7 v8 v9"},
		{"an offset past the end is clamped", []string{"--from", "100"}, ""},
		{"a time", []string{"--from", "2026-01-02T03:04:30Z"}, "v5 v6 v7 v8 v9"},
		{"a time after every record", []string{"--from", "2027-01-01T00:00:00Z"}, ""},
		{"a count", []string{"--from", "4", "--count", "2"}, "v4 v5"},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"consume", "--brokers", addr, "--topic", "ten", "-p", "0", "-o", "value"}, tt.args...)
			code, out, errOut := runCLI(ctx, nil, args...)
			if got := strings.Join(strings.Fields(out), " "); code != ExitOK || got != tt.want {
				t.Errorf("exit %d, printed %q, want %q; stderr %s", code, got, tt.want, errOut)
			}
		})
	}
	t.Run("text output quotes what would not print", func(t *testing.T) {
		_, out, _ := runCLI(ctx, nil, "consume", "--brokers", addr, "--topic", "ten", "-p", "1")
		want := `ten/1@0 2026-01-02T03:00:00Z key="\x00\x01" headers=h="a b" "tab\there, \"quoted\""` + "\n"
		if out != want {
			t.Errorf("got  %q\nwant %q", out, want)
		}
	})
	for _, bad := range [][]string{{"--from", "yesterday"}, {"--output", "yaml"}, {"--count", "-1"}} {
		code, _, errOut := runCLI(ctx, nil, append([]string{"consume", "--brokers", addr, "--topic", "ten"}, bad...)...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", bad, code, ExitUsage, errOut)
		}
	}
	code, _, errOut := runCLI(ctx, nil, "consume", "--brokers", addr, "--topic", "absent")
	if code != ExitFailure || !strings.Contains(errOut, `topic "absent" does not exist`) {
		t.Errorf("an absent topic: exit %d: %s", code, errOut)
	}
}

// TestConsumeFollow: --follow prints records written after it started,
// until it is stopped.
func TestConsumeFollow(t *testing.T) {
	addr := testCluster(t, 1, "live")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut := &stagetest.Buffer{}, &stagetest.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, []string{"consume", "--brokers", addr, "--topic", "live", "--follow", "-o", "value"},
			&clibase.Env{Stdout: out, Stderr: errOut})
	}()
	for i := range 3 {
		writeRecords(t, addr, &kgo.Record{Topic: "live", Value: fmt.Appendf(nil, "r%d", i)})
		waitUntil(t, 10*time.Second, fmt.Sprintf("record %d printed", i), func() bool { return strings.Contains(out.String(), fmt.Sprintf("r%d\n", i)) })
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK || out.String() != "r0\nr1\nr2\n" {
			t.Errorf("exit %d, printed %q; stderr %s", code, out.String(), errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("consume --follow did not stop when cancelled")
	}
}
