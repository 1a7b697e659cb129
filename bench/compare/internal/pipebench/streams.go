package pipebench

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/proc"
)

// StreamsKafkaVersion is the Kafka Streams version of the app
// (bench/compare/streams/pom.xml's kafka.version): that of the Apache
// Kafka the repository's launcher runs (internal/realkafka), so client
// and broker match. A test of cmd/report holds the three together.
const StreamsKafkaVersion = "4.1.1"

// Java is what runs the KafkaStreams engine: the Kafka Streams app of
// bench/compare/streams, one jar built with Maven (the report's build
// step), and the java launcher that runs it.
type Java struct {
	Bin string // the java launcher (Java 17 or newer)
	Jar string // streams-bench.jar
	// StateDir, if set, is where each run's Kafka Streams state
	// directory goes (a subdirectory named after the run); the topology
	// is stateless, so it only holds Kafka Streams' own lock files. Empty:
	// Kafka Streams' default (java.io.tmpdir/kafka-streams).
	StateDir string
}

// DefaultJVM are the java options of a KafkaStreams variant that sets
// none (Variant.JVM nil): the collector the JVM picks by itself on a
// machine with 2 CPUs or more (G1), named so a run does not depend on
// that choice, and a heap of at most 512 MiB, where the JVM's own
// default is a quarter of the machine's memory (6 GiB on 24 GiB), which
// would let the heap, and so the resident set the report compares,
// grow far past what this stateless pipeline needs. A search over heap
// sizes and collectors sets Variant.JVM.
var DefaultJVM = []string{"-Xmx512m", "-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError"}

// javaArgs are the java command line's arguments for v with the
// properties file cfg.
func (j Java) javaArgs(v Variant, cfg string) []string {
	jvm := v.JVM
	if jvm == nil {
		jvm = DefaultJVM
	}
	args := append(append([]string(nil), jvm...), "-jar", j.Jar, "-c", cfg)
	return append(args, v.Args...)
}

// start runs v's Kafka Streams app as the child name, with env (the
// BENCH_* variables) and, if StateDir is set, STREAMS_STATE_DIR.
func (j Java) start(g *proc.Group, v Variant, name, cfg string, env []string) (*proc.Child, error) {
	if j.Bin == "" || j.Jar == "" {
		return nil, errors.New("variant " + v.Name + ": no java launcher or streams-bench.jar (the report builds the jar when a Kafka Streams variant runs)")
	}
	if j.StateDir != "" {
		env = append(env, "STREAMS_STATE_DIR="+filepath.Join(j.StateDir, name))
	}
	c, err := g.Start(name, "", j.Bin, j.javaArgs(v, cfg), env)
	if err != nil {
		return nil, fmt.Errorf("variant %s: %w", v.Name, err)
	}
	return c, nil
}
