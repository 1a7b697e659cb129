package kafkatools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// offsetsFixture is a cluster with topic "orders" of 3 partitions of 10
// records each, record i of every partition written at base + i hours;
// partition 1's records below offset 3 are deleted.
type offsetsFixture struct {
	addr string
	adm  *kadm.Client
	base time.Time
}

func newOffsetsFixture(t *testing.T) *offsetsFixture {
	t.Helper()
	f := &offsetsFixture{addr: testCluster(t, 3, "orders", "other"), base: time.Now().Add(-10 * time.Hour).Truncate(time.Millisecond)}
	var recs []*kgo.Record
	for p := range int32(3) {
		for i := range 10 {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: []byte("v"), Timestamp: f.base.Add(time.Duration(i) * time.Hour)})
		}
	}
	writeRecords(t, f.addr, recs...)
	cl := testClient(t, f.addr)
	t.Cleanup(cl.Close)
	f.adm = kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 3})
	if _, err := f.adm.DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	return f
}

// commit sets group's committed offsets of orders (partition: offset).
func (f *offsetsFixture) commit(t *testing.T, group string, offsets map[int32]int64) {
	t.Helper()
	os := kadm.Offsets{}
	for p, at := range offsets {
		os.Add(kadm.Offset{Topic: "orders", Partition: p, At: at, LeaderEpoch: -1})
	}
	if err := f.adm.CommitAllOffsets(context.Background(), group, os); err != nil {
		t.Fatal(err)
	}
}

// committed returns group's committed offsets of orders, -1 for none.
func (f *offsetsFixture) committed(t *testing.T, group string) [3]int64 {
	t.Helper()
	got := [3]int64{-1, -1, -1}
	offs, err := f.adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if o, ok := offs.Lookup("orders", p); ok && o.Err == nil {
			got[p] = o.At
		}
	}
	return got
}

func ptr(n int64) *int64 { return &n }

// TestOffsetsDescribe: per partition the committed offset (or none), log
// bounds, lag (the records still in the log past the commit) and
// member; as a table or JSON; the group defaults to the file's.
func TestOffsetsDescribe(t *testing.T) {
	f := newOffsetsFixture(t)
	f.commit(t, "g", map[int32]int64{0: 5, 1: 2})
	ctx := context.Background()
	code, out, errOut := runCLI(ctx, nil, "offsets", "describe", "--brokers", f.addr, "--group", "g", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var d GroupDescription
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	want := []GroupPartition{
		{Topic: "orders", Partition: 0, Committed: ptr(5), LogStart: 0, HighWatermark: 10, Lag: 5},
		{Topic: "orders", Partition: 1, Committed: ptr(2), LogStart: 3, HighWatermark: 10, Lag: 7},
		{Topic: "orders", Partition: 2, LogStart: 0, HighWatermark: 10, Lag: 10},
	}
	if d.Group != "g" || d.Members != 0 || len(d.Partitions) != len(want) {
		t.Fatalf("%+v", d)
	}
	for i, w := range want {
		g := d.Partitions[i]
		sameCommit := (g.Committed == nil) == (w.Committed == nil) && (g.Committed == nil || *g.Committed == *w.Committed)
		if !sameCommit || g.Topic != w.Topic || g.Partition != w.Partition || g.LogStart != w.LogStart || g.HighWatermark != w.HighWatermark || g.Lag != w.Lag || g.Member != "" {
			t.Errorf("partition %d: %+v, want %+v", i, g, w)
		}
	}
	cfg := writeFile(t, t.TempDir(), "c.yaml", fmt.Sprintf("kafka: {brokers: [%q]}\nconsumer: {group: g, topics: [orders]}\npipeline: []\n", f.addr))
	code, out, _ = runCLI(ctx, nil, "offsets", "describe", "-c", cfg)
	for _, row := range []string{"orders 0 5 0 10 5 -", "orders 1 2 3 10 7 -", "orders 2 - 0 10 10 -", "total lag 22"} {
		if !hasRow(out, row) {
			t.Errorf("exit %d; table lacks the row %q:\n%s", code, row, out)
		}
	}
	code, out, _ = runCLI(ctx, nil, "offsets", "describe", "--brokers", f.addr, "--group", "g", "--topic", "other")
	if !hasRow(out, "other 2 - 0 0 0 -") || hasRow(out, "orders 0 5 0 10 5 -") {
		t.Errorf("--topic other: exit %d\n%s", code, out)
	}
	code, _, errOut = runCLI(ctx, nil, "offsets", "describe", "--brokers", f.addr, "--group", "nobody")
	if code != ExitOK || !strings.Contains(errOut, `group "nobody" has no committed offsets and no members`) {
		t.Errorf("an unknown group: exit %d: %s", code, errOut)
	}
	if code, _, errOut = runCLI(ctx, nil, "offsets", "describe", "--group", "g"); code != ExitFailure || !strings.Contains(errOut, "name the cluster") {
		t.Errorf("no cluster: exit %d: %s", code, errOut)
	}
	embedded := writeFile(t, t.TempDir(), "e.yaml", "kafka: {embedded: {}}\nconsumer: {group: g, topics: [orders]}\npipeline: []\n")
	if code, _, errOut = runCLI(ctx, nil, "offsets", "describe", "-c", embedded); code != ExitFailure || !strings.Contains(errOut, "uses the embedded broker") {
		t.Errorf("an embedded-broker file: exit %d: %s", code, errOut)
	}
}

// hasRow reports whether a line of out has these fields.
func hasRow(out, fields string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(l), " ") == fields {
			return true
		}
	}
	return false
}

