package kafkatools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStateReset: reset prints what it would delete (each store's local
// directory and changelog topic) and deletes it only with --execute;
// --all takes the stores the file declares and those on disk, and leaves
// alone other topics named like the group's changelogs; it refuses names
// with nothing to reset, a group with members and stores held open, and
// then changes nothing.
func TestStateReset(t *testing.T) {
	addr := testCluster(t, 2, "orders", "g-counts-changelog", "g-other-changelog", "g-x-y-changelog", "h-counts-changelog")
	dir := t.TempDir()
	writeStore(t, dir, "g", "counts", 0, map[string]string{"a": "1"}, 1)
	writeStore(t, dir, "g", "counts", 1, map[string]string{"b": "2"}, 1)
	writeStore(t, dir, "g", "other", 0, map[string]string{"c": "3"}, 1)
	cfg := stateConfig(t, addr, dir, "disk")
	ctx := context.Background()
	exists := func(topic string) bool {
		cl := testClient(t, addr) // a new one: a client caches metadata
		defer cl.Close()
		ok, err := topicExists(ctx, kadm.NewClient(cl), topic)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// untouched checks that nothing was deleted
	untouched := func(t *testing.T) {
		t.Helper()
		for _, p := range []string{"counts/0", "counts/1", "other/0"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		}
		for _, topic := range []string{"g-counts-changelog", "g-other-changelog"} {
			if !exists(topic) {
				t.Errorf("%s was deleted", topic)
			}
		}
	}
	plan := func(t *testing.T, out string) StateResetPlan {
		t.Helper()
		var p StateResetPlan
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return p
	}

	// a --dir mistyped as a home directory: nothing in it is a store
	notStores := t.TempDir()
	writeFile(t, filepath.Join(notStores), "notes.txt", "keep me")
	if err := os.MkdirAll(filepath.Join(notStores, "Documents"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(notStores, "Documents"), "letter.txt", "keep me too")

	t.Run("plans", func(t *testing.T) {
		tests := []struct {
			name           string
			args           []string
			code           int
			stdout, stderr string
		}{
			{"one store", []string{"counts", "-c", cfg}, ExitOK,
				"counts  " + filepath.Join(dir, "counts") + " (2 partition(s), ", "plan only: add --execute to apply it"},
			{"what it would delete", []string{"counts", "-c", cfg}, ExitOK, "g-counts-changelog (2 partition(s))\n\n1 store(s): deletes 1 local directory(ies) and 1 changelog topic(s)", ""},
			{"a store with no local directory", []string{"counts", "--brokers", addr, "--group", "g", "--dir", t.TempDir()}, ExitOK,
				"counts  -                ", ""},
			{"a store with nothing to reset", []string{"counts", "nope", "-c", cfg}, ExitFailure, "",
				"nothing to reset for store(s) nope: no directory in " + dir + " and no changelog topic (check the names; the stages of " + cfg + " declare counts)"},
			{"stores and --all", []string{"counts", "--all", "-c", cfg}, ExitUsage, "", "name stores or give --all, not both"},
			{"no stores", []string{"-c", cfg}, ExitUsage, "", "name the stores to reset, or give --all"},
			{"no group", []string{"counts", "--brokers", addr, "--dir", dir}, ExitUsage, "", "name the consumer group with --group"},
			{"no directory", []string{"counts", "--brokers", addr, "--group", "g"}, ExitUsage, "", "name the state directory with --dir"},
			{"no cluster", []string{"counts", "--group", "g", "--dir", dir}, ExitFailure, "", "name the cluster"},
			{"a directory that is not a store's", []string{"Documents", "--brokers", addr, "--group", "g", "--dir", notStores}, ExitFailure, "",
				"not a store's directory, so not reset: " + filepath.Join(notStores, "Documents") + " holds letter.txt, which is not a partition's store"},
			{"--all in a directory of no stores", []string{"--all", "--brokers", addr, "--group", "g", "--dir", notStores}, ExitFailure, "",
				"--all: no stores to reset: no configuration file names any (-c), and " + notStores + " holds none"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				code, out, errOut := runCLI(ctx, stateRegistry(), append([]string{"state", "reset"}, tt.args...)...)
				if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) {
					t.Errorf("exit %d, want %d\nstdout:\n%s\nwant %q\nstderr:\n%s\nwant %q", code, tt.code, out, tt.stdout, errOut, tt.stderr)
				}
				untouched(t)
				if _, err := os.Stat(filepath.Join(notStores, "Documents", "letter.txt")); err != nil {
					t.Errorf("a file outside any store: %v", err)
				}
			})
		}
		code, out, errOut := runCLI(ctx, stateRegistry(), "state", "reset", "--all", "-c", cfg, "-o", "json")
		if code != ExitOK {
			t.Fatalf("--all: exit %d: %s", code, errOut)
		}
		p := plan(t, out)
		var stores []string
		for _, s := range p.Stores {
			stores = append(stores, s.Store)
		}
		if p.Group != "g" || p.Executed || len(p.Members) != 0 || !slices.Equal(stores, []string{"counts", "other"}) ||
			!slices.Equal(p.LeftAlone, []string{"g-x-y-changelog"}) || !slices.Equal(p.Stores[0].LocalPartitions, []int32{0, 1}) ||
			p.Stores[0].LocalBytes == 0 || p.Stores[1].ChangelogPartitions != 2 {
			t.Errorf("--all: %+v", p)
		}
		untouched(t)
	})

	t.Run("refusals", func(t *testing.T) {
		holdStore(t, dir, "g", "other", 0)
		code, out, errOut := runCLI(ctx, stateRegistry(), "state", "reset", "--all", "-c", cfg, "--execute")
		if code != ExitFailure || !strings.Contains(errOut, "not applied: a running process holds local stores open: "+filepath.Join(dir, "other", "0")) ||
			!strings.Contains(out, "in use: partition(s) 0") {
			t.Errorf("a store held open: exit %d\n%s%s", code, out, errOut)
		}
		untouched(t)

		member := testClient(t, addr, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders"), kgo.ClientID("the-member"), kgo.DisableAutoCommit())
		defer member.Close()
		waitUntil(t, 20*time.Second, "the member in the group", func() bool {
			pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			member.PollFetches(pctx)
			_, out, _ := runCLI(ctx, stateRegistry(), "state", "reset", "counts", "-c", cfg, "-o", "json")
			return len(plan(t, out).Members) == 1
		})
		code, _, errOut = runCLI(ctx, stateRegistry(), "state", "reset", "counts", "-c", cfg)
		if code != ExitOK || !strings.Contains(errOut, `plan only; group "g" has 1 live member(s) (the-member on `) {
			t.Errorf("plan with a member: exit %d: %s", code, errOut)
		}
		code, _, errOut = runCLI(ctx, stateRegistry(), "state", "reset", "counts", "-c", cfg, "--execute")
		if code != ExitFailure || !strings.Contains(errOut, `not applied: group "g" has 1 live member(s) (the-member on `) {
			t.Errorf("execute with a member: exit %d: %s", code, errOut)
		}
		untouched(t)
	})

	// the store was closed with the subtest, and the member left
	waitUntil(t, 20*time.Second, "the group empty", func() bool {
		_, out, _ := runCLI(ctx, stateRegistry(), "state", "reset", "counts", "-c", cfg, "-o", "json")
		return len(plan(t, out).Members) == 0
	})
	code, out, errOut := runCLI(ctx, stateRegistry(), "state", "reset", "--all", "-c", cfg, "--execute")
	if code != ExitOK || !strings.Contains(out, "state reset, executed") || !strings.Contains(out, "2 store(s): deleted 2 local directory(ies) and 2 changelog topic(s)") ||
		!strings.Contains(errOut, "the group's committed offsets are unchanged: to build the state again from the input, also run processor offsets reset --group g --topic orders --to-earliest --execute") {
		t.Fatalf("execute: exit %d\n%s%s", code, out, errOut)
	}
	for _, s := range []string{"counts", "other"} {
		if _, err := os.Stat(filepath.Join(dir, s)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", s, err)
		}
	}
	for topic, want := range map[string]bool{"g-counts-changelog": false, "g-other-changelog": false, "g-x-y-changelog": true, "h-counts-changelog": true, "orders": true} {
		if got := exists(topic); got != want {
			t.Errorf("topic %s exists: %v, want %v", topic, got, want)
		}
	}
	if code, _, errOut := runCLI(ctx, stateRegistry(), "state", "reset", "counts", "-c", cfg, "--execute"); code != ExitFailure || !strings.Contains(errOut, "nothing to reset for store(s) counts") {
		t.Errorf("again: exit %d: %s", code, errOut)
	}
}
