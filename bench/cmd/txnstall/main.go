//go:build linux

// Command txnstall measures how long a crashed exactly_once instance holds
// read_committed readers back: the time from a SIGKILL of the instance
// until the last stable offset (LSO) of every output partition passes the
// end the partition had at the kill, that is until the open transaction
// the killed instance left is aborted and a read_committed reader sees
// the partition's later records.
//
// It starts a broker (the processor's embedded one, or uses -brokers, for
// example Apache Kafka from `go run ./internal/realkafka/cmd/realkafka
// -nodes 1`), a producer writing to topic "in" at -rate, and one processor
// instance copying "in" to "out" with guarantee exactly_once. Then, -kills
// times: it waits until the instance writes, SIGKILLs it, reads every
// partition's high watermark of "out" at once, restarts the instance (the
// same configuration: with -static the same group_instance_id, whose
// InitProducerID aborts the killed instance's transaction; without it a
// new transactional id, so the transaction lasts until the broker aborts
// it at -transaction-timeout) and polls the LSO every 10ms until it
// reaches those high watermarks.
//
//	go run ./bench/cmd/txnstall -kills 3 -transaction-timeout 10s
//	go run ./bench/cmd/txnstall -kills 3 -transaction-timeout 10s -static
//	go run ./internal/realkafka/cmd/realkafka -nodes 1   # prints "bootstrap: host:port"
//	go run ./bench/cmd/txnstall -brokers host:port -kills 2 -static
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/bench/internal/childproc"
)

// The topics and the group; with -brokers they get a suffix per run.
var (
	inputT  = "in"
	outputT = "out"
	group   = "txnstall"
)

type options struct {
	processor  string
	brokers    string
	static     bool
	txnTimeout time.Duration
	kills      int
	partitions int
	rate       int
	session    time.Duration
	keep       bool
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("txnstall", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.processor, "processor", "", "processor binary `PATH` (default: go build ./cmd/processor into the temp dir)")
	fs.StringVar(&o.brokers, "brokers", "", "bootstrap `host:port` of a running cluster (default: start the embedded broker)")
	fs.BoolVar(&o.static, "static", false, "give the instance a group_instance_id (its restart fences the killed instance's transaction)")
	fs.DurationVar(&o.txnTimeout, "transaction-timeout", 10*time.Second, "the instance's transaction_timeout")
	fs.IntVar(&o.kills, "kills", 3, "SIGKILLs to measure")
	fs.IntVar(&o.partitions, "partitions", 4, "partitions of \"in\" and \"out\"")
	fs.IntVar(&o.rate, "rate", 1000, "records per second produced to \"in\"")
	fs.DurationVar(&o.session, "session-timeout", 6*time.Second, "consumer.session_timeout")
	fs.BoolVar(&o.keep, "keep", false, "keep the temp dir (configs, logs)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.kills < 1 || o.partitions < 1 || o.rate < 1 || o.txnTimeout < time.Second {
		fmt.Fprintln(stderr, "txnstall: -kills, -partitions and -rate must be positive, -transaction-timeout at least 1s")
		return 2
	}
	dir, err := os.MkdirTemp("", "txnstall-")
	if err != nil {
		fmt.Fprintln(stderr, "txnstall:", err)
		return 1
	}
	m := &measurement{o: o, dir: dir, log: stderr}
	stalls, err := m.run(context.Background())
	m.procs.KillAll()
	if err != nil {
		fmt.Fprintf(stderr, "txnstall: %v\nlogs and configs are in %s\n", err, dir)
		return 1
	}
	if !o.keep {
		_ = os.RemoveAll(dir)
	}
	m.print(stdout, stalls, args)
	return 0
}

type measurement struct {
	o     options
	dir   string
	log   io.Writer
	bin   string
	addrs []string
	procs childproc.Children
}