// TestOffsetsReset: each target's plan (new offsets, records skipped or
// repeated, clamping to the log bounds), applied only with --execute, on
// a group with no members; what it refuses.
func TestOffsetsReset(t *testing.T) {
	f := newOffsetsFixture(t)
	at := func(i int) string { return f.base.Add(time.Duration(i) * time.Hour).Format(time.RFC3339Nano) }
	type row struct {
		new, skipped, repeated int64
		note                   string
	}
	tests := []struct {
		name    string
		args    []string
		execute bool
		code    int
		want    map[int32]row // by partition; nil with an error
		errText string
	}{
		{"to the earliest", []string{"--topic", "orders", "--to-earliest"}, false, ExitOK,
			map[int32]row{0: {0, 0, 5, ""}, 1: {3, 0, 0, ""}, 2: {0, 0, 0, ""}}, "plan only: add --execute"},
		{"to the latest, executed", []string{"--topic", "orders", "--to-latest"}, true, ExitOK,
			map[int32]row{0: {10, 5, 0, ""}, 1: {10, 7, 0, ""}, 2: {10, 0, 0, ""}}, "applied"},
		{"to an offset, some partitions", []string{"--topic", "orders:0,1", "--to-offset", "7"}, true, ExitOK,
			map[int32]row{0: {7, 2, 0, ""}, 1: {7, 4, 0, ""}}, "applied"},
		{"an offset past the end is clamped", []string{"--topic", "orders:0", "--to-offset", "50"}, false, ExitOK,
			map[int32]row{0: {10, 5, 0, "clamped to the high watermark 10"}}, ""},
		{"shift back, clamped at the log start", []string{"--topic", "orders:0,1", "--shift-by", "-3"}, true, ExitOK,
			map[int32]row{0: {2, 0, 3, ""}, 1: {3, 0, 0, "clamped to the log start 3"}}, ""},
		{"to a time", []string{"--topic", "orders", "--to-datetime", at(4)}, false, ExitOK,
			map[int32]row{0: {4, 0, 1, ""}, 1: {4, 1, 0, ""}, 2: {4, 0, 0, ""}}, ""},
		{"by a duration", []string{"--topic", "orders:2", "--by-duration", "5h30m"}, false, ExitOK,
			map[int32]row{2: {5, 0, 0, ""}}, ""},
		{"a time after every record: the high watermark", []string{"--topic", "orders:0", "--to-datetime", at(20)}, false, ExitOK,
			map[int32]row{0: {10, 5, 0, "no record at or after the time: the high watermark"}}, ""},
		{"shift without a committed offset", []string{"--topic", "orders", "--shift-by", "1"}, true, ExitFailure, nil,
			"--shift-by needs a committed offset, and orders:2 have none"},
		{"no such topic", []string{"--topic", "nope", "--to-earliest"}, true, ExitFailure, nil, `topic "nope" does not exist`},
		{"no such partition", []string{"--topic", "orders:7", "--to-earliest"}, true, ExitFailure, nil, "no such partition: orders:7"},
		{"two targets", []string{"--topic", "orders", "--to-earliest", "--to-latest"}, true, ExitUsage, nil, "give exactly one of"},
		{"no target", []string{"--topic", "orders"}, true, ExitUsage, nil, "give exactly one of"},
		{"a target switched off", []string{"--topic", "orders", "--to-earliest=false"}, true, ExitUsage, nil, "--to-earliest=false: a target takes no value"},
		{"a target switched off beside another", []string{"--topic", "orders", "--to-latest=false", "--to-offset", "1"}, true, ExitUsage, nil, "--to-latest=false: a target takes no value"},
		{"a bad time", []string{"--topic", "orders", "--to-datetime", "yesterday"}, true, ExitUsage, nil, "use RFC 3339"},
		{"a bad partition list", []string{"--topic", "orders:x", "--to-earliest"}, true, ExitUsage, nil, `"x" is not a partition number`},
	}
	ctx := context.Background()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			group := fmt.Sprintf("reset%d", i)
			f.commit(t, group, map[int32]int64{0: 5, 1: 2})
			before := f.committed(t, group)
			args := append([]string{"offsets", "reset", "--brokers", f.addr, "--group", group, "-o", "json"}, tt.args...)
			if tt.execute {
				args = append(args, "--execute")
			}
			code, out, errOut := runCLI(ctx, nil, args...)
			if code != tt.code || !strings.Contains(errOut, tt.errText) {
				t.Fatalf("exit %d, want %d; stderr %q lacks %q", code, tt.code, errOut, tt.errText)
			}
			after := f.committed(t, group)
			if tt.want == nil {
				if after != before {
					t.Fatalf("a refused reset changed the offsets: %v -> %v", before, after)
				}
				return
			}
			var plan resetPlan
			if err := json.Unmarshal([]byte(out), &plan); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if len(plan.Partitions) != len(tt.want) || plan.Executed != tt.execute {
				t.Fatalf("plan %+v, want %d partitions, executed %v", plan, len(tt.want), tt.execute)
			}
			want := before
			for _, r := range plan.Partitions {
				w, ok := tt.want[r.Partition]
				if !ok || r.New != w.new || r.Skipped != w.skipped || r.Repeated != w.repeated || r.Note != w.note {
					t.Errorf("partition %d: %+v, want %+v", r.Partition, r, w)
				}
				want[r.Partition] = r.New
			}
			if !tt.execute {
				want = before
			}
			if after != want {
				t.Errorf("committed %v after, want %v", after, want)
			}
		})
	}
}

