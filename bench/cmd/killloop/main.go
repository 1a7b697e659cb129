//go:build unix

// Command killloop measures what restarts cost the processor: records
// repeated (duplicates), records lost (must be none), and, for graceful
// restarts, partitions stopped and the time partitions were not
// processed.
//
// It starts a broker (the processor's embedded one, or Apache Kafka with
// one or three nodes: -kafka), an independent producer writing unique ids
// to topic "in" at a fixed rate, and -instances instances in one group
// whose only stage copies "in" to "out". Then, by -mode:
//
//   - kill: every interval (±20%, from -seed) it SIGKILLs one instance,
//     in turn, and restarts it at once;
//   - rolling: it restarts every instance in turn, gracefully (SIGTERM,
//     wait for the exit, start again), -interval apart, as a deploy does;
//   - zombie: every interval it pauses one instance, in turn, with
//     SIGSTOP for -pause (longer than the session timeout: the group
//     removes it and its partitions move to the others, which process
//     their records again), then wakes it with SIGCONT. The instance
//     wakes believing it still owns them, in the middle of a transaction
//     (exactly_once) that holds outputs of records another member now
//     owns. It must not commit them: either its member sees on waking
//     that its session ended (partitions lost: the transaction aborts),
//     or its offset commit, which carries a generation that ended, is
//     refused by the group coordinator (KIP-447) and the transaction
//     aborts. The report says, per pause, how many members the group had
//     when it woke and what the instance's log says it did after waking:
//     whether it saw its partitions lost, the commits refused, the
//     partitions it rewound with reason transaction_aborted, and why. At
//     least once, the same pause shows the duplicates a zombie causes.
//
// With -kill-broker (Apache Kafka, 3 nodes) it also SIGKILLs one node
// once, halfway through the restarts: the transaction coordinator of the
// first instance (exactly_once) or the leader of partition 0 of "out",
// keeps it down for -interval while records flow, and restarts it.
//
// After the last restart it stops the producer, waits for the group to
// commit everything, stops the instances with SIGTERM, reads all of "out"
// with a client of its own (no group) and reports records produced,
// unique ids, missing ids (a lost record: exit status 1), duplicates (at
// exactly_once, any is a failure too: exit status 1), duplicates per
// restart, and for rolling restarts the partitions the instances that
// were not restarting gave up, and how long each input partition went
// without a record processed.
//
// With -state the instances run internal/testprocessor, whose stage
// "count" counts the records of each key in a store (then "produce"
// copies them to "out", each value followed by its key's new count); the
// producer spreads its ids over -keys keys (id mod keys). Each instance
// slot has a state dir of its own, which a restarted instance finds as
// its predecessor left it ("the same disk"), or emptied with -wipe-state
// (its stores restore all of their changelog, and without a
// group_instance_id its transactional id is new: the killed instance's
// open transaction stays until the broker aborts it); -state-store memory
// keeps nothing. The verdict folds the changelog
// "killloop-counts-changelog", read_committed at exactly_once (the
// latest value per key), and compares each key's count with the records
// produced with that key: at exactly_once every key must be exact and
// the outputs must carry each key's counts 1..N once each; at
// at_least_once no key may be counted short (over-counts are reported).
// Either failure exits 1 and keeps the temp dir, with the changelog and
// the outputs as read. The report gives the records restored (from the
// instances' "state: restored" log lines): in all, per restart (every
// instance, until the next restart) and by each restarted instance.
//
//	go run ./bench/cmd/killloop -state -instances 3 -partitions 8 -kills 4 -kill-broker -guarantee exactly_once
//
// With -window the instances run the built-in stages (./cmd/processor):
// json, then aggregate counting records per user in tumbling windows of
// event time (the record timestamp; -window-size, -window-grace), emitted
// when each window closes, then produce to "out". The producer writes
// {"id":42,"user":"u-00042"} (users: id mod -keys) keyed by the id, so
// the aggregate's key: json.user re-keys the records through the
// repartition topic killloop-by-windows-repartition; each instance slot
// has a state dir, as with -state. The outputs are per window, not per
// id, so the loop does not follow "out": after the last kill it waits
// until the group committed the end of "in" and of the repartition topic
// (which, written in transactions, it reaches only once they all ended),
// stops the instances, and reads "in", the repartition topic and "out" to
// their ends (read_committed at exactly_once, once every transaction
// ended). The repartition topic must hold every input record (exactly
// once at exactly_once), with its input's timestamp, keyed by its user,
// and each user on one partition. Replaying it in offset order per partition with
// the aggregate's rule (stream time = the highest event time seen on the
// partition; a window [s, s+size) closes once stream time reaches
// s+size+grace; a record whose window closed is late and dropped) gives
// the windows that must have been emitted, with their count, sum of ids,
// first and last id. At exactly_once each must be in "out" exactly once
// with those fields, and nothing else; at at_least_once each at least
// once, never with a count below the replay's (copies and over-counts
// are reported). Either failure exits 1 and keeps the temp dir, with the
// topics as read and the windows expected.
//
//	go run ./bench/cmd/killloop -window -instances 3 -partitions 6 -kills 4 -guarantee exactly_once
//
// A known embedded-broker (kfake) fault can fail the exactly-once loops
// there: a read_committed Fetch whose response reaches its MaxBytes
// carries no aborted transactions for the partition it was filling, so
// the records of an aborted transaction in it read as committed. Apache
// Kafka does not do this; the report's dumps show such records (those of
// a producer whose transaction never committed) counted.
//
// A duplicate is attributed to the restart (or pause) that preceded the
// moment the reader saw it; the reader follows "out" live, so that is the
// restart whose uncommitted records were processed again.
//
// With -guarantee exactly_once the reader reads "out" read_committed (what
// the guarantee promises is what such readers see), and the run ends once
// every transaction ended; it then reads "out" read uncommitted too, and
// reports the records of aborted transactions: outputs that a killed or
// fenced instance wrote and no read_committed reader saw. In kill and
// zombie modes the report gives the
// longest time records of one input partition did not reach the reader:
// at exactly_once, a killed dynamic instance's open transaction holds
// read_committed readers of its output partitions back until the broker
// aborts it at -transaction-timeout; a static one (-membership static) is
// fenced as soon as it is restarted.
//
//	go run ./bench/cmd/killloop -kills 20 -interval 3s -rate 2000
//	go run ./bench/cmd/killloop -mode rolling -kafka 3node -instances 3 -partitions 64 -membership static
//	go run ./bench/cmd/killloop -mode zombie -kills 3 -guarantee exactly_once
//	go run ./bench/cmd/killloop -kafka 3node -instances 3 -kills 4 -kill-broker -guarantee exactly_once
//
// -membership chooses how the instances are in the group: eager (assignor
// range), cooperative (cooperative-sticky, the default), static
// (cooperative-sticky and a group_instance_id per instance slot),
// consumer (Kafka 4's consumer protocol, KIP-848; -session-timeout is
// then the brokers' group.consumer.session.timeout.ms default, 45s), or
// franz (not the processor: a franz-go consumer with cooperative-sticky,
// copying at-least-once with marked commits, for comparison).
//
// In kill and zombie modes the group's session timeout is short
// (-session-timeout, 1s), so that the partitions of a killed or paused
// instance move within a second rather than after the default 30s, which
// would leave the group rebalancing through most of a 3s kill interval.
// In rolling mode it is 10s: a static instance must be back within it.
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

	"github.com/fencepost-dev/fencepost/bench/internal/childproc"
	"github.com/fencepost-dev/fencepost/internal/realkafka"
)

