package kafkatools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestTopicsCommand: topics list shows partitions and replication, create
// makes topics (with their settings) and reports each, delete removes
// them; a topic that exists already, or does not exist, is a failure
// naming it. Creating a topic is how produce gets one: it never creates
// one itself, as the broker's help says.
func TestTopicsCommand(t *testing.T) {
	addr := testCluster(t, 3, "orders")
	ctx := context.Background()
	run := func(stdin string, args ...string) (int, string, string) {
		return runCLIInput(ctx, nil, stdin, append(args, "--brokers", addr)...)
	}
	steps := []struct {
		name           string
		stdin          string
		args           []string
		code           int
		stdout, errOut string // text each must hold
	}{
		{"list", "", []string{"topics", "list"}, ExitOK, "TOPIC   PARTITIONS  REPLICATION\norders  3           1\n", ""},
		{"list an absent topic", "", []string{"topics", "list", "nope"}, ExitFailure, "", `topic "nope" does not exist`},
		{"produce to a topic not created", "x\n", []string{"produce", "--topic", "made"}, ExitFailure, "",
			"create the topic with: processor topics create made"},
		{"create", "", []string{"topics", "create", "made", "small", "--partitions", "2", "--topic-config", "max.message.bytes=100"}, ExitOK,
			`created topic "made": 2 partition(s), replication factor 1`, ""},
		{"produce to the created topic", "x\n", []string{"produce", "--topic", "made"}, ExitOK, "", `produced 1 record(s) to "made"`},
		{"the created topic's setting holds", incompressible(300) + "\n", []string{"produce", "--topic", "small"},
			ExitFailure, "", "MESSAGE_TOO_LARGE"},
		{"create one that exists", "", []string{"topics", "create", "orders", "other"}, ExitFailure,
			`created topic "other"`, `topic "orders" not created: TOPIC_ALREADY_EXISTS`},
		{"more replicas than brokers", "", []string{"topics", "create", "wide", "--replication-factor", "3"}, ExitFailure,
			"", "lower --replication-factor"},
		{"a topic named twice", "", []string{"topics", "create", "a", "a"}, ExitUsage, "", `topic "a" is named twice`},
		{"a setting without =", "", []string{"topics", "create", "b", "--topic-config", "retention.ms"}, ExitUsage, "", "write a topic setting as key=value"},
		{"delete", "", []string{"topics", "delete", "made"}, ExitOK, `deleted topic "made"`, ""},
		{"delete an absent topic", "", []string{"topics", "delete", "made"}, ExitFailure, "", `topic "made" not deleted: it does not exist`},
	}
	for _, s := range steps {
		code, out, errOut := run(s.stdin, s.args...)
		if code != s.code || !strings.Contains(out, s.stdout) || !strings.Contains(errOut, s.errOut) {
			t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nwant %q\nstderr:\n%s\nwant %q", s.name, code, s.code, out, s.stdout, errOut, s.errOut)
		}
	}
	code, out, errOut := run("", "topics", "list", "-o", "json")
	var rows []TopicRow
	if code != ExitOK || json.Unmarshal([]byte(out), &rows) != nil {
		t.Fatalf("list -o json: exit %d: %s%s", code, out, errOut)
	}
	want := []TopicRow{{"orders", 3, 1, false}, {"other", 3, 1, false}, {"small", 2, 1, false}}
	if len(rows) != len(want) {
		t.Fatalf("list -o json: %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("list -o json: %+v, want %+v", rows, want)
		}
	}
}

// incompressible returns n bytes of random text.
func incompressible(n int) string {
	raw := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{byte(n)}).Read(raw)
	return base64.StdEncoding.EncodeToString(raw)[:n]
}
