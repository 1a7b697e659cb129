// Command realkafka starts an Apache Kafka cluster on 127.0.0.1 for
// development and for running the real-Kafka suite by hand, and stops it
// on Ctrl-C or SIGTERM:
//
//	go run ./internal/realkafka/cmd/realkafka -nodes 3
//
// It prints the bootstrap addresses on a line of their own
// ("bootstrap: host:port,..."). The broker's jars are fetched with Maven
// on first use (FENCEPOST_KAFKA_VERSION picks the version).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fencepost-dev/fencepost/internal/realkafka"
)

func main() {
	nodes := flag.Int("nodes", 1, "nodes in the cluster: 1 or 3")
	version := flag.String("version", realkafka.Version(), "Apache Kafka version (the Maven artifact org.apache.kafka:kafka_2.13)")
	dir := flag.String("dir", "", "folder for data and logs (default: a temporary folder, removed at the end)")
	flag.Parse()
	if err := run(*nodes, *version, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "realkafka:", err)
		os.Exit(1)
	}
}

func run(nodes int, version, dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if dir == "" {
		d, err := os.MkdirTemp("", "realkafka-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	began := time.Now()
	c, err := realkafka.Start(ctx, realkafka.Options{
		Nodes: nodes, Dir: dir, Version: version,
		Progress: func(s string) { fmt.Fprintln(os.Stderr, s) },
	})
	if err != nil {
		return err
	}
	defer c.Stop()
	fmt.Fprintf(os.Stderr, "Apache Kafka %s, %d node(s), ready in %v; logs under %s; Ctrl-C stops it\n",
		c.Version, nodes, time.Since(began).Round(10*time.Millisecond), dir)
	fmt.Println("bootstrap: " + strings.Join(c.Addrs, ","))
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping")
	stopped := time.Now()
	c.Stop()
	fmt.Fprintf(os.Stderr, "stopped in %v\n", time.Since(stopped).Round(10*time.Millisecond))
	return nil
}
