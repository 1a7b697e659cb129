//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fencepost-dev/fencepost/bench/internal/childproc"
	"github.com/fencepost-dev/fencepost/bench/internal/countstage"
)

// restoreGroup is the group of every restore run, and Kafka Streams'
// application.id: both name the changelog restoreGroup-counts-changelog.
const restoreGroup = "statebench"

// variant is one engine and its settings: "fencepost" or "streams",
// then ":" and settings separated by ";" (name=... names it; for
// fencepost the worker's flags without the dash, for Kafka Streams its
// properties and jvm=... the JVM options).
type variant struct {
	name, engine string
	settings     [][2]string
}

func parseVariant(s string) (variant, error) {
	engine, rest, _ := strings.Cut(s, ":")
	v := variant{name: s, engine: engine}
	if engine != "fencepost" && engine != "streams" {
		return v, fmt.Errorf("variant %q: start with fencepost or streams", s)
	}
	if rest == "" {
		v.name = engine + " defaults"
	}
	for _, kv := range strings.Split(rest, ";") {
		if kv == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return v, fmt.Errorf("variant %q: %q is not key=value", s, kv)
		}
		if k == "name" {
			v.name = val
			continue
		}
		v.settings = append(v.settings, [2]string{k, val})
	}
	return v, nil
}

// restoreRun is what one restore of one variant measured.
type restoreRun struct {
	records         int64
	window          time.Duration // first restore start to last restore end
	total           time.Duration // from exec to the last restore end
	cpu             time.Duration // the child's user+system, whole life
	rssKiB          int64
	exitCode        int
	restoreStartsAt time.Duration // from exec to the first restore start
}

func restoreMain(args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	kafka := fs.String("kafka", "embedded", "broker: embedded (the processor's, its own process), apache (Apache Kafka 4.1.1, one node) or external (-brokers; topics loaded by an earlier run are used as they are)")
	brokers := fs.String("brokers", "", "bootstrap addresses of -kafka external")
	keys := fs.Int("keys", 5_000_000, "distinct keys in the changelog")
	keySize := fs.Int("key-size", 92, "bytes of each key (the value is an 8-byte count)")
	partitions := fs.Int("partitions", 4, "partitions of the input and the changelog")
	runs := fs.Int("runs", 3, "rounds; each runs every variant once, in turn")
	jar := fs.String("streams-jar", "", "the Kafka Streams app's jar (empty: build bench/compare/streams-state with Maven)")
	dir := fs.String("dir", "", "work directory (state directories, logs; empty: a temporary one)")
	keep := fs.Bool("keep", false, "keep the work directory")
	var specs multiFlag
	fs.Var(&specs, "v", "a variant (repeatable): fencepost[:k=v;...] or streams[:k=v;...]; see restore.go")
	if err := fs.Parse(args); err != nil {
		return err
	}
	vs, err := parseVariants(specs)
	if err != nil {
		return err
	}
	ctx, cancel := interrupted()
	defer cancel()
	e, err := newEnv(ctx, *kafka, *brokers, *dir, *keep)
	if err != nil {
		return err
	}
	defer e.close()
	if slices.ContainsFunc(vs, func(v variant) bool { return v.engine == "streams" }) && *jar == "" {
		if *jar, err = buildStreamsJar(ctx, e.dir); err != nil {
			return err
		}
	}
	changelog := restoreGroup + "-" + countstage.Store + "-changelog"
	recBytes := *keySize + 8
	key := func(i int) []byte { return restoreKey(i, *keySize) }
	exists := false
	for _, t := range []struct {
		name      string
		compacted bool
	}{{"in", false}, {changelog, true}} {
		err := e.createTopic(ctx, t.name, *partitions, t.compacted)
		exists = errors.Is(err, errExists)
		if err != nil && !exists {
			return err
		}
	}
	if exists {
		logf("%s exists: restoring what it holds", changelog)
	} else {
		began := time.Now()
		if err := e.produce(ctx, changelog, *partitions, *keys, key, func(i int) []byte { return countstage.Encode(int64(1 + i%5)) }); err != nil {
			return fmt.Errorf("loading the changelog: %w", err)
		}
		// one input record per partition: fencepost restores a
		// partition's stores before its first batch (Kafka Streams at
		// its assignment)
		if err := e.produce(ctx, "in", *partitions, *partitions, key, func(int) []byte { return []byte("x") }); err != nil {
			return err
		}
		logf("loaded %d records of %d B into %s (%d partitions) in %v", *keys, recBytes, changelog, *partitions, time.Since(began).Round(time.Second))
	}

	results := make([][]restoreRun, len(vs))
	for r := 0; r < *runs; r++ {
		for i, v := range vs {
			if err := ctx.Err(); err != nil {
				return err
			}
			res, err := e.restoreOnce(ctx, v, *jar, *partitions, fmt.Sprintf("r%d-v%d", r, i))
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, v.name, err)
			}
			results[i] = append(results[i], res)
			logf("round %d %-40s %s", r+1, v.name, res.line(recBytes))
		}
	}
	printRestoreReport(os.Stdout, e, vs, results, *keys, recBytes, *partitions)
	return nil
}

func (r restoreRun) line(recBytes int) string {
	return fmt.Sprintf("records %d window %v rec/s %.0f MB/s %.1f from-exec %v cpu %v peak-rss %d MiB",
		r.records, r.window.Round(time.Millisecond), float64(r.records)/r.window.Seconds(),
		float64(r.records)*float64(recBytes)/r.window.Seconds()/1e6, r.total.Round(time.Millisecond),
		r.cpu.Round(time.Millisecond), r.rssKiB/1024)
}

