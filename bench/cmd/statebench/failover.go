//go:build unix

package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/bench/internal/childproc"
	"github.com/fencepost-dev/fencepost/bench/internal/countstage"
)

// failoverRun is what one SIGKILL measured.
type failoverRun struct {
	partitions []int32       // the killed instance's
	assigned   time.Duration // from the kill until the new owner had all of them
	restored   time.Duration // until its restores of them ended
	resumed    time.Duration // until every one of them had a commit past its offset at the kill
	records    int64         // changelog records the new owner restored
	localState []int32       // the killed instance's partitions the new owner had local state for (full mode: none)
}

func failoverMain(args []string) error {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	kafka := fs.String("kafka", "embedded", "broker: embedded, apache or external (-brokers)")
	brokers := fs.String("brokers", "", "bootstrap addresses of -kafka external")
	mode := fs.String("mode", "full", "full: a dynamic member is killed and the survivor, with no local state for its partitions, restores them; "+
		"static: a static member (group_instance_id) is killed and restarted at once on its own disk (restores the tail)")
	keys := fs.Int("keys", 1_000_000, "distinct keys counted into the store before the kill")
	keySize := fs.Int("key-size", 92, "bytes of each key")
	partitions := fs.Int("partitions", 4, "partitions of the input")
	runs := fs.Int("runs", 3, "kills, each in a fresh group with a fresh store")
	rate := fs.Int("rate", 2000, "records/s written to the input during the kill (keys from the same set)")
	session := fs.Duration("session-timeout", 3*time.Second, "consumer.session_timeout of the instances (heartbeat a third of it)")
	dir := fs.String("dir", "", "work directory (empty: a temporary one)")
	keep := fs.Bool("keep", false, "keep the work directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mode != "full" && *mode != "static" {
		return fmt.Errorf("-mode %q: use full or static", *mode)
	}
	ctx, cancel := interrupted()
	defer cancel()
	e, err := newEnv(ctx, *kafka, *brokers, *dir, *keep)
	if err != nil {
		return err
	}
	defer e.close()
	key := func(i int) []byte { return restoreKey(i, *keySize) }
	if err := e.createTopic(ctx, "in", *partitions, false); err != nil {
		return err
	}
	began := time.Now()
	if err := e.produce(ctx, "in", *partitions, *keys, key, func(int) []byte { return []byte("x") }); err != nil {
		return err
	}
	logf("loaded %d distinct keys into in (%d partitions) in %v", *keys, *partitions, time.Since(began).Round(time.Second))
	var results []failoverRun
	for r := 0; r < *runs; r++ {
		res, err := e.failoverOnce(ctx, failoverSetup{mode: *mode, run: r, partitions: *partitions, rate: *rate, keys: *keys,
			session: *session, key: key})
		if err != nil {
			return fmt.Errorf("run %d: %w", r+1, err)
		}
		results = append(results, res)
		logf("run %d: partitions %v assigned after %v, restored %d records by %v, processing again after %v (local state for %v)",
			r+1, res.partitions, res.assigned.Round(time.Millisecond), res.records, res.restored.Round(time.Millisecond),
			res.resumed.Round(time.Millisecond), res.localState)
	}
	header(os.Stdout, e, "Failover with a store to restore, mode "+*mode)
	fmt.Printf("%d keys counted before the kill (%d B keys, 8-byte counts), %d partitions, 2 instances, %d records/s during the kill, "+
		"session timeout %v. Times from the SIGKILL.\n\n", *keys, *keySize, *partitions, *rate, *session)
	fmt.Println("| run | killed instance's partitions | new owner had them all | their restores ended | all processing again | records restored | new owner's local state for them |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for i, r := range results {
		fmt.Printf("| %d | %v | %.2f s | %.2f s | **%.2f s** | %d | %v |\n", i+1, r.partitions, r.assigned.Seconds(), r.restored.Seconds(),
			r.resumed.Seconds(), r.records, r.localState)
	}
	fmt.Printf("\nmedian time to processing again: %.2f s\n", median(results, func(r failoverRun) float64 { return r.resumed.Seconds() }))
	return nil
}

type failoverSetup struct {
	mode                  string
	run, partitions, rate int
	keys                  int
	session               time.Duration
	key                   func(int) []byte
}

// instance is one worker process of a failover run and what its log
// said.
type instance struct {
	name, dir string
	args      []string
	proc      *childproc.Child
}

func (e *env) startInstance(in *instance, tag string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c, err := e.procs.Start(e.dir, tag, self, in.args...)
	in.proc = c
	return err
}

// logLines are an instance's lines of one kind, fields after the first.
func logLines(path, kind string) [][]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 1 && fs[0] == kind {
			out = append(out, fs[1:])
		}
	}
	return out
}

func parsePartitions(s string) []int32 {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, int32(n))
		}
	}
	return out
}