// TestOffsetsResetRefusesLiveGroup: while a member is in the group, reset
// prints the plan and says --execute would refuse; with --execute it
// refuses, naming the members, and changes nothing. Once the member left,
// it applies.
func TestOffsetsResetRefusesLiveGroup(t *testing.T) {
	f := newOffsetsFixture(t)
	f.commit(t, "live", map[int32]int64{0: 5, 1: 4, 2: 5})
	member := testClient(t, f.addr, kgo.ConsumerGroup("live"), kgo.ConsumeTopics("orders"), kgo.ClientID("the-member"), kgo.DisableAutoCommit())
	defer member.Close()
	ctx := context.Background()
	waitUntil(t, 20*time.Second, "the member in the group", func() bool {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		member.PollFetches(pctx)
		_, out, _ := runCLI(ctx, nil, "offsets", "describe", "--brokers", f.addr, "--group", "live")
		return strings.Contains(out, "1 member(s)") && strings.Contains(out, "the-member")
	})
	args := []string{"offsets", "reset", "--brokers", f.addr, "--group", "live", "--topic", "orders", "--to-earliest"}
	code, out, errOut := runCLI(ctx, nil, args...)
	if code != ExitOK || !hasRow(out, "orders 0 5 0 repeats 5") || !strings.Contains(errOut, "the group has 1 live member(s) (the-member on ") {
		t.Errorf("plan: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCLI(ctx, nil, append(args, "--execute")...)
	if code != ExitFailure || !strings.Contains(errOut, `not applied: group "live" has 1 live member(s) (the-member on `) {
		t.Errorf("execute: exit %d: %s", code, errOut)
	}
	if got := f.committed(t, "live"); got != [3]int64{5, 4, 5} {
		t.Errorf("committed %v after a refused reset", got)
	}
	member.Close()
	waitUntil(t, 20*time.Second, "the group empty", func() bool {
		_, out, _ := runCLI(ctx, nil, "offsets", "describe", "--brokers", f.addr, "--group", "live")
		return strings.Contains(out, "0 member(s)")
	})
	if code, _, errOut = runCLI(ctx, nil, append(args, "--execute")...); code != ExitOK {
		t.Fatalf("execute after the member left: exit %d: %s", code, errOut)
	}
	if got := f.committed(t, "live"); got != [3]int64{0, 3, 0} {
		t.Errorf("committed %v, want the log starts [0 3 0]", got)
	}
}
