//go:build unix

// Command killloop measures how many records the processor repeats
// (duplicates) per SIGKILL.
//
// It starts a broker ("processor broker", its own process), an
// independent producer writing unique ids to topic "in" at a fixed rate,
// and two processor instances in one group whose only stage copies "in"
// to "out". Every interval (±20%, from -seed) it SIGKILLs one instance,
// alternating, and restarts it at once. After the last kill it stops the
// producer, waits for the group to commit everything, stops both
// instances with SIGTERM, reads all of "out" with a client of its own (no
// group) and reports records produced, unique ids, missing ids (a lost
// record: exit status 1), duplicates, and duplicates per kill.
//
// A duplicate is attributed to the kill that preceded the moment the
// reader saw it; the reader follows "out" live, so that is the kill
// whose uncommitted records were processed again.
//
//	go run ./bench/cmd/killloop -kills 20 -interval 3s -rate 2000
//
// The group's session timeout is short (-session-timeout, 1s), so that
// the partitions of a killed instance move within a second rather than
// after the default 30s, which would leave the group rebalancing through
// most of a 3s kill interval.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	group   = "killloop"
	inputT  = "in"
	outputT = "out"
)

// options are the command-line flags.
type options struct {
	processor      string
	rate           int
	kills          int
	interval       time.Duration
	partitions     int
	commitInterval string
	sessionTimeout time.Duration
	settle         time.Duration
	seed           int64
	keep           bool
	verbose        bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("killloop", flag.ContinueOnError)
	fs.StringVar(&o.processor, "processor", "", "processor binary `PATH` (default: go build ./cmd/processor into the temp dir)")
	fs.IntVar(&o.rate, "rate", 2000, "records per second produced to \"in\"")
	fs.IntVar(&o.kills, "kills", 20, "SIGKILLs, alternating between the two instances")
	fs.DurationVar(&o.interval, "interval", 3*time.Second, "mean time between kills (each is jittered by ±20%)")
	fs.IntVar(&o.partitions, "partitions", 4, "partitions of \"in\" and \"out\"")
	fs.StringVar(&o.commitInterval, "commit-interval", "", "consumer.commit_interval in the config (empty: leave the key out, the default applies)")
	fs.DurationVar(&o.sessionTimeout, "session-timeout", time.Second, "consumer.session_timeout (heartbeat_interval is a tenth, rebalance_timeout three times)")
	fs.DurationVar(&o.settle, "settle", time.Minute, "after the last kill, how long the group may take to commit everything")
	fs.Int64Var(&o.seed, "seed", 0, "seed of the kill jitter (0: from the clock; the report prints it)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temp dir (config, logs); it is always kept on failure")
	fs.BoolVar(&o.verbose, "v", false, "report each kill on stderr")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.rate < 1 || o.kills < 1 || o.interval <= 0 || o.partitions < 1 || o.sessionTimeout < 100*time.Millisecond || o.settle <= 0 {
		return o, errors.New("-rate, -kills, -partitions must be positive; -interval and -settle too; -session-timeout at least 100ms")
	}
	if o.commitInterval != "" {
		if d, err := time.ParseDuration(o.commitInterval); err != nil || d <= 0 {
			return o, fmt.Errorf("-commit-interval %q: want a positive duration such as 100ms", o.commitInterval)
		}
	}
	if o.seed == 0 {
		o.seed = time.Now().UnixNano()
	}
	return o, nil
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "killloop:", err)
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "killloop-")
	if err != nil {
		fmt.Fprintln(stderr, "killloop:", err)
		return 1
	}
	keep := o.keep
	defer func() {
		if keep {
			fmt.Fprintln(stderr, "killloop: kept", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	}()
	var procs children
	defer procs.killAll() // runs before the removal above

	m := &measurement{o: o, dir: dir, procs: &procs, stderr: stderr}
	res, err := m.run(ctx)
	if err != nil {
		keep = true
		fmt.Fprintf(stderr, "killloop: FAILED: %v\nlogs:\n%s", err, procs.logs())
		return 1
	}
	res.print(stdout, o, args)
	if res.missing > 0 || res.unknown > 0 {
		keep = true
		fmt.Fprintf(stderr, "\nkillloop: RECORDS MISSING: %d of %d ids produced to %q never reached %q (first: %v); %d records in %q are not ids\nlogs:\n%s",
			res.missing, res.produced, inputT, outputT, res.firstMissing, res.unknown, outputT, procs.logs())
		return 1
	}
	return 0
}

// measurement is one run of the kill loop.
type measurement struct {
	o      options
	dir    string
	procs  *children
	stderr io.Writer
	bin    string
	cfg    string
	phase  atomic.Int64 // kills so far; kills+1 once the instances are told to stop
}

// result holds the figures of a run.
type result struct {
	processor                      string // what was measured
	produced, inRecords, outRecord int64
	unique, missing, unknown, dups int64
	firstMissing                   []int64
	perKill                        []int64 // duplicates attributed to each kill
	before, after                  int64   // duplicates seen before the first kill, after SIGTERM
	problems                       []string
}

func (m *measurement) logf(format string, args ...any) {
	if m.o.verbose {
		fmt.Fprintf(m.stderr, "killloop: "+format+"\n", args...)
	}
}

func (m *measurement) run(ctx context.Context) (*result, error) {
	o := m.o
	res := &result{processor: o.processor}
	m.bin = o.processor
	if m.bin == "" {
		var err error
		if m.bin, res.processor, err = buildProcessor(ctx, m.dir); err != nil {
			return nil, err
		}
	}
	broker, err := m.procs.start(m.dir, "broker", m.bin, "broker", "--port", "0",
		"--topics", inputT+","+outputT, "--partitions", fmt.Sprint(o.partitions))
	if err != nil {
		return nil, err
	}
	addr, err := waitBootstrap(ctx, broker, 30*time.Second)
	if err != nil {
		return nil, err
	}
	m.logf("broker at %s; temp dir %s", addr, m.dir)
	if m.cfg, err = writeConfig(m.dir, addr, o); err != nil {
		return nil, err
	}
	seeds := kgo.SeedBrokers(strings.Split(addr, ",")...)
	cl, err := kgo.NewClient(seeds)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	// The reader follows "out" from the start for the whole run.
	rcl, err := kgo.NewClient(seeds, kgo.ConsumeTopics(outputT), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer rcl.Close()
	t := &tally{pos: map[int32]int64{}, byPhase: map[int64]int64{}, phase: &m.phase}
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	readDone := make(chan error, 1)
	go func() { readDone <- t.read(readCtx, rcl) }()

	prodCtx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	type produced struct {
		n   int64
		err error
	}
	prodDone := make(chan produced, 1)
	go func() {
		n, err := produceAtRate(prodCtx, cl, inputT, o.rate)
		prodDone <- produced{n, err}
	}()

	// Two instances; each kill restarts the victim under a new log name.
	var inst [2]*child
	starts := [2]int{}
	startInst := func(i int) error {
		starts[i]++
		c, err := m.procs.start(m.dir, fmt.Sprintf("processor-%c%d", 'a'+i, starts[i]), m.bin,
			"run", "-c", m.cfg, "--http", "off", "--progress", "0")
		inst[i] = c
		return err
	}
	for i := range inst {
		if err := startInst(i); err != nil {
			return nil, err
		}
	}
	rng := rand.New(rand.NewPCG(uint64(o.seed), 0))
	for k := 1; k <= o.kills; k++ {
		wait := time.Duration(float64(o.interval) * (0.8 + 0.4*rng.Float64()))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-readDone:
			return nil, fmt.Errorf("the reader of %q stopped: %v", outputT, err)
		case <-time.After(wait):
		}
		for _, c := range inst {
			if !c.running() {
				return nil, fmt.Errorf("%s exited on its own before kill %d (%v); see %s", c.name, k, c.err, c.log)
			}
		}
		v := (k - 1) % 2
		old := inst[v]
		if !old.stop(syscall.SIGKILL, 10*time.Second) {
			return nil, fmt.Errorf("%s did not die within 10s of SIGKILL", old.name)
		}
		m.phase.Store(int64(k))
		if err := startInst(v); err != nil {
			return nil, err
		}
		m.logf("kill %d/%d after %v: SIGKILL %s (pid %d); restarted as %s (pid %d)",
			k, o.kills, wait.Round(time.Millisecond), old.name, old.cmd.Process.Pid, inst[v].name, inst[v].cmd.Process.Pid)
	}

	stopProducing()
	p := <-prodDone
	res.produced = p.n
	if p.err != nil {
		return nil, p.err
	}
	m.logf("produced %d records; waiting for the group to commit them all", p.n)
	if err := m.waitCaughtUp(ctx, adm, inst); err != nil {
		return nil, err
	}

	// Graceful stop: SIGTERM; a duplicate seen from here on is counted
	// apart (a graceful stop commits what it processed).
	m.phase.Store(int64(o.kills) + 1)
	for _, c := range inst {
		c.signal(syscall.SIGTERM)
	}
	for _, c := range inst {
		if !c.wait(45 * time.Second) {
			res.problems = append(res.problems, fmt.Sprintf("%s did not exit within 45s of SIGTERM (see %s)", c.name, c.log))
		} else if code := c.exitCode(); code != 0 {
			res.problems = append(res.problems, fmt.Sprintf("%s exited %d on SIGTERM (see %s)", c.name, code, c.log))
		}
	}

	ends, outSum, err := endOffsets(ctx, adm, outputT)
	if err != nil {
		return nil, err
	}
	if _, res.inRecords, err = endOffsets(ctx, adm, inputT); err != nil {
		return nil, err
	}
	if res.inRecords != res.produced {
		res.problems = append(res.problems, fmt.Sprintf("%q holds %d records, but %d were produced: the input has duplicates of its own", inputT, res.inRecords, res.produced))
	}
	deadline := time.Now().Add(time.Minute)
	for !t.reached(ends) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the reader did not reach the end of %q (%d records) within a minute", outputT, outSum)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-readDone:
			return nil, fmt.Errorf("the reader of %q stopped: %v", outputT, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	stopReading()
	<-readDone
	m.count(t, res)
	return res, nil
}

// waitCaughtUp waits until the group committed the end of "in" on every
// partition, failing if an instance exits or -settle passes first.
func (m *measurement) waitCaughtUp(ctx context.Context, adm *kadm.Client, inst [2]*child) error {
	start := time.Now()
	var lag int64
	for time.Since(start) < m.o.settle {
		for _, c := range inst {
			if !c.running() {
				return fmt.Errorf("%s exited on its own while catching up (%v); see %s", c.name, c.err, c.log)
			}
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		done, l, err := caughtUp(qctx, adm, group, inputT)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil && done {
			m.logf("the group committed everything %v after the last kill", time.Since(start).Round(10*time.Millisecond))
			return nil
		}
		lag = l
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the group did not commit the end of %q within %v of the last kill (committed lag %d)", inputT, m.o.settle, lag)
}

// count turns what the reader saw into the figures.
func (m *measurement) count(t *tally, res *result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	res.outRecord, res.unknown = t.records, t.unknown
	for id, n := range t.count {
		switch {
		case int64(id) >= res.produced:
			res.unknown += int64(n) // an id never produced
		case n > 0:
			res.unique++
		}
	}
	for id := int64(0); id < res.produced; id++ {
		if id >= int64(len(t.count)) || t.count[id] == 0 {
			res.missing++
			if len(res.firstMissing) < 10 {
				res.firstMissing = append(res.firstMissing, id)
			}
		}
	}
	res.dups = res.outRecord - res.unknown - res.unique
	res.before = t.byPhase[0]
	res.after = t.byPhase[int64(m.o.kills)+1]
	for k := 1; k <= m.o.kills; k++ {
		res.perKill = append(res.perKill, t.byPhase[int64(k)])
	}
}

// buildProcessor builds ./cmd/processor of the module in the working
// directory into dir and says which commit it was built from.
func buildProcessor(ctx context.Context, dir string) (bin, desc string, err error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", "", errors.New("run killloop inside the fencepost module, or pass -processor")
	}
	root := filepath.Dir(mod)
	bin = filepath.Join(dir, "processor")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/processor")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build ./cmd/processor: %v\n%s", err, out)
	}
	desc = "./cmd/processor of " + root
	if rev, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		desc += " at " + strings.TrimSpace(string(rev))
		if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			desc += " with uncommitted changes"
		}
	}
	return bin, desc, nil
}

