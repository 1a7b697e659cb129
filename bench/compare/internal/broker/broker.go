// Package broker starts a Kafka-protocol cluster as a separate process:
// the repository's `processor broker` (franz-go's kfake, in memory), so
// the clients under test do not share their CPU time or heap with it.
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
	return &Cluster{Addrs: addrs, Child: c}, nil
}

// Stop ends the broker process.
func (c *Cluster) Stop() error {
	u, err := c.Child.Stop(10 * time.Second)
	if err != nil {
		return err
	}
	return u.Err
}
