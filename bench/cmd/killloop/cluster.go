//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencepost-dev/fencepost/bench/internal/childproc"
	"github.com/fencepost-dev/fencepost/internal/realkafka"
)

// nodes is how many Apache Kafka nodes -kafka asks for.
func nodes(kafka string) int {
	if kafka == "3node" {
		return 3
	}
	return 1
}

// startCluster starts the broker: the processor's embedded one (its own
// process, with the topics), or Apache Kafka (this process stops it).
func (m *measurement) startCluster(ctx context.Context) error {
	if m.o.kafka == "embedded" {
		bin := m.bin
		if m.o.membership == franz {
			// the embedded broker is the processor's command
			var err error
			if bin, _, err = buildProcessor(ctx, m.dir, "./cmd/processor"); err != nil {
				return err
			}
		}
		args := []string{"broker", "--port", "0", "--topics", inputT + "," + outputT, "--partitions", fmt.Sprint(m.o.partitions)}
		if m.o.killBroker {
			// three nodes keeping their data on disk, on ports that
			// stay the same across the restart
			port, err := freePorts(3)
			if err != nil {
				return err
			}
			args = []string{"broker", "--brokers", "3", "--port", fmt.Sprint(port), "--data-dir", filepath.Join(m.dir, "broker-data"),
				"--topics", inputT + "," + outputT, "--partitions", fmt.Sprint(m.o.partitions)}
		}
		broker, err := m.procs.Start(m.dir, "broker", bin, args...)
		if err != nil {
			return err
		}
		addr, err := childproc.WaitBootstrap(ctx, broker, 30*time.Second)
		if err != nil {
			return err
		}
		m.addrs = strings.Split(addr, ",")
		m.embedded = &embeddedBroker{bin: bin, args: args, proc: broker}
		return nil
	}
	c, err := realkafka.Start(ctx, realkafka.Options{Nodes: nodes(m.o.kafka), Dir: m.dir,
		Progress: func(s string) { m.logf("%s", s) }})
	if err != nil {
		return fmt.Errorf("starting Apache Kafka: %w", err)
	}
	m.stopCluster = c.Stop
	m.cluster = c
	m.addrs = c.Addrs
	return nil
}

// createTopics creates "in" and "out" on Apache Kafka.
func createTopics(ctx context.Context, adm *kadm.Client, partitions, replicas int) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(cctx, int32(partitions), int16(replicas), nil, inputT, outputT)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("creating %q and %q: %w", inputT, outputT, err)
	}
	// every node must know them before the instances start
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		md, err := adm.Metadata(cctx, inputT, outputT)
		if err == nil && md.Topics.Error() == nil && len(md.Topics[inputT].Partitions) == partitions {
			return nil
		}
		select {
		case <-cctx.Done():
			return fmt.Errorf("waiting for %q and %q: %w", inputT, outputT, cctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%q and %q were created but not every node knows them after 20s", inputT, outputT)
}

// embeddedBroker is the processor's embedded broker process of a run, and
// how to start it again.
type embeddedBroker struct {
	bin  string
	args []string
	proc *childproc.Child
	runs int
}

// freePorts returns the first of n consecutive TCP ports nothing listens
// on now.
func freePorts(n int) (int, error) {
	for attempt := 0; attempt < 50; attempt++ {
		first, err := freePort()
		if err != nil {
			return 0, err
		}
		ok := true
		for i := 1; i < n && ok; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", first+i))
			if err != nil {
				ok = false
				continue
			}
			l.Close()
		}
		if ok {
			return first, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports found", n)
}

// freePort returns a TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// scrapeCounter reads one counter (no labels) from the Prometheus text
// at http://addr/metrics; -1 if it cannot.
func scrapeCounter(addr, name string) int64 {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return int64(f)
		}
	}
	return -1
}
