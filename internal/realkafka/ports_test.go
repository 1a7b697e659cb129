package realkafka

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortsDistinctAndOutsideEphemeralRange checks that the ports a
// cluster's nodes get are distinct, free, and, where the kernel's
// ephemeral range is known, below it, so that an outgoing connection made
// while a node is down cannot take the port it restarts on.
func TestFreePortsDistinctAndOutsideEphemeralRange(t *testing.T) {
	low, high, static := staticPorts()
	t.Logf("static range: %v [%d, %d)", static, low, high)
	for round := 0; round < 20; round++ {
		ports, err := freePorts(12)
		if err != nil {
			t.Fatal(err)
		}
		if len(ports) != 12 {
			t.Fatalf("freePorts(12) returned %d ports", len(ports))
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("port %d returned twice in %v", p, ports)
			}
			seen[p] = true
			if static && (p < low || p >= high) {
				t.Fatalf("port %d outside [%d, %d)", p, low, high)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				t.Fatalf("port %d is not free after freePorts returned it: %v", p, err)
			}
			ln.Close()
		}
	}
}
