// Package realkafka starts Apache Kafka brokers for the real-Kafka test
// suite: the broker's jars come from the Maven registry (fetched once per
// machine into a cache folder), each node runs kafka.Kafka in KRaft
// combined broker+controller mode on 127.0.0.1, and the cluster is one
// node or three (a real quorum: replication factor 3,
// min.insync.replicas=2).
//
// Clients reach every node through a small proxy in this process: the
// node advertises the proxy's address, so a test can delay a node's
// requests, cut its connections (SetHook, Cut) or look at what clients
// send, as the in-process broker's fault hooks allow. Replication and the
// controller quorum use their own listeners, not the proxy. With Secure
// set, each node also has a SASL_SSL listener (PLAIN and SCRAM-SHA-512 over
// TLS), reached directly.
//
// Every JVM is started in its own process group with a parent-death
// signal (Linux), and Stop kills whatever is left: a test that fails or a
// go test that is killed leaves no broker behind.
package realkafka

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Options describe a cluster to start.
type Options struct {
	// Nodes is 1 or 3.
	Nodes int
	// Dir holds the nodes' data, configuration and logs; it must exist.
	Dir string
	// Version is the Kafka version (default: Version()).
	Version string
	// CacheDir holds the fetched jars (default: CacheDir()).
	CacheDir string
	// HeapMB is each JVM's maximum heap (default 400).
	HeapMB int
	// Secure adds a SASL_SSL listener to every node.
	Secure *Secure
	// Progress, if set, gets a line for each step (the Maven fetch, each
	// node's start).
	Progress func(string)
}

// Secure describes the SASL_SSL listener: the server's certificate and
// the users it accepts.
type Secure struct {
	// CertPEM is the server certificate chain (valid for 127.0.0.1) and
	// KeyPEM its unencrypted PKCS#8 private key.
	CertPEM, KeyPEM []byte
	// Plain maps PLAIN users to their passwords.
	Plain map[string]string
	// Scram512 maps SCRAM-SHA-512 users to their passwords; they are
	// created when storage is formatted.
	Scram512 map[string]string
}

// Cluster is a running Apache Kafka cluster.
type Cluster struct {
	// Addrs are the client bootstrap addresses (the nodes' proxies).
	Addrs []string
	// SecureAddrs are the SASL_SSL listeners' addresses (with Secure).
	SecureAddrs []string
	// DirectAddrs are the nodes' own plaintext client listeners, behind
	// the proxies (clients that bootstrap there learn the proxies'
	// addresses from Metadata).
	DirectAddrs []string
	// Version is the Kafka version that runs.
	Version string

	opts      Options
	classpath string
	hook      atomic.Pointer[Hook]
	nodes     []*node
	stopOnce  sync.Once
}

type node struct {
	id         int32
	dir        string
	properties string
	log        string
	proxy      *proxy

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start fetches the broker's jars if they are not cached, formats every
// node's storage, starts the nodes and returns once every node serves
// Metadata and lists all nodes. On error nothing is left running.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Nodes != 1 && o.Nodes != 3 {
		return nil, fmt.Errorf("realkafka: %d nodes: use 1 or 3", o.Nodes)
	}
	if o.Version == "" {
		o.Version = Version()
	}
	if o.CacheDir == "" {
		d, err := CacheDir()
		if err != nil {
			return nil, err
		}
		o.CacheDir = d
	}
	if o.HeapMB == 0 {
		o.HeapMB = 400
	}
	if _, err := exec.LookPath("java"); err != nil {
		return nil, errors.New("java not found on PATH: the real-Kafka suite needs Java 17 or later")
	}
	cp, err := Classpath(ctx, o.Version, o.CacheDir, o.Progress)
	if err != nil {
		return nil, err
	}
	// The ports are free when picked, but something else may take one
	// before a proxy or the JVM binds it: then start again, elsewhere.
	dir := o.Dir
	for attempt := 1; ; attempt++ {
		o.Dir = filepath.Join(dir, fmt.Sprintf("attempt-%d", attempt))
		if attempt == 1 {
			o.Dir = dir
		}
		c, err := start(ctx, o, cp)
		taken := errors.Is(err, syscall.EADDRINUSE) || // a proxy's listener
			err != nil && strings.Contains(err.Error(), "Address already in use") // a JVM's
		if err == nil || attempt == 3 || !taken {
			return c, err
		}
		if o.Progress != nil {
			o.Progress("a port was taken before Kafka bound it; starting again on other ports")
		}
	}
}