// writeConfig writes the processors' configuration: one produce stage
// copying "in" to "out", a stop policy for failures, no HTTP server.
func writeConfig(dir, addr string, o options) (string, error) {
	var brokers []string
	for _, a := range strings.Split(addr, ",") {
		brokers = append(brokers, fmt.Sprintf("%q", a))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `# written by killloop
kafka:
  brokers: [%s]
consumer:
  group: %s
  topics: [%s]
  session_timeout: %v
  heartbeat_interval: %v
  rebalance_timeout: %v
`, strings.Join(brokers, ", "), group, inputT, o.sessionTimeout, o.sessionTimeout/10, 3*o.sessionTimeout)
	if o.commitInterval != "" {
		fmt.Fprintf(&b, "  commit_interval: %s\n", o.commitInterval)
	}
	fmt.Fprintf(&b, `pipeline:
  - stage: produce
    topic: %s
dead_letter:
  policy: stop
http:
  address: off
shutdown_timeout: 20s
`, outputT)
	path := filepath.Join(dir, "killloop.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// print writes the figures as a Markdown table, with the command line.
func (r *result) print(w io.Writer, o options, args []string) {
	perKill := float64(r.dups) / float64(len(r.perKill))
	sorted := slices.Sorted(slices.Values(r.perKill))
	median := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		median = (sorted[len(sorted)/2-1] + median) / 2
	}
	ci := o.commitInterval
	if ci == "" {
		ci = "the default"
	}
	fmt.Fprintf(w, "| figure | value |\n|---|---|\n")
	row := func(name string, format string, a ...any) {
		fmt.Fprintf(w, "| %s | %s |\n", name, fmt.Sprintf(format, a...))
	}
	row("records produced to `in`", "%d", r.produced)
	row("records in `out`", "%d", r.outRecord)
	row("unique ids in `out`", "%d", r.unique)
	row("missing ids", "%d", r.missing)
	row("duplicates (`out` records − unique ids)", "%d", r.dups)
	row("kills (SIGKILL)", "%d", len(r.perKill))
	row("duplicates per kill (mean)", "%.0f", perKill)
	row("duplicates of one kill, attributed (median / max)", "%d / %d", median, sorted[len(sorted)-1])
	row("duplicates seen before the first kill / after SIGTERM", "%d / %d", r.before, r.after)
	fmt.Fprintf(w, "\nper kill: %v\n", r.perKill)
	fmt.Fprintf(w, "command: %s\n", commandLine(args))
	fmt.Fprintf(w, "settings: %d records/s, %d partitions, %d kills every %v ±20%%, commit_interval %s, session_timeout %v, seed %d\n",
		o.rate, o.partitions, o.kills, o.interval, ci, o.sessionTimeout, o.seed)
	fmt.Fprintf(w, "processor: %s\n", r.processor)
	for _, p := range r.problems {
		fmt.Fprintf(w, "WARNING: %s\n", p)
	}
}

// commandLine is how this program was started: "go run ./bench/cmd/killloop"
// when go run built it.
func commandLine(args []string) string {
	name := os.Args[0]
	if strings.Contains(name, "go-build") {
		name = "go run ./bench/cmd/killloop"
	}
	q := []string{name}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " '\"$\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q = append(q, a)
	}
	return strings.Join(q, " ")
}
