//go:build realkafka && unix

package main

import (
	"strings"
	"testing"
)

// TestRealKafkaKillLoopExactlyOnce is the kill loop of the exactly-once
// guarantee on Apache Kafka with three nodes, whatever FENCEPOST_KAFKA
// says (a node is killed: the others must take over, so it runs in CI's
// 3-node pass only): three instances, four SIGKILLs one after the other,
// and once, halfway, the transaction coordinator of the first instance's
// producer killed with SIGKILL and restarted. The output, read
// read_committed once every transaction ended, holds every input record
// exactly once.
func TestRealKafkaKillLoopExactlyOnce(t *testing.T) {
	var stdout, stderr strings.Builder
	code := run([]string{"-kafka", "3node", "-guarantee", "exactly_once", "-instances", "3", "-partitions", "6",
		"-kills", "4", "-kill-broker", "-interval", "5s", "-rate", "1000", "-seed", "18"}, &stdout, &stderr)
	out := stdout.String()
	t.Logf("report:\n%s", out)
	if code != 0 {
		t.Fatalf("killloop exited %d\nstderr:\n%s", code, stderr.String())
	}
	for name, want := range map[string]string{
		"missing ids": "0",
		"duplicates (`out` records − unique ids)": "0",
		"kills (SIGKILL)": "4",
	} {
		if got := figure(out, name); got != want {
			t.Errorf("%q = %q, want %q", name, got, want)
		}
	}
	if got := figure(out, "broker node killed (SIGKILL, once), down until it served again"); !strings.HasPrefix(got, "node ") {
		t.Errorf("the report shows no broker kill (%q)", got)
	}
}