func start(ctx context.Context, o Options, cp string) (*Cluster, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{Version: o.Version, opts: o, classpath: cp}
	fail := func(err error, logs bool) (*Cluster, error) {
		if logs {
			err = fmt.Errorf("%w\n%s", err, c.LogTail(40))
		}
		c.Stop()
		return nil, err
	}
	if err := c.layout(); err != nil {
		return fail(err, false)
	}
	if err := c.format(ctx); err != nil {
		return fail(err, false)
	}
	for _, n := range c.nodes {
		if err := c.startNode(n); err != nil {
			return fail(err, false)
		}
	}
	if err := c.WaitReady(ctx); err != nil {
		return fail(err, true)
	}
	if err := c.waitCoordinator(ctx); err != nil {
		return fail(err, true)
	}
	return c, nil
}

// layout picks the ports, starts the proxies and writes every node's
// configuration.
func (c *Cluster) layout() error {
	o := c.opts
	type ports struct {
		client, internal, controller int
		secure, proxy                int
	}
	// All at once, so no port is picked twice. The proxy's port is one of
	// them too: a killed node's proxy listens on it again at restart.
	free, err := freePorts(5 * o.Nodes)
	if err != nil {
		return err
	}
	ps := make([]ports, o.Nodes)
	for i := range ps {
		f := free[5*i:]
		ps[i] = ports{client: f[0], internal: f[1], controller: f[2], secure: f[3], proxy: f[4]}
	}
	voters := make([]string, o.Nodes)
	for i := range ps {
		voters[i] = fmt.Sprintf("%d@127.0.0.1:%d", i+1, ps[i].controller)
	}
	rf := o.Nodes
	minISR := min(2, o.Nodes)
	for i, p := range ps {
		id := int32(i + 1)
		dir := filepath.Join(o.Dir, fmt.Sprintf("node-%d", id))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.proxy))
		if err != nil {
			return err // Start tries other ports if it was taken meanwhile
		}
		n := &node{id: id, dir: dir, properties: filepath.Join(dir, "server.properties"), log: filepath.Join(dir, "broker.log")}
		n.proxy = newProxy(id, ln, fmt.Sprintf("127.0.0.1:%d", p.client), &c.hook)
		c.nodes = append(c.nodes, n)
		c.Addrs = append(c.Addrs, n.proxy.addr())
		c.DirectAddrs = append(c.DirectAddrs, fmt.Sprintf("127.0.0.1:%d", p.client))

		listeners := []string{
			fmt.Sprintf("CLIENT://127.0.0.1:%d", p.client),
			fmt.Sprintf("INTERNAL://127.0.0.1:%d", p.internal),
			fmt.Sprintf("CONTROLLER://127.0.0.1:%d", p.controller),
		}
		advertised := []string{
			"CLIENT://" + n.proxy.addr(),
			fmt.Sprintf("INTERNAL://127.0.0.1:%d", p.internal),
		}
		protocols := "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
		props := []string{
			"process.roles=broker,controller",
			fmt.Sprintf("node.id=%d", id),
			"controller.quorum.voters=" + strings.Join(voters, ","),
			"controller.listener.names=CONTROLLER",
			"inter.broker.listener.name=INTERNAL",
			"log.dirs=" + filepath.Join(dir, "data"),
			"num.partitions=1",
			fmt.Sprintf("default.replication.factor=%d", rf),
			fmt.Sprintf("min.insync.replicas=%d", minISR),
			"offsets.topic.num.partitions=1",
			fmt.Sprintf("offsets.topic.replication.factor=%d", rf),
			fmt.Sprintf("transaction.state.log.replication.factor=%d", rf),
			fmt.Sprintf("transaction.state.log.min.isr=%d", minISR),
			fmt.Sprintf("share.coordinator.state.topic.replication.factor=%d", rf),
			fmt.Sprintf("share.coordinator.state.topic.min.isr=%d", minISR),
			"auto.create.topics.enable=false",
			"group.initial.rebalance.delay.ms=0",
			"group.min.session.timeout.ms=100",
			// a killed node is fenced and leaves the ISR within seconds
			"broker.heartbeat.interval.ms=500",
			"broker.session.timeout.ms=3000",
			"replica.lag.time.max.ms=5000",
			// a small machine: few threads
			"num.network.threads=2",
			"num.io.threads=4",
			"background.threads=4",
			"num.replica.fetchers=1",
			"log.cleaner.threads=1",
			"log.cleaner.dedupe.buffer.size=4194304",
		}
		if s := o.Secure; s != nil {
			listeners = append(listeners, fmt.Sprintf("SECURE://127.0.0.1:%d", p.secure))
			advertised = append(advertised, fmt.Sprintf("SECURE://127.0.0.1:%d", p.secure))
			protocols += ",SECURE:SASL_SSL"
			c.SecureAddrs = append(c.SecureAddrs, fmt.Sprintf("127.0.0.1:%d", p.secure))
			pem := filepath.Join(dir, "server.pem")
			if err := os.WriteFile(pem, append(append([]byte{}, s.KeyPEM...), s.CertPEM...), 0o600); err != nil {
				return err
			}
			var plain strings.Builder
			plain.WriteString("org.apache.kafka.common.security.plain.PlainLoginModule required")
			for u, pw := range s.Plain {
				fmt.Fprintf(&plain, " user_%s=%q", u, pw)
			}
			plain.WriteString(";")
			props = append(props,
				"listener.name.secure.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
				"listener.name.secure.plain.sasl.jaas.config="+plain.String(),
				"listener.name.secure.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
				"listener.name.secure.ssl.keystore.type=PEM",
				"listener.name.secure.ssl.keystore.location="+pem,
				"listener.name.secure.ssl.client.auth=none",
			)
		}
		props = append(props,
			"listeners="+strings.Join(listeners, ","),
			"advertised.listeners="+strings.Join(advertised, ","),
			"listener.security.protocol.map="+protocols,
		)
		if err := os.WriteFile(n.properties, []byte(strings.Join(props, "\n")+"\n"), 0o600); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "log4j2.xml"), []byte(log4jConfig(n.log)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// log4jConfig returns the log4j2 configuration of a node that logs to
// file. It is XML, which log4j2 reads with the JDK alone: a YAML file
// needs Jackson's YAML module, which Kafka 4 brings and Kafka 3 does not
// (3.x would then log nothing).
func log4jConfig(file string) string {
	var esc strings.Builder
	_ = xml.EscapeText(&esc, []byte(file))
	return `<?xml version="1.0" encoding="UTF-8"?>
<Configuration>
  <Appenders>
    <File name="file" fileName="` + esc.String() + `">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="org.apache.kafka.controller" level="INFO"/>
    <Root level="INFO">
      <AppenderRef ref="file"/>
    </Root>
  </Loggers>
</Configuration>
`
}

// format formats every node's KRaft storage with one cluster id (and the
// SCRAM users).
func (c *Cluster) format(ctx context.Context) error {
	clusterID, err := newClusterID(rand.Reader)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i, n := range c.nodes {
		args := []string{"kafka.tools.StorageTool", "format", "--cluster-id=" + clusterID, "--config=" + n.properties}
		if s := c.opts.Secure; s != nil {
			for u, pw := range s.Scram512 {
				args = append(args, "--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", u, pw))
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := inNode(exec.CommandContext(ctx, "java", c.javaArgs(n, 128, args...)...), n)
			out, err := cmd.CombinedOutput()
			if err != nil {
				// the output does not echo the arguments (SCRAM passwords)
				errs[i] = fmt.Errorf("format node %d's storage (kafka.tools.StorageTool; check %s): %w\n%s", n.id, n.properties, err, tail(string(out), 20))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// newClusterID returns a random KRaft cluster id: 16 bytes from random in
// unpadded URL-safe base64, as Kafka's own Uuid.randomUuid writes them, and
// like Kafka it never returns one that starts with '-': one id in 64 would,
// and StorageTool's argument parser takes such an id for an option and
// refuses to format.
func newClusterID(random io.Reader) (string, error) {
	id := make([]byte, 16)
	for {
		if _, err := io.ReadFull(random, id); err != nil {
			return "", fmt.Errorf("cluster id: %w", err)
		}
		s := base64.RawURLEncoding.EncodeToString(id)
		if !strings.HasPrefix(s, "-") {
			return s, nil
		}
	}
}

// javaArgs returns the arguments of a java command on the classpath with
// the node's log configuration, then args.
func (c *Cluster) javaArgs(n *node, heapMB int, args ...string) []string {
	jvm := []string{
		fmt.Sprintf("-Xmx%dm", heapMB), "-Xms64m", "-Xss512k",
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(n.dir, "log4j2.xml"),
		"-Dkafka.logs.dir=" + n.dir,
		"-cp", c.classpath,
	}
	return append(jvm, args...)
}

// inNode runs cmd (a java command) in the node's folder, in a process
// group of its own that dies with this process (setProcAttr).
func inNode(cmd *exec.Cmd, n *node) *exec.Cmd {
	cmd.Dir = n.dir
	setProcAttr(cmd)
	return cmd
}

// startNode starts a node's JVM; its output goes to DIR/stdout.log.
func (c *Cluster) startNode(n *node) error {
	out, err := os.OpenFile(filepath.Join(n.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// not bound to a context: the JVM lives until Stop or Kill ends it
	cmd := inNode(exec.Command("java", c.javaArgs(n, c.opts.HeapMB, "kafka.Kafka", n.properties)...), n)
	cmd.Stdout, cmd.Stderr = out, out
	if c.opts.Progress != nil {
		c.opts.Progress(fmt.Sprintf("starting node %d (Kafka %s), log %s", n.id, c.Version, n.log))
	}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start node %d: %w", n.id, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(done)
	}()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	return nil
}

// WaitReady waits until every node's client listener answers Metadata
// listing all nodes.
func (c *Cluster) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, n := range c.nodes {
		if err := c.waitNode(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) waitNode(ctx context.Context, n *node) error {
	return c.waitNodeListing(ctx, n, func(brokers []kmsg.MetadataResponseBroker) bool { return len(brokers) == len(c.nodes) })
}

// waitNodeListing waits until n serves Metadata whose brokers satisfy ok.
func (c *Cluster) waitNodeListing(ctx context.Context, n *node, ok func([]kmsg.MetadataResponseBroker) bool) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.proxy.addr()), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	var last error
	for {
		if err := n.exited(); err != nil {
			return fmt.Errorf("node %d exited while starting (%v); see %s", n.id, err, n.log)
		}
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		rcancel()
		if err == nil && ok(resp.Brokers) {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("metadata lists %d of %d nodes", len(resp.Brokers), len(c.nodes))
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d did not serve Metadata (last: %v); see %s: %w", n.id, last, n.log, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitCoordinator asks for a group's offsets until the group coordinator
// answers: the first FindCoordinator creates the __consumer_offsets topic,
// whose leader then loads it (COORDINATOR_LOAD_IN_PROGRESS meanwhile).
// The first test's group does not wait for that, nor see the coordinator
// move while the topic settles.
func (c *Cluster) waitCoordinator(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	var last error
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{"realkafka-warmup"}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Coordinators) == 1 {
			err = kerr.ErrorForCode(resp.Coordinators[0].ErrorCode)
		}
		if err == nil {
			fetch := kmsg.NewPtrOffsetFetchRequest()
			fetch.Group = "realkafka-warmup"
			var fresp *kmsg.OffsetFetchResponse
			if fresp, err = fetch.RequestWith(ctx, cl); err == nil {
				err = kerr.ErrorForCode(fresp.ErrorCode)
				if len(fresp.Groups) == 1 {
					err = kerr.ErrorForCode(fresp.Groups[0].ErrorCode)
				}
				if err == nil || errors.Is(err, kerr.GroupIDNotFound) {
					return nil
				}
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("no group coordinator (last: %v): %w", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// exited returns why the node's JVM exited, or nil if it runs.
func (n *node) exited() error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return errors.New("not started")
	}
	select {
	case <-done:
		return fmt.Errorf("exit status %v", cmd.ProcessState)
	default:
		return nil
	}
}

// Nodes returns the node ids, 1..n.
func (c *Cluster) Nodes() []int32 {
	ids := make([]int32, len(c.nodes))
	for i, n := range c.nodes {
		ids[i] = n.id
	}
	return ids
}

func (c *Cluster) node(id int32) (*node, error) {
	for _, n := range c.nodes {
		if n.id == id {
			return n, nil
		}
	}
	return nil, fmt.Errorf("realkafka: no node %d (nodes are 1..%d)", id, len(c.nodes))
}

// PIDs returns the process ids of the nodes' JVMs that run.
func (c *Cluster) PIDs() []int {
	var pids []int
	for _, n := range c.nodes {
		n.mu.Lock()
		if n.cmd != nil && n.cmd.Process != nil {
			select {
			case <-n.done:
			default:
				pids = append(pids, n.cmd.Process.Pid)
			}
		}
		n.mu.Unlock()
	}
	return pids
}

// SetHook installs h on every node's proxy (nil removes it).
func (c *Cluster) SetHook(h Hook) {
	if h == nil {
		c.hook.Store(nil)
		return
	}
	c.hook.Store(&h)
}

// Cut closes every client connection to node id (clients reconnect).
func (c *Cluster) Cut(id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	n.proxy.cut()
	return nil
}

// Kill stops node id with SIGKILL (no controlled shutdown) and waits for
// it to exit. Its address refuses connections until Restart.
func (c *Cluster) Kill(id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	n.proxy.pause()
	n.kill(syscall.SIGKILL)
	n.wait(10 * time.Second)
	return nil
}

// Restart starts a node that Kill stopped, on its data, and waits until
// it serves Metadata listing all nodes.
func (c *Cluster) Restart(ctx context.Context, id int32) error { return c.restart(ctx, id, true) }

// RestartAmongDead is Restart for a node that comes back while other
// nodes are still down: it waits until the node serves Metadata listing
// itself, not every node.
func (c *Cluster) RestartAmongDead(ctx context.Context, id int32) error {
	return c.restart(ctx, id, false)
}

func (c *Cluster) restart(ctx context.Context, id int32, all bool) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	if n.exited() == nil {
		return fmt.Errorf("realkafka: node %d is running", id)
	}
	if err := c.startNode(n); err != nil {
		return err
	}
	if err := n.proxy.resume(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if !all {
		return c.waitNodeListing(ctx, n, func(brokers []kmsg.MetadataResponseBroker) bool {
			for _, b := range brokers {
				if b.NodeID == n.id {
					return true
				}
			}
			return false
		})
	}
	return c.waitNode(ctx, n)
}

func (n *node) kill(sig syscall.Signal) {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	// the JVM leads its own process group
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}

func (n *node) wait(d time.Duration) bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Stop stops every node (SIGTERM, then SIGKILL after 15 seconds) and the
// proxies. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		for _, n := range c.nodes {
			n.kill(syscall.SIGTERM)
		}
		for _, n := range c.nodes {
			if !n.wait(15 * time.Second) {
				n.kill(syscall.SIGKILL)
				n.wait(10 * time.Second)
			}
		}
		for _, n := range c.nodes {
			n.proxy.close()
		}
	})
}

// LogTail returns the last lines of every node's broker log and output,
// for a failure message.
func (c *Cluster) LogTail(lines int) string {
	var b strings.Builder
	for _, n := range c.nodes {
		for _, f := range []string{n.log, filepath.Join(n.dir, "stdout.log")} {
			data, err := os.ReadFile(f)
			if err != nil || len(data) == 0 {
				continue
			}
			fmt.Fprintf(&b, "--- node %d: last lines of %s\n%s\n", n.id, f, tail(string(data), lines))
		}
	}
	return b.String()
}

// freePorts returns n distinct ports that were free a moment ago. They are
// taken below the kernel's ephemeral range when it leaves room there: a port
// from that range can be handed to an outgoing connection while a node is
// down, and the node could then not listen on it again when it restarts.
func freePorts(n int) ([]int, error) {
	low, high, ok := staticPorts()
	if !ok {
		return ephemeralPorts(n)
	}
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, fmt.Errorf("find %d free ports in %d-%d: %d found after %d tries; check what listens there", n, low, high-1, len(ports), tries)
		}
		port := low + mrand.IntN(high-low)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken; try another
		}
		lns = append(lns, ln)
		ports = append(ports, port)
	}
	return ports, nil
}

// staticPorts returns the range [low, high) that freePorts draws from: from
// 10000 to the start of the kernel's ephemeral range, if that range is known
// and leaves at least 1000 ports below it.
func staticPorts() (low, high int, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0, 0, false
	}
	start, err := strconv.Atoi(fields[0])
	if err != nil || start < 11000 {
		return 0, 0, false
	}
	return 10000, start, true
}

// ephemeralPorts returns n distinct ports the kernel handed out and that
// were free a moment ago.
func ephemeralPorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// ShapeEnv names the environment variable that picks the cluster shape of
// the real-Kafka suite: "1node" (the default) or "3node".
const ShapeEnv = "FENCEPOST_KAFKA"

// NodesFromEnv returns the node count $FENCEPOST_KAFKA asks for.
func NodesFromEnv() (int, error) {
	switch v := strings.TrimSpace(os.Getenv(ShapeEnv)); v {
	case "", "1node", "1":
		return 1, nil
	case "3node", "3":
		return 3, nil
	default:
		return 0, fmt.Errorf("%s=%q: use 1node or 3node", ShapeEnv, v)
	}
}
