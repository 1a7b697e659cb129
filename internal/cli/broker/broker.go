// Package broker is the processor's embedded Kafka-protocol cluster (a
// kfake cluster on 127.0.0.1): what kafka.embedded starts inside run, and
// the broker command that runs one on its own for development, demos and
// benchmarks.
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
)

// Options describe an in-process Kafka-protocol cluster.
type Options struct {
	Brokers    int
	Port       int // first port; 0 picks free ports
	Partitions int
	Topics     []string
	DataDir    string
	// MaxMessageBytes is the largest record batch the brokers accept
	// (message.max.bytes); 0 keeps kfake's default, 1048588.
	MaxMessageBytes int
}

// Start starts a kfake cluster on 127.0.0.1. Topics are created
// with o.Partitions partitions, as are topics a client asks to create.
// Groups accept session timeouts down to 100ms so tests rebalance fast.
func Start(o Options) (*kfake.Cluster, error) {
	opts := []kfake.Opt{
		kfake.NumBrokers(o.Brokers),
		kfake.DefaultNumPartitions(o.Partitions),
		kfake.AllowAutoTopicCreation(),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
	}
	if o.Port > 0 {
		ports := make([]int, o.Brokers)
		for i := range ports {
			ports[i] = o.Port + i
		}
		opts = append(opts, kfake.Ports(ports...))
	}
	if len(o.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(o.Partitions), o.Topics...))
	}
	if o.DataDir != "" {
		opts = append(opts, kfake.DataDir(o.DataDir))
	}
	if o.MaxMessageBytes > 0 {
		opts = append(opts, kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(o.MaxMessageBytes)}))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, &startError{err: err, dataDir: o.DataDir}
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

// cli is the environment the broker command runs in.
type cli struct{ *clibase.Env }

// Command returns the broker command.
func Command(env *clibase.Env) *cobra.Command { return (&cli{env}).brokerCmd() }

func (c *cli) brokerCmd() *cobra.Command {
	o := Options{}
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run a local Kafka-protocol broker for development and benchmarks",
		Long: `broker runs an in-process Kafka-protocol cluster on 127.0.0.1, for
development, demos and benchmarks, until SIGINT or SIGTERM. It prints the
bootstrap address on a line of its own ("bootstrap: host:port,...").
Topics named with --topics are created at start; others with 'processor
topics create', or by a client that asks the broker to create a topic it
names. The processor's tools (produce, consume, offsets) never ask: a
topic that does not exist is an error, not a new topic. Data lives in
memory unless --data-dir is set; --max-message-bytes sets the largest
record batch the brokers accept (message.max.bytes; a topic may set its
own max.message.bytes).

It is not a production broker: no replication, no authentication.`,
		Example: "  processor broker --port 9092 --topics orders,orders.dlq\n  processor broker --brokers 3 --partitions 12 --data-dir ./kafka-data",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Brokers < 1 || o.Brokers > 9 {
				return errors.New("--brokers: use 1 to 9")
			}
			if o.Partitions < 1 {
				return errors.New("--partitions: use 1 or more")
			}
			if o.MaxMessageBytes < 0 {
				return errors.New("--max-message-bytes: use 1 or more, or 0 for the default")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return c.runBroker(ctx, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Port, "port", 9092, "first broker's `PORT` (the others take the next ones); 0 picks free ports")
	f.IntVar(&o.Brokers, "brokers", 1, "number of brokers")
	f.IntVar(&o.Partitions, "partitions", 4, "partitions of each topic created")
	f.StringSliceVar(&o.Topics, "topics", nil, "topics to create at start (comma-separated)")
	f.StringVar(&o.DataDir, "data-dir", "", "`DIR` to keep the data in across restarts (default: memory only)")
	f.IntVar(&o.MaxMessageBytes, "max-message-bytes", 0, "largest record batch the brokers accept, in `BYTES` (message.max.bytes; 0: 1048588)")
	return cmd
}

func (c *cli) runBroker(ctx context.Context, o Options) error {
	cl, err := Start(o)
	if err != nil {
		var se *startError
		if errors.As(err, &se) && se.hint() != "" {
			return clibase.Failure("%v (%s)", err, se.hint())
		}
		return clibase.Failure("%v", err)
	}
	defer cl.Close()
	addrs := cl.ListenAddrs()
	fmt.Fprintf(c.Stdout, "bootstrap: %s\n", strings.Join(addrs, ","))
	where := "in memory"
	if o.DataDir != "" {
		where = "in " + o.DataDir
	}
	fmt.Fprintf(c.Stderr, "broker: %d broker(s), data %s; topics created with %d partitions; Ctrl-C stops\n", o.Brokers, where, o.Partitions)
	<-ctx.Done()
	fmt.Fprintln(c.Stderr, "broker: stopping")
	return nil
}
