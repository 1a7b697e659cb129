//go:build unix

// Command statebench measures what keyed state costs where it costs the
// most: a restore from an empty disk, against Kafka Streams restoring the
// same store; the time a failover takes with a store to restore; and the
// stateful built-in stages (a windowed count, a stream-table join)
// against Kafka Streams doing the same job.
//
//	statebench restore [flags]    restore throughput, fencepost and Kafka Streams
//	statebench failover [flags]   SIGKILL an owner, time until its partitions process again
//	statebench stages [flags]     the windowed count and the join, fencepost and Kafka Streams
//
// Each starts its broker (the processor's embedded one in its own
// process, or Apache Kafka 4.1.1 with internal/realkafka: -kafka) and
// stops it, and every process it started, however it ends. The fencepost
// instances of restore and failover are this binary (worker.go); those of
// stages are the processor (cmd/processor, built here) running the
// built-in stages from a configuration. Kafka Streams is the app in
// bench/compare/streams-state, built with Maven unless -streams-jar names
// the jar. bench/README.md says how to run them and
// what they measure.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/bench/internal/childproc"
	"github.com/fencepost-dev/fencepost/internal/realkafka"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: statebench restore|failover|stages [flags] (-h for each one's flags)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case workerCommand:
		err = worker(os.Args[2:])
	case "restore":
		err = restoreMain(os.Args[2:])
	case "failover":
		err = failoverMain(os.Args[2:])
	case "stages":
		err = stagesMain(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: use restore, failover or stages", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "statebench:", err)
		os.Exit(1)
	}
}

// env is a measurement's broker, work directory and children.
type env struct {
	dir   string
	kafka string
	addrs []string
	procs childproc.Children
	stop  func() // stops Apache Kafka (nil on the embedded broker)
	adm   *kadm.Client
	cl    *kgo.Client
	keep  bool
}

// newEnv starts the broker. close ends everything it started, on every
// path: deferred by the caller, and on SIGINT or SIGTERM.
func newEnv(ctx context.Context, kafka, brokers, dir string, keep bool) (*env, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "statebench-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	e := &env{dir: dir, kafka: kafka, keep: keep}
	switch kafka {
	case "embedded":
		bin, err := buildProcessor(ctx, dir)
		if err != nil {
			return nil, err
		}
		b, err := e.procs.Start(dir, "broker", bin, "broker", "--port", "0")
		if err != nil {
			return nil, err
		}
		addr, err := childproc.WaitBootstrap(ctx, b, 30*time.Second)
		if err != nil {
			e.close()
			return nil, err
		}
		e.addrs = strings.Split(addr, ",")
	case "apache":
		c, err := realkafka.Start(ctx, realkafka.Options{Nodes: 1, Dir: filepath.Join(dir, "kafka"), HeapMB: 1024,
			Progress: func(s string) { logf("%s", s) }})
		if err != nil {
			return nil, fmt.Errorf("starting Apache Kafka: %w", err)
		}
		e.stop, e.addrs = c.Stop, c.Addrs
	case "external":
		if brokers == "" {
			return nil, errors.New("-kafka external needs -brokers")
		}
		e.addrs = strings.Split(brokers, ",")
	default:
		return nil, fmt.Errorf("-kafka %q: use embedded, apache or external (with -brokers)", kafka)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addrs...), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(200_000), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		e.close()
		return nil, err
	}
	e.cl, e.adm = cl, kadm.NewClient(cl)
	logf("broker %s at %s; work directory %s", kafka, strings.Join(e.addrs, ","), dir)
	return e, nil
}

// buildProcessor builds cmd/processor into dir (once: a later call finds
// it there) and returns its path.
func buildProcessor(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "processor")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/fencepost-dev/fencepost/cmd/processor")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building the processor (run from the repository): %w", err)
	}
	return bin, nil
}

func (e *env) close() {
	if e.cl != nil {
		e.cl.Close()
	}
	e.procs.KillAll()
	if e.stop != nil {
		e.stop()
	}
	if !e.keep {
		_ = os.RemoveAll(e.dir)
	} else {
		logf("kept %s", e.dir)
	}
}

// interrupted returns a context that ends on SIGINT or SIGTERM, so that
// the deferred env.close runs.
func interrupted() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// createTopic creates topic (compacted when asked) and waits for its
// metadata.
func (e *env) createTopic(ctx context.Context, topic string, partitions int, compacted bool) error {
	// No retention by time: the events' times are fixed (from
	// defaultStart), and once they are older than the broker's 7 days it
	// deleted the first segments of a topic under a running series (an
	// output's first windows went missing).
	never := "-1"
	cfg := map[string]*string{"retention.ms": &never}
	if compacted {
		c := "compact"
		cfg["cleanup.policy"] = &c
	}
	resp, err := e.adm.CreateTopic(ctx, int32(partitions), 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return errExists
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		md, err := e.adm.Metadata(ctx, topic)
		if err == nil && md.Topics.Error() == nil && len(md.Topics[topic].Partitions) == partitions {
			return nil
		}
	}
	return fmt.Errorf("topic %s: no metadata within 20s", topic)
}

// errExists: the topic was there already (a broker of -kafka external).
var errExists = errors.New("topic exists")

// produce writes n records, record i with key(i) and value(i) to
// partition i % partitions, and waits for every acknowledgement.
func (e *env) produce(ctx context.Context, topic string, partitions, n int, key, value func(i int) []byte) error {
	return e.produceAll(ctx, n, func(i int) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: key(i), Value: value(i)}
	})
}

// produceAll writes n records, record(i) each (its partition set), and
// waits for every acknowledgement; it returns the first error.
func (e *env) produceAll(ctx context.Context, n int, record func(i int) *kgo.Record) error {
	errc := make(chan error, 1)
	for i := range n {
		e.cl.Produce(ctx, record(i), func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := e.cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// deleteGroup removes group's committed offsets, waiting up to a minute
// for its last members to leave or time out.
func (e *env) deleteGroup(ctx context.Context, group string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := e.adm.DeleteGroups(ctx, group)
		if err != nil {
			return err
		}
		err = nil
		for _, r := range resp {
			if r.Err != nil && !errors.Is(r.Err, kerr.GroupIDNotFound) {
				err = fmt.Errorf("deleting group %s: %w", group, r.Err)
			}
		}
		if err == nil || !errors.Is(err, kerr.NonEmptyGroup) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