const (
	group   = "killloop"
	inputT  = "in"
	outputT = "out"
)

// The membership modes (-membership).
const (
	eager       = "eager"
	cooperative = "cooperative"
	static      = "static"
	consumer    = "consumer"
	franz       = "franz"
)

// options are the command-line flags.
type options struct {
	processor      string
	mode           string // kill, rolling or zombie
	kafka          string // embedded, 1node or 3node
	membership     string
	instances      int
	rate           int
	kills          int // kill and zombie modes: SIGKILLs or pauses
	interval       time.Duration
	pause          time.Duration // zombie mode: how long an instance stays stopped
	killBroker     bool          // SIGKILL one Apache Kafka node once, and restart it
	partitions     int
	commitInterval string
	concurrency    int    // consumer.concurrency (0: the default)
	guarantee      string // at_least_once or exactly_once
	txnTimeout     time.Duration
	sessionTimeout time.Duration
	settle         time.Duration
	seed           int64
	keep           bool
	verbose        bool
	// -state: the stage counts records per key in a store
	state      bool
	keys       int    // keys the producer spreads its records over
	wipeState  bool   // empty a restarted instance's state dir first
	stateStore string // state.store: disk or memory
	// -window: count per user in tumbling windows (the built-in
	// aggregate, re-keyed through a repartition topic)
	window                  bool
	windowSize, windowGrace time.Duration
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("killloop", flag.ContinueOnError)
	fs.StringVar(&o.processor, "processor", "", "processor binary `PATH` (default: go build ./cmd/processor into the temp dir)")
	fs.StringVar(&o.mode, "mode", "kill", "kill (SIGKILL an instance every interval), rolling (restart each instance in turn with SIGTERM) or zombie (SIGSTOP an instance past its session timeout, then SIGCONT)")
	fs.StringVar(&o.kafka, "kafka", "embedded", "the broker: embedded (processor broker), or Apache Kafka with 1node or 3node (needs Java and Maven)")
	fs.StringVar(&o.membership, "membership", cooperative, "eager, cooperative, static, consumer (KIP-848), or franz (a franz-go consumer instead of the processor)")
	fs.IntVar(&o.instances, "instances", 2, "instances in the group")
	fs.IntVar(&o.rate, "rate", 2000, "records per second produced to \"in\"")
	fs.IntVar(&o.kills, "kills", 20, "kill mode: SIGKILLs, one instance after the other; zombie mode: pauses")
	fs.DurationVar(&o.pause, "pause", 0, "zombie mode: how long an instance stays stopped (default 3 session timeouts; more than -session-timeout; longer than -transaction-timeout, the broker aborts its transaction meanwhile)")
	fs.BoolVar(&o.killBroker, "kill-broker", false, "SIGKILL a broker once, halfway through, and restart it: with -kafka 3node one node; with -kafka embedded the whole 3-node embedded broker process (its data on disk; it aborts the transactions open at the crash, as Apache Kafka does to one that outlives its timeout)")
	fs.DurationVar(&o.interval, "interval", 3*time.Second, "mean time between restarts (kills are jittered by ±20%)")
	fs.IntVar(&o.partitions, "partitions", 4, "partitions of \"in\" and \"out\"")
	fs.StringVar(&o.guarantee, "guarantee", "at_least_once", "the processor's guarantee: at_least_once or exactly_once (then `out` is read read_committed)")
	fs.DurationVar(&o.txnTimeout, "transaction-timeout", 10*time.Second, "transaction_timeout (exactly_once): how long a killed instance's open transaction holds read_committed readers back")
	fs.StringVar(&o.commitInterval, "commit-interval", "", "consumer.commit_interval in the config (empty: leave the key out, the default applies)")
	fs.IntVar(&o.concurrency, "concurrency", 0, "consumer.concurrency in the config (0: leave the key out, the default applies)")
	fs.DurationVar(&o.sessionTimeout, "session-timeout", 0, "consumer.session_timeout (heartbeat_interval is a tenth, rebalance_timeout three times; default 1s to kill, 10s to roll, 45s (the brokers' default) with -membership consumer)")
	fs.DurationVar(&o.settle, "settle", time.Minute, "after the last restart, how long the group may take to commit everything")
	fs.Int64Var(&o.seed, "seed", 0, "seed of the kill jitter (0: from the clock; the report prints it)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temp dir (config, logs); it is always kept on failure")
	fs.BoolVar(&o.verbose, "v", false, "report each restart on stderr")
	fs.BoolVar(&o.state, "state", false, "count records per key in a store (internal/testprocessor's stage \"count\", then \"produce\"; each instance slot has its own state dir) and check the counts: the changelog, read_committed and folded, against the records produced per key")
	fs.IntVar(&o.keys, "keys", 64, "-state, -window: the keys (users) the producer spreads its records over (id mod keys)")
	fs.BoolVar(&o.wipeState, "wipe-state", false, "-state, -window: empty a killed or restarted instance's state dir before starting it again (its stores restore everything), instead of keeping it (they restore the tail)")
	fs.StringVar(&o.stateStore, "state-store", "disk", "-state, -window: state.store, disk or memory (every assignment restores everything)")
	fs.BoolVar(&o.window, "window", false, "count records per user in tumbling windows emitted on close (the built-in json, aggregate with key: json.user, produce; the records are keyed by id, so they go through a repartition topic) and check every window emitted against a replay of the repartition topic")
	fs.DurationVar(&o.windowSize, "window-size", time.Second, "-window: the windows' size")
	fs.DurationVar(&o.windowGrace, "window-grace", 500*time.Millisecond, "-window: the windows' grace (how late in event time a record may still count)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.sessionTimeout == 0 {
		o.sessionTimeout = time.Second
		switch {
		case o.membership == consumer:
			// the brokers' group.consumer.session.timeout.ms default:
			// the consumer protocol's coordinator sets it, and the
			// member must not declare itself lost before
			o.sessionTimeout = 45 * time.Second
		case o.mode == "rolling":
			o.sessionTimeout = 10 * time.Second
		}
	}
	if o.pause == 0 {
		o.pause = 3 * o.sessionTimeout
	}
	switch {
	case o.mode != "kill" && o.mode != "rolling" && o.mode != "zombie":
		return o, fmt.Errorf("-mode %q: want kill, rolling or zombie", o.mode)
	case o.kafka != "embedded" && o.kafka != "1node" && o.kafka != "3node":
		return o, fmt.Errorf("-kafka %q: want embedded, 1node or 3node", o.kafka)
	case !slices.Contains([]string{eager, cooperative, static, consumer, franz}, o.membership):
		return o, fmt.Errorf("-membership %q: want eager, cooperative, static, consumer or franz", o.membership)
	case o.instances < 1 || o.instances > 16:
		return o, errors.New("-instances must be between 1 and 16")
	}
	if o.rate < 1 || o.kills < 1 || o.interval <= 0 || o.partitions < 1 || o.sessionTimeout < 100*time.Millisecond || o.settle <= 0 {
		return o, errors.New("-rate, -kills, -partitions must be positive; -interval and -settle too; -session-timeout at least 100ms")
	}
	if o.guarantee != "at_least_once" && o.guarantee != "exactly_once" {
		return o, fmt.Errorf("-guarantee %q: want at_least_once or exactly_once", o.guarantee)
	}
	if o.guarantee == "exactly_once" && o.membership == franz {
		return o, errors.New("-guarantee exactly_once: the franz comparison consumer is at-least-once only")
	}
	if o.mode == "zombie" {
		if o.pause <= o.sessionTimeout {
			return o, fmt.Errorf("-pause %v: a pause must outlast -session-timeout (%v), or the group keeps the paused instance and nothing moves", o.pause, o.sessionTimeout)
		}
		// (exactly_once with a pause longer than -transaction-timeout:
		// the broker aborts the paused instance's transaction and bumps
		// its epoch before it wakes; it must find out, abort and rewind,
		// and lose nothing)
	}
	if o.killBroker && o.kafka == "1node" {
		return o, errors.New("-kill-broker needs -kafka 3node or embedded (with 1node there is no other node to take over)")
	}
	if o.killBroker && o.kafka == "embedded" && o.membership == franz {
		return o, errors.New("-kill-broker with -kafka embedded: the franz comparison is measured on Apache Kafka")
	}
	if o.killBroker && o.mode == "rolling" {
		return o, errors.New("-kill-broker: use it with -mode kill or zombie")
	}
	if o.window {
		switch {
		case o.state:
			return o, errors.New("-window and -state are two loops: choose one")
		case o.mode != "kill":
			return o, errors.New("-window: use it with -mode kill")
		case o.windowSize < time.Millisecond || o.windowSize%time.Millisecond != 0:
			return o, fmt.Errorf("-window-size %v: want a whole number of milliseconds, at least 1ms", o.windowSize)
		case o.windowGrace < 0 || o.windowGrace%time.Millisecond != 0:
			return o, fmt.Errorf("-window-grace %v: want 0 or a whole number of milliseconds", o.windowGrace)
		}
	}
	if o.state || o.window {
		switch {
		case o.membership == franz:
			return o, errors.New("-state, -window: the franz comparison consumer has no stores")
		case o.keys < 1 || o.keys > 100000:
			return o, errors.New("-keys must be between 1 and 100000")
		case o.stateStore != "disk" && o.stateStore != "memory":
			return o, fmt.Errorf("-state-store %q: want disk or memory", o.stateStore)
		case o.wipeState && o.mode == "zombie":
			return o, errors.New("-wipe-state: a zombie is not restarted; use it with -mode kill or rolling")
		}
	} else if o.wipeState {
		return o, errors.New("-wipe-state needs -state or -window")
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

func main() {
	if len(os.Args) > 1 && os.Args[1] == franzWorkerCommand {
		os.Exit(franzWorker(os.Args[2:], os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

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
	var procs childproc.Children
	defer procs.KillAll() // runs before the removal above

	m := &measurement{o: o, dir: dir, procs: &procs, stderr: stderr, stopCluster: func() {}}
	defer func() { m.stopCluster() }() // Apache Kafka, if run started it
	res, err := m.run(ctx)
	if err != nil {
		keep = true
		fmt.Fprintf(stderr, "killloop: FAILED: %v\nlogs:\n%s", err, procs.Logs())
		return 1
	}
	res.print(stdout, o, args)
	if res.missing > 0 || res.unknown > 0 {
		keep = true
		fmt.Fprintf(stderr, "\nkillloop: RECORDS MISSING: %d of %d ids produced to %q never reached %q (first: %v); %d records in %q are not ids\nlogs:\n%s",
			res.missing, res.produced, inputT, outputT, res.firstMissing, res.unknown, outputT, procs.Logs())
		return 1
	}
	if o.guarantee == "exactly_once" && res.dups > 0 {
		keep = true
		fmt.Fprintf(stderr, "\nkillloop: DUPLICATES AT EXACTLY_ONCE: %d records in %q (read read_committed) repeat an id (%s)\nlogs:\n%s",
			res.dups, outputT, strings.Join(res.firstDups, "; "), procs.Logs())
		return 1
	}
	if wr := res.windows; wr != nil && wr.wrong(o.guarantee) {
		keep = true
		what := "WINDOWS UNDER-COUNTED OR MISSING"
		if o.guarantee == "exactly_once" {
			what = "WINDOWS WRONG AT EXACTLY_ONCE"
		}
		j, rp := wr.judged, wr.rep
		fmt.Fprintf(stderr, "\nkillloop: %s: of %d windows expected %d exact, %d missing, %d repeated, %d under-counted, %d over-counted, %d of other records, %d not expected; "+
			"repartition topic: %d input records missing, %d ids too often, %d timestamps differ, %d users split; %d/%d/%d records not the loop's (%s)\nlogs:\n%s",
			what, j.expected, j.exact, j.missing, j.repeated, j.under, j.over, j.otherRecords, j.unexpected,
			rp.missing, rp.repeated, rp.timeDiffers, rp.splitUsers, wr.inStray, wr.repStray, wr.outStray,
			strings.Join(append(slices.Clone(j.firstWrong), rp.first...), "; "), procs.Logs())
		return 1
	}
	if s := res.state; s != nil && s.wrong(o.guarantee) {
		keep = true
		what := "STATE UNDER-COUNTED"
		if o.guarantee == "exactly_once" {
			what = "STATE WRONG AT EXACTLY_ONCE"
		}
		fmt.Fprintf(stderr, "\nkillloop: %s: %d keys under-counted (%d records), %d over-counted (%d), %d with wrong output counts, %d stray (%s)\nlogs:\n%s",
			what, s.under, s.lost, s.over, s.extra, s.badOutputs, len(s.stray), strings.Join(append(slices.Clone(s.firstWrong), s.firstBadOutputs...), "; "), procs.Logs())
		return 1
	}
	return 0
}

// measurement is one run of the loop.
type measurement struct {
	o           options
	dir         string
	procs       *childproc.Children
	stderr      io.Writer
	bin         string
	addrs       []string
	stopCluster func()
	cluster     *realkafka.Cluster // Apache Kafka, if the run started it
	embedded    *embeddedBroker    // the embedded broker, if the run started it
	procLogs    []*procLog         // every instance process started, in order
	phase       atomic.Int64       // restarts so far (brokerPhase after a broker kill); restarts+1 once the instances are told to stop
}

// result holds the figures of a run.
type result struct {
	processor                      string // what was measured
	produced, inRecords, outRecord int64
	unique, missing, unknown, dups int64
	firstMissing                   []int64
	firstDups                      []string // the first duplicates, where each copy is
	perKill                        []int64  // duplicates attributed to each restart
	before, after                  int64    // duplicates seen before the first restart, after SIGTERM
	problems                       []string
	// rolling restarts
	revokedByOthers []int64         // per restart: partitions the other instances gave up
	stalls          []time.Duration // per input partition: time without a record processed
	longestStall    time.Duration
	// zombie mode: per pause
	zombies []*zombie
	// -kill-broker
	brokerKill *brokerKill
	brokerDups int64 // duplicates seen from the broker kill to the next restart
	// exactly_once: records in "out" of aborted transactions (read
	// uncommitted, not read committed)
	aborted int64
	// when each restart (or pause) began, and the index in procLogs of
	// the process it started (-1: none, a pause)
	restartAt   []time.Time
	restartProc []int
	state       *stateResult  // -state
	windows     *windowResult // -window
	baseWindow  window        // the interval before the first restart
	baseline    []windowStall // per input partition, in baseWindow
	restarts    []restartRecord
}

func (m *measurement) logf(format string, args ...any) {
	if m.o.verbose {
		fmt.Fprintf(m.stderr, "killloop: "+format+"\n", args...)
	}
}

// restarts is how many restarts the run makes.
func (m *measurement) restarts() int {
	if m.o.mode == "rolling" {
		return m.o.instances
	}
	return m.o.kills
}

func (m *measurement) run(ctx context.Context) (*result, error) {
	o := m.o
	res := &result{processor: o.processor}
	if o.membership == franz {
		res.processor = "franz-go kgo consumer (cooperative-sticky), this program's " + franzWorkerCommand
		var err error
		if m.bin, err = os.Executable(); err != nil {
			return nil, err
		}
	} else if m.bin = o.processor; m.bin == "" {
		var err error
		pkg := "./cmd/processor"
		if o.state {
			pkg = "./internal/testprocessor" // the processor with the stage "count"
		}
		if m.bin, res.processor, err = buildProcessor(ctx, m.dir, pkg); err != nil {
			return nil, err
		}
	}
	if err := m.startCluster(ctx); err != nil {
		return nil, err
	}
	m.logf("broker at %v; temp dir %s", m.addrs, m.dir)
	seeds := kgo.SeedBrokers(m.addrs...)
	cl, err := kgo.NewClient(seeds)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if o.kafka != "embedded" {
		if err := createTopics(ctx, adm, o.partitions, min(3, nodes(o.kafka))); err != nil {
			return nil, err
		}
	}

	// The reader follows "out" from the start for the whole run (with
	// -window the outputs are windows, read at the end).
	t := newTally(&m.phase)
	if o.state {
		t.keyed = newKeyTally(o.keys)
	}
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	readDone := make(chan error, 1)
	if !o.window {
		readOpts := []kgo.Opt{seeds, kgo.ConsumeTopics(outputT), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
		if o.guarantee == "exactly_once" {
			// what exactly-once promises is what read_committed readers see
			readOpts = append(readOpts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		}
		rcl, err := kgo.NewClient(readOpts...)
		if err != nil {
			return nil, err
		}
		defer rcl.Close()
		go func() { readDone <- t.read(readCtx, rcl) }()
	}

	prodCtx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	type produced struct {
		n   int64
		err error
	}
	prodDone := make(chan produced, 1)
	go func() {
		n, err := produceAtRate(prodCtx, cl, inputT, o.rate, inputRecord(o), t.producedTo)
		prodDone <- produced{n, err}
	}()

	// The instances; each restart starts the victim under a new log name.
	inst := make([]*instance, o.instances)
	for i := range inst {
		inst[i] = &instance{slot: i}
		if err := m.startInstance(inst[i]); err != nil {
			return nil, err
		}
	}
	samp := &sampler{}
	if o.mode == "rolling" {
		sampCtx, stopSampling := context.WithCancel(ctx)
		defer stopSampling()
		go samp.run(sampCtx, inst, 200*time.Millisecond)
		// a rolling restart starts from a settled group: every
		// partition processed, then one more interval (rebalances of
		// the start may still finish) before the baseline window, the
		// interval before the first restart
		if err := m.waitProcessing(ctx, t, inst, readDone); err != nil {
			return nil, err
		}
		if err := sleep(ctx, o.interval, readDone); err != nil {
			return nil, err
		}
	}
	rng := rand.New(rand.NewPCG(uint64(o.seed), 0))
	// pause waits d, failing if the run is cancelled or the reader stops.
	pause := func(d time.Duration) error { return sleep(ctx, d, readDone) }
	jittered := func() time.Duration {
		if o.mode == "rolling" {
			return o.interval
		}
		return time.Duration(float64(o.interval) * (0.8 + 0.4*rng.Float64()))
	}
	// a woken zombie's log is read up to the next pause, broker kill or
	// the end of production
	var awake *zombie
	closeWindow := func() {
		if awake != nil {
			awake.to = fileSize(awake.log)
			awake = nil
		}
	}
	brokerKillAfter := 0
	if o.killBroker {
		brokerKillAfter = (m.restarts() + 1) / 2
	}
	for k := 1; k <= m.restarts(); k++ {
		wait := jittered()
		if err := pause(wait); err != nil {
			return nil, err
		}
		for _, c := range inst {
			if !c.Running() {
				return nil, fmt.Errorf("%s exited on its own before restart %d (%v); see %s", c.Name, k, c.Err, c.Log)
			}
		}
		closeWindow()
		v := inst[(k-1)%len(inst)]
		before := m.revokedTotals(inst)
		rr := restartRecord{slot: v.slot, oldLog: v.Log, before: m.assignedNow(inst)}
		if k == 1 {
			res.baseWindow = window{from: time.Now().Add(-o.interval), to: time.Now()}
		}
		rr.term = time.Now()
		old := v.Child
		switch o.mode {
		case "zombie":
			m.phase.Store(int64(k))
			z, err := m.pauseInstance(ctx, adm, v)
			if err != nil {
				return nil, err
			}
			res.zombies = append(res.zombies, z)
			awake = z
			m.logf("pause %d/%d after %v: %s (pid %d) stopped for %v; the group had %s when it woke",
				k, m.restarts(), wait.Round(time.Millisecond), v.Name, v.Cmd.Process.Pid, o.pause, z.membersText())
		case "kill":
			if !old.Stop(syscall.SIGKILL, 10*time.Second) {
				return nil, fmt.Errorf("%s did not die within 10s of SIGKILL", old.Name)
			}
		default:
			if !old.Stop(syscall.SIGTERM, o.sessionTimeout+30*time.Second) {
				return nil, fmt.Errorf("%s did not exit within %v of SIGTERM", old.Name, o.sessionTimeout+30*time.Second)
			} else if code := old.ExitCode(); code != 0 {
				res.problems = append(res.problems, fmt.Sprintf("%s exited %d on SIGTERM (see %s)", old.Name, code, old.Log))
			}
		}
		res.restartAt = append(res.restartAt, rr.term)
		if o.mode == "zombie" {
			res.restartProc = append(res.restartProc, -1)
		} else {
			rr.exited = time.Now()
			m.phase.Store(int64(k))
			if o.wipeState {
				if err := os.RemoveAll(stateDir(m.dir, v.slot)); err != nil {
					return nil, fmt.Errorf("-wipe-state: %w", err)
				}
			}
			if err := m.startInstance(v); err != nil {
				return nil, err
			}
			res.restartProc = append(res.restartProc, len(m.procLogs)-1)
			rr.started, rr.newLog = time.Now(), v.Log
			m.logf("restart %d/%d after %v: %s (pid %d) replaced by %s (pid %d)",
				k, m.restarts(), wait.Round(time.Millisecond), old.Name, old.Cmd.Process.Pid, v.Name, v.Cmd.Process.Pid)
		}
		if o.mode == "rolling" {
			// let the rebalance it causes finish before counting
			if err := sleep(ctx, o.interval, readDone); err != nil {
				return nil, err
			}
			after := m.revokedTotals(inst)
			var n int64
			for i := range inst {
				if inst[i] != v && after[i] >= before[i] {
					n += after[i] - before[i]
				}
			}
			res.revokedByOthers = append(res.revokedByOthers, n)
			rr.revokedByOthers = n
			rr.after, rr.windowEnd = m.assignedNow(inst), time.Now()
			rr.changes = assignmentChanges(samp.between(rr.term, rr.windowEnd))
			for _, c := range rr.changes {
				if c.at.After(rr.started) && c.n[v.slot] > 0 {
					rr.firstPartitionsAtNewPID = c.at
					break
				}
			}
			rr.oldPhases = readLogTimes(rr.oldLog, oldPhaseMsgs, rr.term, rr.term.Add(-time.Second))
			rr.newPhases = readLogTimes(rr.newLog, newPhaseMsgs, rr.started, rr.started.Add(-time.Second))
			res.restarts = append(res.restarts, rr)
		}
		if k == brokerKillAfter {
			// after the records of restart k were processed again
			if err := pause(jittered()); err != nil {
				return nil, err
			}
			closeWindow()
			m.phase.Store(brokerPhase)
			bk, err := m.killBroker(ctx, adm, inst, pause)
			if err != nil {
				return nil, err
			}
			res.brokerKill = bk
		}
	}
	if awake != nil {
		// records flow on while the last zombie wakes up
		if err := pause(o.interval); err != nil {
			return nil, err
		}
	}
	closeWindow()

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
	m.phase.Store(int64(m.restarts()) + 1)
	for _, c := range inst {
		c.Signal(syscall.SIGTERM)
	}
	for _, c := range inst {
		if !c.Wait(o.sessionTimeout + 45*time.Second) {
			res.problems = append(res.problems, fmt.Sprintf("%s did not exit within %v of SIGTERM (see %s)", c.Name, o.sessionTimeout+45*time.Second, c.Log))
		} else if code := c.ExitCode(); code != 0 {
			res.problems = append(res.problems, fmt.Sprintf("%s exited %d on SIGTERM (see %s)", c.Name, code, c.Log))
		}
	}
	if o.window {
		if res.windows, err = m.windowVerdict(ctx, adm, res.produced); err != nil {
			return nil, err
		}
		if res.windows.judged.expected == 0 {
			res.problems = append(res.problems, "no window closed: the run shows nothing (run longer, or with shorter windows)")
		}
		if w := res.windows; w.inDuplicated > 0 || w.inAbsent > 0 {
			res.problems = append(res.problems, fmt.Sprintf("%q holds %d ids more than once and lacks %d of the %d produced: the input has duplicates or losses of its own (the verdict counts the records it holds)",
				inputT, w.inDuplicated, w.inAbsent, res.produced))
		}
		return res, nil
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
	atEnd := func() bool { return t.reached(ends) }
	if o.guarantee == "exactly_once" {
		// every transaction ended (committed, or aborted by a new
		// incarnation or the broker's timeout), then the reader quiet
		deadline = deadline.Add(o.txnTimeout)
		isStable := false
		atEnd = func() bool {
			if !isStable {
				var err error
				if isStable, err = stable(ctx, adm, outputT); err != nil {
					m.logf("%v", err)
				}
				return false
			}
			return t.quiet(2 * time.Second)
		}
	}
	for !atEnd() {
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
	if o.state {
		if res.state, err = m.stateVerdict(ctx, adm, t, res); err != nil {
			return nil, err
		}
	}
	if o.guarantee == "exactly_once" {
		// what read_committed readers never saw: aborted outputs
		all, err := countRecords(ctx, m.addrs, outputT, kgo.ReadUncommitted(), 2*time.Second)
		if err != nil {
			return nil, err
		}
		res.aborted = all - res.outRecord
	}
	for _, z := range res.zombies {
		if err := z.readLog(); err != nil {
			res.problems = append(res.problems, fmt.Sprintf("reading the log of %s: %v", z.name, err))
		}
	}
	return res, nil
}

// instance is one slot of the group: the process that fills it now.
type instance struct {
	slot   int
	starts int
	http   atomic.Pointer[string] // the metrics address of the process running now
	*childproc.Child
}

// httpAddr is the metrics address of the process running in the slot now.
func (in *instance) httpAddr() string {
	if a := in.http.Load(); a != nil {
		return *a
	}
	return ""
}

// startInstance starts (or restarts) the process of slot i.
func (m *measurement) startInstance(in *instance) error {
	in.starts++
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	in.http.Store(&addr)
	name := fmt.Sprintf("instance-%c%d", 'a'+in.slot, in.starts)
	var c *childproc.Child
	if m.o.membership == franz {
		c, err = m.procs.Start(m.dir, name, m.bin, franzWorkerCommand, "-brokers", strings.Join(m.addrs, ","),
			"-group", group, "-in", inputT, "-out", outputT, "-http", addr, "-session-timeout", m.o.sessionTimeout.String())
	} else {
		cfg, werr := writeConfig(m.dir, m.addrs, m.o, in.slot)
		if werr != nil {
			return werr
		}
		c, err = m.procs.Start(m.dir, name, m.bin, "run", "-c", cfg, "--http", addr, "--progress", "0")
	}
	in.Child = c
	if err == nil {
		m.procLogs = append(m.procLogs, &procLog{name: name, log: c.Log, started: time.Now()})
	}
	return err
}

// revokedTotals reads every instance's count of partitions revoked (its
// /metrics), -1 where it cannot.
func (m *measurement) revokedTotals(inst []*instance) []int64 {
	out := make([]int64, len(inst))
	for i, in := range inst {
		out[i] = scrapeCounter(in.httpAddr(), "fencepost_partitions_revoked_total")
	}
	return out
}

// assignedNow reads how many partitions every instance has now, -1 where
// it cannot.
func (m *measurement) assignedNow(inst []*instance) []int64 {
	out := make([]int64, len(inst))
	for i, in := range inst {
		out[i] = scrapeCounter(in.httpAddr(), assignedGauge)
	}
	return out
}

// sleep waits d, failing early if ctx ends or the reader stops.
func sleep(ctx context.Context, d time.Duration, readDone <-chan error) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-readDone:
		return fmt.Errorf("the reader of %q stopped: %v", outputT, err)
	case <-time.After(d):
		return nil
	}
}

// waitProcessing waits until every input partition has had records
// processed, so the group has settled.
func (m *measurement) waitProcessing(ctx context.Context, t *tally, inst []*instance, readDone <-chan error) error {
	deadline := time.Now().Add(m.o.settle)
	for !t.everyPartitionSeen(int32(m.o.partitions)) {
		if time.Now().After(deadline) {
			return fmt.Errorf("not every partition of %q was processed within %v of the start", inputT, m.o.settle)
		}
		for _, c := range inst {
			if !c.Running() {
				return fmt.Errorf("%s exited on its own at the start (%v); see %s", c.Name, c.Err, c.Log)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readDone:
			return fmt.Errorf("the reader of %q stopped: %v", outputT, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// waitCaughtUp waits until the group committed the end of "in" (and with
// -window of the repartition topic) on every partition, failing if an
// instance exits or -settle passes first. Committed offsets reach the
// end of a topic written in transactions only once its transactions all
// ended and the group read past their markers.
func (m *measurement) waitCaughtUp(ctx context.Context, adm *kadm.Client, inst []*instance) error {
	start := time.Now()
	var lag int64
	var lagging []string
	for time.Since(start) < m.o.settle {
		for _, c := range inst {
			if !c.Running() {
				return fmt.Errorf("%s exited on its own while catching up (%v); see %s", c.Name, c.Err, c.Log)
			}
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var (
			done = true
			l    int64
			lg   []string
			err  error
		)
		for _, topic := range m.consumed() {
			d, tl, tlg, terr := caughtUp(qctx, adm, group, topic)
			done, l, err = done && d, l+tl, errors.Join(err, terr)
			for _, s := range tlg {
				lg = append(lg, topic+"/"+s)
			}
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil && done {
			m.logf("the group committed everything %v after the last restart", time.Since(start).Round(10*time.Millisecond))
			return nil
		}
		if err == nil {
			lag, lagging = l, lg
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(lagging) > 10 {
		lagging = append(lagging[:10], fmt.Sprintf("... %d more", len(lagging)-10))
	}
	return fmt.Errorf("the group did not commit the end of %q within %v of the last restart (committed lag %d; topic/partition: committed/end %v; assignment now %s)",
		m.consumed(), m.o.settle, lag, lagging, formatAssignment(m.assignedNow(inst)))
}

// consumed are the topics the group consumes: "in", and with -window the
// repartition topic.
func (m *measurement) consumed() []string {
	if m.o.window {
		return []string{inputT, repartitionTopic()}
	}
	return []string{inputT}
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
	res.firstDups = t.dupsAt
	res.before = t.byPhase[0]
	res.after = t.byPhase[int64(m.restarts())+1]
	res.brokerDups = t.byPhase[brokerPhase]
	for k := 1; k <= m.restarts(); k++ {
		res.perKill = append(res.perKill, t.byPhase[int64(k)])
	}
	n, after := int32(m.o.partitions), stallAfter(m.o)
	res.stalls, res.longestStall = t.stallsLocked(n, after)
	if m.o.mode == "rolling" {
		res.baseline = t.windowStallsLocked(n, after, res.baseWindow)
		for i := range res.restarts {
			rr := &res.restarts[i]
			rr.stalls = t.windowStallsLocked(n, after, window{from: rr.term, to: rr.term.Add(m.o.interval)})
			rr.windowTotal, rr.windowP99, rr.longest, rr.pauseEnd = summarize(rr.stalls)
		}
	}
}

// stallAfter is the gap between two records processed of one input
// partition from which it counts as not processing: ten times the mean
// gap at the rate produced, at least a second. Below a second, gaps are
// the fetchers' and the reader's own cadence (long polls, batching),
// present in a group nobody restarts.
func stallAfter(o options) time.Duration {
	mean := time.Duration(float64(time.Second) * float64(o.partitions) / float64(o.rate))
	return max(10*mean, time.Second)
}

// buildProcessor builds pkg (./cmd/processor, or ./internal/testprocessor:
// the processor with test stages) of the module in the working directory
// into dir and says which commit it was built from.
func buildProcessor(ctx context.Context, dir, pkg string) (bin, desc string, err error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", "", errors.New("run killloop inside the fencepost module, or pass -processor")
	}
	root := filepath.Dir(mod)
	bin = filepath.Join(dir, "processor")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	desc = pkg + " of " + root
	if rev, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		desc += " at " + strings.TrimSpace(string(rev))
		if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			desc += " with uncommitted changes"
		}
	}
	return bin, desc, nil
}

// writeConfig writes the configuration of the processor in slot: one
// produce stage copying "in" to "out" (with -state, after the stage
// "count"; with -window, after json and aggregate; both with the slot's
// state dir), a stop policy for failures, the membership of
// -membership.
func writeConfig(dir string, addrs []string, o options, slot int) (string, error) {
	var brokers []string
	for _, a := range addrs {
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
	if o.concurrency > 0 {
		fmt.Fprintf(&b, "  concurrency: %d\n", o.concurrency)
	}
	switch o.membership {
	case eager:
		fmt.Fprintf(&b, "  assignor: range\n")
	case static:
		fmt.Fprintf(&b, "  group_instance_id: killloop-%c\n", 'a'+slot)
	case consumer:
		fmt.Fprintf(&b, "  group_protocol: consumer\n")
	}
	b.WriteString("pipeline:\n")
	if o.state {
		fmt.Fprintf(&b, "  - stage: count\n    store: %s\n", storeName)
	}
	if o.window {
		writeWindowPipeline(&b, o)
	}
	fmt.Fprintf(&b, `  - stage: produce
    topic: %s
dead_letter:
  policy: stop
shutdown_timeout: 20s
guarantee: %s
transaction_timeout: %v
`, outputT, o.guarantee, o.txnTimeout)
	if o.state || o.window {
		fmt.Fprintf(&b, "state:\n  dir: %q\n  store: %s\n", stateDir(dir, slot), o.stateStore)
	}
	path := filepath.Join(dir, fmt.Sprintf("killloop-%c.yaml", 'a'+slot))
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// print writes the figures as a Markdown table, with the command line.
func (r *result) print(w io.Writer, o options, args []string) {
	if r.windows != nil {
		r.printWindows(w, o, args)
		return
	}
	perKill := float64(r.dups) / float64(len(r.perKill))
	sorted := slices.Sorted(slices.Values(r.perKill))
	median := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		median = (sorted[len(sorted)/2-1] + median) / 2
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
	if o.guarantee == "exactly_once" {
		row("records of aborted transactions in `out` (read uncommitted, not committed)", "%d", r.aborted)
	}
	what := "kill"
	switch o.mode {
	case "rolling":
		what = "restart"
		row("restarts (SIGTERM, start again)", "%d", len(r.perKill))
	case "zombie":
		what = "pause"
		row(fmt.Sprintf("pauses (SIGSTOP for %v, then SIGCONT)", o.pause), "%d", len(r.perKill))
	default:
		row("kills (SIGKILL)", "%d", len(r.perKill))
	}
	if r.state != nil {
		r.state.print(row, o.guarantee, what)
	}
	row("duplicates per "+what+" (mean)", "%.0f", perKill)
	row("duplicates of one "+what+", attributed (median / max)", "%d / %d", median, sorted[len(sorted)-1])
	row("duplicates seen before the first "+what+" / after SIGTERM", "%d / %d", r.before, r.after)
	if o.mode == "zombie" {
		var aborted, rewound, refused, lost int
		var members []string
		for _, z := range r.zombies {
			if z.aborted() {
				aborted++
			}
			if z.lost {
				lost++
			}
			rewound += z.rewound
			refused += z.commitRefused
			members = append(members, fmt.Sprint(z.members))
		}
		row("group members when the paused instance woke (per pause)", "%s of %d", strings.Join(members, ", "), o.instances)
		row("pauses after which the woken instance reported its partitions lost", "%d of %d", lost, len(r.zombies))
		row("commits of a woken instance refused (all pauses)", "%d", refused)
		row("partitions a woken instance rewound, transaction aborted (all pauses)", "%d", rewound)
		row("pauses after which the woken instance aborted its transaction or had its commit refused", "%d of %d", aborted, len(r.zombies))
	}
	if bk := r.brokerKill; bk != nil {
		row("broker node killed (SIGKILL, once), down until it served again", "%s, %v", bk.name(), bk.down.Round(100*time.Millisecond))
		row("duplicates seen from the broker kill to the next "+what, "%d", r.brokerDups)
	}
	if o.mode != "rolling" {
		longest := "none"
		if r.longestStall > 0 {
			longest = r.longestStall.Round(10 * time.Millisecond).String()
		}
		row(fmt.Sprintf("longest time one input partition's records did not reach the reader (gaps over %v)", stallAfter(o)), "%s", longest)
	}
	if o.mode == "rolling" {
		var revoked int64
		for _, n := range r.revokedByOthers {
			revoked += n
		}
		row("partitions the instances not restarting gave up (all restarts)", "%d", revoked)
		stalls := slices.Sorted(slices.Values(r.stalls))
		var total time.Duration
		for _, d := range stalls {
			total += d
		}
		p99 := stalls[min(len(stalls)-1, len(stalls)*99/100)]
		row(fmt.Sprintf("time partitions were not processing (total over %d partitions; gaps over %v)", len(stalls), stallAfter(o)), "%v", total.Round(10*time.Millisecond))
		row("the same, p99 / max of one partition", "%v / %v", p99.Round(10*time.Millisecond), stalls[len(stalls)-1].Round(10*time.Millisecond))
		row("longest gap of one partition", "%v", r.longestStall.Round(10*time.Millisecond))
		fmt.Fprintf(w, "\npartitions given up by the others, per restart: %v\n", r.revokedByOthers)
		r.printRolling(w, o)
	}
	fmt.Fprintf(w, "\nper %s: %v\n", what, r.perKill)
	if r.state != nil {
		r.state.printLines(w, what)
	}
	if len(r.firstDups) > 0 {
		fmt.Fprintf(w, "first duplicates: %s\n", strings.Join(r.firstDups, "; "))
	}
	for i, z := range r.zombies {
		fmt.Fprintf(w, "pause %d: %s\n", i+1, z.summary())
	}
	r.printFooter(w, o, args, len(r.perKill), what)
}

// printFooter writes the lines that end a report: the broker kill, the
// command, the settings, the processor measured and the problems.
func (r *result) printFooter(w io.Writer, o options, args []string, restarts int, what string) {
	if bk := r.brokerKill; bk != nil {
		fmt.Fprintf(w, "broker kill: %s, %s\n", bk.name(), strings.Join(bk.roles, ", "))
	}
	ci := o.commitInterval
	if ci == "" {
		ci = "the default"
	}
	fmt.Fprintf(w, "command: %s\n", commandLine(args))
	fmt.Fprintf(w, "guarantee: %s\n", o.guarantee)
	fmt.Fprintf(w, "settings: %s, %s membership, %d instances on %s, %d records/s, %d partitions, %d %ss every %v, commit_interval %s, session_timeout %v, seed %d\n",
		o.mode, o.membership, o.instances, o.kafka, o.rate, o.partitions, restarts, what, o.interval, ci, o.sessionTimeout, o.seed)
	keep := "kept across restarts"
	switch {
	case o.stateStore == "memory":
		keep = "in memory"
	case o.wipeState:
		keep = "emptied at each restart"
	}
	if o.window {
		fmt.Fprintf(w, "windows: count per user (%d users) in tumbling windows of %v, grace %v, emitted on close; store %s, each slot's state dir %s\n",
			o.keys, o.windowSize, o.windowGrace, o.stateStore, keep)
	}
	if o.state {
		fmt.Fprintf(w, "state: stage count, %d keys, store %s, each slot's state dir %s\n", o.keys, o.stateStore, keep)
	}
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