func (e *env) failoverOnce(ctx context.Context, s failoverSetup) (failoverRun, error) {
	group := fmt.Sprintf("failover-%s-%d-%d", s.mode, s.run, time.Now().Unix())
	hb := s.session / 3
	mk := func(name string) *instance {
		in := &instance{name: name, dir: filepath.Join(e.dir, group, name)}
		in.args = []string{workerCommand, "-brokers", strings.Join(e.addrs, ","), "-group", group, "-topic", "in",
			"-state-dir", in.dir, "-partitions", "1000000", "-session-timeout", s.session.String(), "-heartbeat-interval", hb.String()}
		if s.mode == "static" {
			in.args = append(in.args, "-instance-id", name)
		}
		return in
	}
	a, b := mk("a"), mk("b")
	for _, in := range []*instance{a, b} {
		if err := e.startInstance(in, fmt.Sprintf("%s-%s", group, in.name)); err != nil {
			return failoverRun{}, err
		}
	}
	defer func() {
		for _, in := range []*instance{a, b} {
			in.proc.Stop(syscall.SIGTERM, 20*time.Second)
		}
	}()
	// the store: every loaded key counted, the changelog written
	ends, err := e.adm.ListEndOffsets(ctx, "in")
	if err != nil {
		return failoverRun{}, err
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	if err := e.waitCommitted(ctx, group, want, 5*time.Minute); err != nil {
		return failoverRun{}, fmt.Errorf("building the store: %w", err)
	}
	// records keep coming during the kill
	pctx, stopProducing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.steady(pctx, s) }()
	defer func() { stopProducing(); wg.Wait() }()
	time.Sleep(3 * time.Second)

	owned := func(in *instance) []int32 {
		lines := logLines(in.proc.Log, "partitions")
		if len(lines) == 0 {
			return nil
		}
		return parsePartitions(lines[len(lines)-1][0])
	}
	// full: kill an instance whose partitions the other never owned (an
	// early rebalance may have given the other some of them for a while,
	// leaving it a local store of them)
	if s.mode == "full" && len(localStores(b.dir, owned(a))) > 0 && len(localStores(a.dir, owned(b))) == 0 {
		a, b = b, a
	}
	res := failoverRun{partitions: owned(a)}
	if len(res.partitions) == 0 {
		return failoverRun{}, fmt.Errorf("instance %s owns no partition; see %s", a.name, a.proc.Log)
	}
	at, err := e.committed(ctx, group)
	if err != nil {
		return failoverRun{}, err
	}
	owner := b
	if s.mode == "static" {
		owner = a
	}
	// full: the survivor must restore from the changelog, with no local
	// store of the killed instance's partitions; static: the restarted
	// instance has its own
	res.localState = localStores(owner.dir, res.partitions)
	killed := time.Now()
	a.proc.Stop(syscall.SIGKILL, 10*time.Second)
	if s.mode == "static" {
		if err := e.startInstance(a, fmt.Sprintf("%s-%s-restarted", group, a.name)); err != nil {
			return res, err
		}
	}
	// processing again: a commit past the offset at the kill on each of
	// the killed instance's partitions
	for deadline := killed.Add(3 * time.Minute); ; {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("partitions %v not processing again within 3 minutes; logs: %s", res.partitions, e.dir)
		}
		now, err := e.committed(ctx, group)
		if err == nil && !slices.ContainsFunc(res.partitions, func(p int32) bool { return now[p] <= at[p] }) {
			res.resumed = time.Since(killed)
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	// the phases, from the new owner's log
	kms := killed.UnixMilli()
	for _, l := range logLines(owner.proc.Log, "partitions") {
		ms, _ := strconv.ParseInt(l[1], 10, 64)
		ps := parsePartitions(l[0])
		if ms >= kms && !slices.ContainsFunc(res.partitions, func(p int32) bool { return !slices.Contains(ps, p) }) {
			res.assigned = time.Duration(ms-kms) * time.Millisecond
			break
		}
	}
	var before int64
	for _, l := range logLines(owner.proc.Log, "restores") {
		n, _ := strconv.ParseInt(l[1], 10, 64)
		ms, _ := strconv.ParseInt(l[2], 10, 64)
		if ms < kms {
			before = n
			continue
		}
		res.records = n - before
		res.restored = time.Duration(ms-kms) * time.Millisecond
	}
	return res, nil
}

// localStores are the partitions of ps whose store has a local
// directory under dir.
func localStores(dir string, ps []int32) []int32 {
	var out []int32
	for _, p := range ps {
		if _, err := os.Stat(filepath.Join(dir, countstage.Store, strconv.Itoa(int(p)))); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// steady writes s.rate records a second, keys from the loaded set, until
// ctx ends.
func (e *env) steady(ctx context.Context, s failoverSetup) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	per := max(s.rate/100, 1)
	i := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for j := 0; j < per; j++ {
			e.cl.Produce(ctx, &kgo.Record{Topic: "in", Partition: int32(i % s.partitions), Key: s.key(rand.IntN(s.keys)), Value: []byte("x")}, nil)
			i++
		}
	}
}

// committed is group's committed offset of each partition of "in".
func (e *env) committed(ctx context.Context, group string) (map[int32]int64, error) {
	offs, err := e.adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range offs["in"] {
		out[p] = o.At
	}
	return out, nil
}

func (e *env) waitCommitted(ctx context.Context, group string, want map[int32]int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		got, err := e.committed(ctx, group)
		if err == nil {
			done := true
			for p, w := range want {
				done = done && got[p] >= w
			}
			if done {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("group %s committed %v of %v after %v", group, got, want, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
