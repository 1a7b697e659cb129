//go:build realkafka

package realkafka_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/realkafka"
)

// TestRealKafkaStartStop starts the shape FENCEPOST_KAFKA names, checks that every node serves
// Metadata through its proxy and that a hook sees (and can hold back)
// requests, kills and restarts a node, and stops: no JVM is left.
func TestRealKafkaStartStop(t *testing.T) {
	shape, err := realkafka.NodesFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, nodes := range []int{shape} {
		t.Run(fmt.Sprintf("%dnode", nodes), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			began := time.Now()
			c, err := realkafka.Start(ctx, realkafka.Options{Nodes: nodes, Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Stop)
			t.Logf("Kafka %s, %d node(s): ready in %v", c.Version, nodes, time.Since(began).Round(10*time.Millisecond))
			pids := c.PIDs()
			if len(pids) != nodes {
				t.Fatalf("%d JVMs run, want %d", len(pids), nodes)
			}

			var seen atomic.Int32
			c.SetHook(func(r *realkafka.Request) realkafka.Action {
				if r.Key == int16(kmsg.Metadata) {
					if _, err := r.Decode(); err == nil {
						seen.Add(1)
					}
					return realkafka.Action{Delay: 300 * time.Millisecond}
				}
				return realkafka.Action{}
			})
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			asked := time.Now()
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(asked); took < 300*time.Millisecond || seen.Load() == 0 {
				t.Fatalf("metadata answered in %v, hook saw %d decoded requests: the proxy did not hold it back", took, seen.Load())
			}
			c.SetHook(nil)
			if len(resp.Brokers) != nodes {
				t.Fatalf("metadata lists %d brokers, want %d", len(resp.Brokers), nodes)
			}
			for _, b := range resp.Brokers {
				if addr := fmt.Sprintf("%s:%d", b.Host, b.Port); !strings.Contains(strings.Join(c.Addrs, ","), addr) {
					t.Fatalf("broker %d advertises %s, not its proxy (%v)", b.NodeID, addr, c.Addrs)
				}
			}

			victim := c.Nodes()[len(c.Nodes())-1]
			if err := c.Kill(victim); err != nil {
				t.Fatal(err)
			}
			if got := len(c.PIDs()); got != nodes-1 {
				t.Fatalf("%d JVMs after a kill, want %d", got, nodes-1)
			}
			restarted := time.Now()
			if err := c.Restart(ctx, victim); err != nil {
				t.Fatal(err)
			}
			t.Logf("node %d restarted in %v", victim, time.Since(restarted).Round(10*time.Millisecond))
			pids = c.PIDs()
			stopped := time.Now()
			c.Stop()
			t.Logf("stopped in %v", time.Since(stopped).Round(10*time.Millisecond))
			for _, pid := range pids {
				if syscall.Kill(pid, 0) == nil {
					t.Fatalf("JVM %d still runs after Stop", pid)
				}
			}
		})
	}
}

// TestRealKafkaKilledParentLeavesNoJVM: when the process that started the broker
// dies without cleaning up (a go test killed by its timeout, kill -9), the
// JVM dies with it.
func TestRealKafkaKilledParentLeavesNoJVM(t *testing.T) {
	if os.Getenv("REALKAFKA_CHILD") != "" {
		ctx := context.Background()
		c, err := realkafka.Start(ctx, realkafka.Options{Nodes: 1, Dir: os.Getenv("REALKAFKA_CHILD")})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("pids:", c.PIDs())
		select {} // until killed
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRealKafkaKilledParentLeavesNoJVM$")
	cmd.Env = append(os.Environ(), "REALKAFKA_CHILD="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "pids: ["); ok {
			for _, f := range strings.Fields(strings.TrimSuffix(rest, "]")) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, pid)
			}
			break
		}
		if strings.HasPrefix(sc.Text(), "error:") {
			t.Fatal(sc.Text())
		}
	}
	if len(pids) != 1 {
		t.Fatalf("the child reported JVMs %v", pids)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pids[0], 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pids[0], syscall.SIGKILL)
			t.Fatalf("JVM %d outlived its parent by 10s", pids[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
}
