// Package broker starts a Kafka-protocol cluster as a separate process,
// so the clients under test do not share their CPU time or heap with it:
// the repository's `processor broker` (franz-go's kfake, in memory), or
// Apache Kafka through the repository's launcher (internal/realkafka).
package broker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/proc"
)

// Cluster is a running broker process.
type Cluster struct {
	Addrs []string
	Child *proc.Child
	// What runs: "the embedded broker (kfake)" or "Apache Kafka 4.1.1, 1 node".
	What  string
	grace time.Duration // how long Stop waits for a graceful exit
}

// Start runs `processor broker --brokers n --partitions p --port 0` as a
// child of g named name, and waits for its bootstrap line.
func Start(ctx context.Context, g *proc.Group, processor, name string, brokers, partitions int) (*Cluster, error) {
	c, err := g.Start(name, "", processor, []string{"broker", "--port", "0",
		"--brokers", strconv.Itoa(brokers), "--partitions", strconv.Itoa(partitions)}, nil)
	if err != nil {
		return nil, err
	}
	line, err := c.WaitLine(ctx, "bootstrap:", 30*time.Second)
	if err != nil {
		_, _ = c.Stop(5 * time.Second)
		return nil, err
	}
	addrs := strings.Split(line, ",")
	if len(addrs) != brokers {
		_, _ = c.Stop(5 * time.Second)
		return nil, fmt.Errorf("%s printed %d addresses (%q), want %d", name, len(addrs), line, brokers)
	}
	return &Cluster{Addrs: addrs, Child: c, What: "the embedded broker (`processor broker`, franz-go's kfake, in memory)", grace: 10 * time.Second}, nil
}

// StartApache runs Apache Kafka, one node, with the repository's
// launcher (launcher is the binary of internal/realkafka/cmd/realkafka)
// as a child of g named name, and waits for its bootstrap line. The
// launcher fetches the broker's jars with Maven on first use (minutes),
// formats a fresh data directory and stops the JVM when it gets SIGTERM;
// the JVM dies with it if it is killed.
func StartApache(ctx context.Context, g *proc.Group, launcher, name string) (*Cluster, error) {
	c, err := g.Start(name, "", launcher, []string{"-nodes", "1"}, nil)
	if err != nil {
		return nil, err
	}
	line, err := c.WaitLine(ctx, "bootstrap:", 10*time.Minute)
	if err != nil {
		_, _ = c.Stop(30 * time.Second)
		return nil, fmt.Errorf("%w; the launcher's log ends:\n%s", err, c.Tail(20))
	}
	what := "Apache Kafka, 1 node"
	if v := apacheVersion(c.Tail(50)); v != "" {
		what = "Apache Kafka " + v + ", 1 node"
	}
	return &Cluster{Addrs: strings.Split(line, ","), Child: c, What: what + " (the repository's launcher, internal/realkafka)", grace: 60 * time.Second}, nil
}

// apacheVersion finds the version in the launcher's "Apache Kafka 4.1.1,
// 1 node(s), ready in ..." line.
func apacheVersion(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Apache Kafka "); ok {
			if v, _, ok := strings.Cut(rest, ","); ok && !strings.Contains(v, " ") {
				return v
			}
		}
	}
	return ""
}

// Stop ends the broker process.
func (c *Cluster) Stop() error {
	u, err := c.Child.Stop(c.grace)
	if err != nil {
		return err
	}
	return u.Err
}
