//go:build unix

package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestParseVariant(t *testing.T) {
	v, err := parseVariant("streams:name=tuned;num.stream.threads=2;jvm=-Xmx256m -XX:+UseSerialGC")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"num.stream.threads", "2"}, {"jvm", "-Xmx256m -XX:+UseSerialGC"}}
	if v.name != "tuned" || v.engine != "streams" || !slices.Equal(v.settings, want) {
		t.Fatalf("got %+v", v)
	}
	if v, _ := parseVariant("fencepost"); v.name != "fencepost defaults" || len(v.settings) != 0 {
		t.Fatalf("bare engine: got %+v", v)
	}
	for _, bad := range []string{"flink", "fencepost:concurrency"} {
		if _, err := parseVariant(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestRestoreKey: keys have the asked size, are distinct, and do not
// come in order (a restore's keys arrive in no order).
func TestRestoreKey(t *testing.T) {
	seen := map[string]bool{}
	ordered := true
	var prev string
	for i := 0; i < 10000; i++ {
		k := string(restoreKey(i, 92))
		if len(k) != 92 || seen[k] {
			t.Fatalf("key %d: %q (len %d, seen %v)", i, k, len(k), seen[k])
		}
		seen[k] = true
		ordered = ordered && k > prev
		prev = k
	}
	if ordered {
		t.Fatal("keys come in order")
	}
}

func TestLogLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	log := "start 1\npartitions 0,2 100\nnoise\nrestores 1 50 120\npartitions 1,3 200\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	ls := logLines(path, "partitions")
	if len(ls) != 2 || !slices.Equal(parsePartitions(ls[1][0]), []int32{1, 3}) || ls[1][1] != "200" {
		t.Fatalf("got %v", ls)
	}
}