// restoreKey is key i: 16 hex digits of a hash of i first, so that keys
// arrive in no order (as a real store's do), then i, then filler.
func restoreKey(i, size int) []byte {
	x := uint64(i) + 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	k := fmt.Appendf(make([]byte, 0, size), "%016x-%010d-", x, i)
	for len(k) < size {
		k = append(k, byte('a'+len(k)%26))
	}
	return k[:size]
}

// restoreOnce runs one variant from an empty state directory in a fresh
// group (the group's offsets deleted) until every partition is restored.
func (e *env) restoreOnce(ctx context.Context, v variant, jar string, partitions int, tag string) (restoreRun, error) {
	if err := e.deleteGroup(ctx, restoreGroup); err != nil {
		return restoreRun{}, err
	}
	stateDir := filepath.Join(e.dir, "state-"+tag)
	var bin string
	var args []string
	switch v.engine {
	case "fencepost":
		self, err := os.Executable()
		if err != nil {
			return restoreRun{}, err
		}
		bin = self
		args = []string{workerCommand, "-brokers", strings.Join(e.addrs, ","), "-group", restoreGroup, "-topic", "in",
			"-state-dir", stateDir, "-partitions", strconv.Itoa(partitions), "-exit-after-restore"}
		for _, kv := range v.settings {
			args = append(args, "-"+kv[0]+"="+kv[1])
		}
	case "streams":
		bin = "java"
		jvm := []string{"-Xmx512m", "-XX:+UseG1GC"}
		var props []string
		for _, kv := range v.settings {
			if kv[0] == "jvm" {
				jvm = strings.Fields(kv[1])
				continue
			}
			props = append(props, kv[0]+"="+kv[1])
		}
		args = append(jvm, "-XX:+ExitOnOutOfMemoryError", "-jar", jar,
			"bootstrap.servers="+strings.Join(e.addrs, ","), "application.id="+restoreGroup, "input.topic=in",
			"state.dir="+stateDir, "num.standby.replicas=0", "bench.exit.after.restore=true",
			// a dynamic Streams member does not leave its group at
			// close: the next run's group is empty once its session
			// ends (the restore does not use the group's session)
			"consumer.session.timeout.ms=6000", "consumer.heartbeat.interval.ms=2000",
			"bench.partitions="+strconv.Itoa(partitions))
		args = append(args, props...)
	}
	started := time.Now()
	c, err := e.procs.Start(e.dir, tag, bin, args...)
	if err != nil {
		return restoreRun{}, err
	}
	defer c.Stop(syscall.SIGKILL, 10*time.Second)
	hwm := watchHWM(c)
	select {
	case <-c.Done:
	case <-time.After(15 * time.Minute):
		return restoreRun{}, fmt.Errorf("not restored within 15 minutes; see %s", c.Log)
	case <-ctx.Done():
		return restoreRun{}, ctx.Err()
	}
	res := restoreRun{exitCode: c.ExitCode()}
	if ru, ok := c.Cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	res.rssKiB = hwm()
	found := false
	f, err := os.Open(c.Log)
	if err != nil {
		return res, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 4 && fields[0] == "restored" {
			n, _ := strconv.ParseInt(fields[1], 10, 64)
			first, _ := strconv.ParseInt(fields[2], 10, 64)
			last, _ := strconv.ParseInt(fields[3], 10, 64)
			res.records = n
			res.window = time.Duration(last-first) * time.Millisecond
			res.total = time.UnixMilli(last).Sub(started)
			res.restoreStartsAt = time.UnixMilli(first).Sub(started)
			found = true
		}
	}
	if !found || res.exitCode != 0 {
		return res, fmt.Errorf("exit status %d, restored line found: %v; see %s", res.exitCode, found, c.Log)
	}
	if !e.keep {
		_ = os.RemoveAll(stateDir)
	}
	return res, nil
}

// watchHWM samples the child's peak resident set (VmHWM in
// /proc/PID/status) every 20ms until it exits; the function returned
// gives the last sample, in KiB. Not getrusage's ru_maxrss: a child
// started with vfork and exec starts from its parent's peak (the kernel
// records the parent's high-water mark at the exec), and this process
// holds the loader's buffers.
func watchHWM(c *childproc.Child) func() int64 {
	var last atomic.Int64
	path := fmt.Sprintf("/proc/%d/status", c.Cmd.Process.Pid)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c.Running() {
			if b, err := os.ReadFile(path); err == nil {
				for _, l := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
						if n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil && n > last.Load() {
							last.Store(n)
						}
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() int64 { <-done; return last.Load() }
}

// buildStreamsJar builds bench/compare/streams-state into dir.
func buildStreamsJar(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	build := filepath.Join(dir, "streams-build")
	cmd := exec.CommandContext(ctx, "mvn", "-q", "package", "-Dstreams.buildDir="+build)
	cmd.Dir = filepath.Join(root, "bench", "compare", "streams-state")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	logf("building the Kafka Streams app (Maven)")
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building bench/compare/streams-state (Java 17+ and Maven needed): %w", err)
	}
	return filepath.Join(build, "streams-state.jar"), nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// parseVariants parses the -v flags (parseVariant); none means
// fencepost and Kafka Streams at their defaults.
func parseVariants(specs multiFlag) ([]variant, error) {
	if len(specs) == 0 {
		specs = multiFlag{"fencepost", "streams"}
	}
	var vs []variant
	for _, s := range specs {
		v, err := parseVariant(s)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}