func (m *measurement) logf(format string, args ...any) {
	fmt.Fprintf(m.log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// stall is one kill's figure.
type stall struct {
	d        time.Duration // from the SIGKILL until the LSO passed every open transaction
	blocked  int           // partitions whose LSO was below their high watermark at the kill
	timedOut bool
}

func (m *measurement) run(ctx context.Context) ([]stall, error) {
	m.bin = m.o.processor
	if m.bin == "" {
		var err error
		if m.bin, err = buildProcessor(ctx, m.dir); err != nil {
			return nil, err
		}
	}
	if m.o.brokers == "" {
		broker, err := m.procs.Start(m.dir, "broker", m.bin, "broker", "--port", "0",
			"--topics", inputT+","+outputT, "--partitions", fmt.Sprint(m.o.partitions))
		if err != nil {
			return nil, err
		}
		addr, err := childproc.WaitBootstrap(ctx, broker, 30*time.Second)
		if err != nil {
			return nil, err
		}
		m.addrs = strings.Split(addr, ",")
	} else {
		m.addrs = strings.Split(m.o.brokers, ",")
		suffix := fmt.Sprintf("-%d", time.Now().Unix())
		inputT, outputT, group = inputT+suffix, outputT+suffix, group+suffix
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.addrs...), kgo.DefaultProduceTopic(inputT), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if m.o.brokers != "" {
		if err := m.createTopics(ctx, adm); err != nil {
			return nil, err
		}
	}
	pctx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	go produce(pctx, cl, m.o.rate)

	cfg, err := m.writeConfig()
	if err != nil {
		return nil, err
	}
	inst, err := m.procs.Start(m.dir, "instance-1", m.bin, "run", "-c", cfg, "--http", "off", "--progress", "0")
	if err != nil {
		return nil, err
	}
	var stalls []stall
	for k := 0; len(stalls) < m.o.kills; k++ {
		if k >= 3*m.o.kills {
			return nil, fmt.Errorf("%d of %d kills found no open transaction on %q: raise -rate", k-len(stalls), k, outputT)
		}
		if err := m.waitWriting(ctx, adm, inst); err != nil {
			return nil, err
		}
		time.Sleep(time.Second) // writing steadily, a transaction open
		inst.Stop(syscall.SIGKILL, 10*time.Second)
		killed := time.Now()
		hw, err := adm.ListEndOffsets(ctx, outputT)
		if err == nil {
			err = hw.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("reading the high watermarks of %q: %w", outputT, err)
		}
		// restart at once, as a supervisor would
		if inst, err = m.procs.Start(m.dir, fmt.Sprintf("instance-%d", k+2), m.bin, "run", "-c", cfg, "--http", "off", "--progress", "0"); err != nil {
			return nil, err
		}
		s, err := m.waitStable(ctx, adm, hw, killed)
		if err != nil {
			return nil, err
		}
		if s.blocked == 0 {
			m.logf("kill %d: no partition had an open transaction at the kill; not counted", k+1)
			continue
		}
		m.logf("kill %d: read_committed readers stalled %v (%d partitions behind an open transaction)", k+1, s.d.Round(time.Millisecond), s.blocked)
		stalls = append(stalls, s)
	}
	return stalls, nil
}

// waitWriting waits until the LSO of "out" advances: the instance commits
// transactions.
func (m *measurement) waitWriting(ctx context.Context, adm *kadm.Client, inst *childproc.Child) error {
	first := int64(-1)
	deadline := time.Now().Add(2*m.o.session + time.Minute)
	for time.Now().Before(deadline) {
		if !inst.Running() {
			return fmt.Errorf("the instance exited (%v): see %s", inst.Err, inst.Log)
		}
		lso, err := adm.ListCommittedOffsets(ctx, outputT)
		if err == nil && lso.Error() == nil {
			var sum int64
			lso.Each(func(o kadm.ListedOffset) { sum += o.Offset })
			if first < 0 {
				first = sum
			} else if sum > first {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the instance committed nothing to %q in %v: see %s", outputT, time.Until(deadline), inst.Log)
}

// waitStable polls the LSO until every partition's reaches its high
// watermark at the kill.
func (m *measurement) waitStable(ctx context.Context, adm *kadm.Client, hw kadm.ListedOffsets, killed time.Time) (stall, error) {
	var s stall
	first := true
	limit := 3*m.o.txnTimeout + time.Minute
	for {
		lso, err := adm.ListCommittedOffsets(ctx, outputT)
		if err == nil {
			err = lso.Error()
		}
		if err != nil {
			return s, fmt.Errorf("reading the last stable offsets of %q: %w", outputT, err)
		}
		behind := 0
		hw.Each(func(h kadm.ListedOffset) {
			if l, ok := lso.Lookup(h.Topic, h.Partition); ok && l.Offset < h.Offset {
				behind++
			}
		})
		if first {
			s.blocked, first = behind, false
		}
		if behind == 0 {
			s.d = time.Since(killed)
			return s, nil
		}
		if time.Since(killed) > limit {
			s.d, s.timedOut = time.Since(killed), true
			return s, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// produce writes numbered records to "in" at rate per second until ctx
// ends.
func produce(ctx context.Context, cl *kgo.Client, rate int) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	per := max(rate/100, 1)
	for i := 0; ctx.Err() == nil; {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range per {
			cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}, nil)
			i++
		}
	}
}

func (m *measurement) createTopics(ctx context.Context, adm *kadm.Client) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(cctx, int32(m.o.partitions), 1, nil, inputT, outputT)
	if err == nil {
		for _, r := range resp {
			if r.Err != nil && !strings.Contains(r.Err.Error(), "TOPIC_ALREADY_EXISTS") {
				err = r.Err
			}
		}
	}
	if err != nil {
		return fmt.Errorf("creating %q and %q: %w", inputT, outputT, err)
	}
	return nil
}

func (m *measurement) writeConfig() (string, error) {
	var brokers []string
	for _, a := range m.addrs {
		brokers = append(brokers, fmt.Sprintf("%q", a))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `# written by txnstall
kafka:
  brokers: [%s]
consumer:
  group: %s
  topics: [%s]
  session_timeout: %v
  heartbeat_interval: %v
`, strings.Join(brokers, ", "), group, inputT, m.o.session, m.o.session/10)
	if m.o.static {
		fmt.Fprintf(&b, "  group_instance_id: txnstall-0\n")
	}
	fmt.Fprintf(&b, `pipeline:
  - stage: produce
    topic: %s
guarantee: exactly_once
transaction_timeout: %v
`, outputT, m.o.txnTimeout)
	path := filepath.Join(m.dir, "txnstall.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

func (m *measurement) print(w io.Writer, stalls []stall, args []string) {
	broker := "embedded (processor broker)"
	if m.o.brokers != "" {
		broker = "-brokers " + m.o.brokers
	}
	member := "dynamic (no group_instance_id)"
	if m.o.static {
		member = "static (group_instance_id)"
	}
	ds := make([]time.Duration, 0, len(stalls))
	timedOut := 0
	for _, s := range stalls {
		ds = append(ds, s.d)
		if s.timedOut {
			timedOut++
		}
	}
	slices.Sort(ds)
	fmt.Fprintf(w, "txnstall %s\n\n", strings.Join(args, " "))
	fmt.Fprintf(w, "(kills that found no open transaction on %q are not counted)\n\n", outputT)
	fmt.Fprintf(w, "| broker | membership | transaction_timeout | kills | stall min | median | max |\n|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(w, "| %s | %s | %v | %d | %v | %v | %v |\n", broker, member, m.o.txnTimeout, len(ds),
		ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	if timedOut > 0 {
		fmt.Fprintf(w, "\n%d kills: the LSO had not passed the open transaction after 3 transaction timeouts and a minute\n", timedOut)
	}
}

// buildProcessor builds ./cmd/processor of the module in the working
// directory into dir.
func buildProcessor(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", errors.New("run txnstall inside the fencepost module, or pass -processor")
	}
	bin := filepath.Join(dir, "processor")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/processor")
	build.Dir = filepath.Dir(mod)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/processor: %v\n%s", err, out)
	}
	return bin, nil
}
