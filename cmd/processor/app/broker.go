package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
)

// brokerOptions describe an in-process Kafka-protocol cluster.
type brokerOptions struct {
	brokers    int
	port       int // first port; 0 picks free ports
	partitions int
	topics     []string
	dataDir    string
}

// startCluster starts a kfake cluster on 127.0.0.1. Topics are created
// with o.partitions partitions, as are topics a client asks to create.
// Groups accept session timeouts down to 100ms so tests rebalance fast.
func startCluster(o brokerOptions) (*kfake.Cluster, error) {
	opts := []kfake.Opt{
		kfake.NumBrokers(o.brokers),
		kfake.DefaultNumPartitions(o.partitions),
		kfake.AllowAutoTopicCreation(),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
	}
	if o.port > 0 {
		ports := make([]int, o.brokers)
		for i := range ports {
			ports[i] = o.port + i
		}
		opts = append(opts, kfake.Ports(ports...))
	}
	if len(o.topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(o.partitions), o.topics...))
	}
	if o.dataDir != "" {
		opts = append(opts, kfake.DataDir(o.dataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, &startError{err: err, dataDir: o.dataDir}
	}
	return c, nil
}

// startError is a cluster that did not start: a port in use, or a data
// directory that cannot be used.
type startError struct {
	err     error
	dataDir string
}

func (e *startError) Error() string {
	var ne *net.OpError
	if e.dataDir != "" && !errors.As(e.err, &ne) {
		return fmt.Sprintf("start the embedded broker with its data in %s: %v", e.dataDir, e.err)
	}
	return "start the embedded broker: " + e.err.Error()
}

func (e *startError) Unwrap() error { return e.err }

// hint says what to check, naming the broker command's flags.
func (e *startError) hint() string {
	var ne *net.OpError
	switch {
	case errors.Is(e.err, syscall.EADDRINUSE):
		return "is the port free? try --port 0"
	case errors.As(e.err, &ne):
		return "check --port"
	case e.dataDir != "":
		return "check --data-dir " + e.dataDir + ": it must be a directory this process can write, or not exist yet"
	}
	return ""
}

func (c *cli) brokerCmd() *cobra.Command {
	o := brokerOptions{}
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run a local Kafka-protocol broker for development and benchmarks",
		Long: `broker runs an in-process Kafka-protocol cluster on 127.0.0.1, for
development, demos and benchmarks, until SIGINT or SIGTERM. It prints the
bootstrap address on a line of its own ("bootstrap: host:port,...").
Topics named with --topics are created at start; others are created when a
client asks for them. Data lives in memory unless --data-dir is set.

It is not a production broker: no replication, no authentication.`,
		Example: "  processor broker --port 9092 --topics orders,orders.dlq\n  processor broker --brokers 3 --partitions 12 --data-dir ./kafka-data",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.brokers < 1 || o.brokers > 9 {
				return errors.New("--brokers: use 1 to 9")
			}
			if o.partitions < 1 {
				return errors.New("--partitions: use 1 or more")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return c.runBroker(ctx, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.port, "port", 9092, "first broker's `PORT` (the others take the next ones); 0 picks free ports")
	f.IntVar(&o.brokers, "brokers", 1, "number of brokers")
	f.IntVar(&o.partitions, "partitions", 4, "partitions of each topic created")
	f.StringSliceVar(&o.topics, "topics", nil, "topics to create at start (comma-separated)")
	f.StringVar(&o.dataDir, "data-dir", "", "`DIR` to keep the data in across restarts (default: memory only)")
	return cmd
}

func (c *cli) runBroker(ctx context.Context, o brokerOptions) error {
	cl, err := startCluster(o)
	if err != nil {
		var se *startError
		if errors.As(err, &se) && se.hint() != "" {
			return failure("%v (%s)", err, se.hint())
		}
		return failure("%v", err)
	}
	defer cl.Close()
	addrs := cl.ListenAddrs()
	fmt.Fprintf(c.stdout, "bootstrap: %s\n", strings.Join(addrs, ","))
	where := "in memory"
	if o.dataDir != "" {
		where = "in " + o.dataDir
	}
	fmt.Fprintf(c.stderr, "broker: %d broker(s), data %s; topics created with %d partitions; Ctrl-C stops\n", o.brokers, where, o.partitions)
	<-ctx.Done()
	fmt.Fprintln(c.stderr, "broker: stopping")
	return nil
}
