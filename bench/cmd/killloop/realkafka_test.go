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
	out := runLoop(t, "-kafka", "3node", "-guarantee", "exactly_once", "-instances", "3", "-partitions", "6",
		"-kills", "4", "-kill-broker", "-interval", "5s", "-rate", "1000", "-seed", "18")
	checkFigures(t, out, map[string]string{
		"missing ids": "0",
		"duplicates (`out` records − unique ids)": "0",
		"kills (SIGKILL)": "4",
	})
	checkBrokerKilled(t, out)
}

// TestRealKafkaKillLoopState is the kill loop with state on Apache Kafka
// with three nodes: three instances count the records of 64 keys in a
// store (each on a state dir of its own, kept across its restarts), four
// SIGKILLs one after the other and, halfway, the transaction coordinator
// of the first instance's producer killed and restarted. At exactly_once
// the store's changelog, read read_committed and folded, holds every
// key's count of records produced, and the outputs carry each key's
// counts 1..N once each.
func TestRealKafkaKillLoopState(t *testing.T) {
	out := runLoop(t, "-state", "-kafka", "3node", "-guarantee", "exactly_once", "-instances", "3", "-partitions", "6",
		"-kills", "4", "-kill-broker", "-interval", "5s", "-rate", "1000", "-seed", "18")
	checkFigures(t, out, map[string]string{
		"missing ids": "0",
		"duplicates (`out` records − unique ids)":                         "0",
		"keys whose count in the changelog equals their records produced": "64 of 64",
		"keys whose outputs do not carry the counts 1..N once each":       "0",
		"kills (SIGKILL)": "4",
	})
	checkBrokerKilled(t, out)
}

// TestRealKafkaKillLoopWindows is the kill loop of windows on Apache
// Kafka with three nodes: three instances count the records of 64 users
// in tumbling windows of 1s (grace 500ms) emitted on close, re-keyed from
// the input's id keys through the repartition topic, each on a state dir
// of its own kept across its restarts; four SIGKILLs one after the other
// and, halfway, the transaction coordinator of the first instance's
// producer killed and restarted. At exactly_once every window the replay
// of the repartition topic (read read_committed) closes is in "out"
// (read read_committed) once, with its exact count, sum of ids, first
// and last id, and no other window is.
func TestRealKafkaKillLoopWindows(t *testing.T) {
	out := runLoop(t, "-window", "-kafka", "3node", "-guarantee", "exactly_once", "-instances", "3", "-partitions", "6",
		"-kills", "4", "-kill-broker", "-interval", "5s", "-rate", "1000", "-seed", "18")
	checkWindowReport(t, out, "exactly_once", 4, 64)
	checkBrokerKilled(t, out)
}

// checkBrokerKilled asserts the report shows one of the 3 nodes killed.
func checkBrokerKilled(t *testing.T, report string) {
	t.Helper()
	if got := figure(report, "broker node killed (SIGKILL, once), down until it served again"); !strings.HasPrefix(got, "node ") {
		t.Errorf("the report shows no broker kill (%q)", got)
	}
}
