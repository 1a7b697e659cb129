package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/report"
)

// The Kafka Streams peer: bench/compare/streams, run when
// -only names the streams phase.

// streamsVariants are the Kafka Streams variants of the pipeline phase:
// one per processing guarantee, each at Kafka Streams' defaults but for
// commit.interval.ms (configs/streams-*.properties say why) and with
// pipebench.DefaultJVM. The exactly_once_v2 one is read read_committed.
func (s *suite) streamsVariants() []pipebench.Variant {
	vs := []pipebench.Variant{
		{Name: "Kafka Streams, at_least_once", Engine: pipebench.KafkaStreams, Config: s.configPath("streams-at-least-once.properties")},
		{Name: "Kafka Streams, exactly_once_v2", Engine: pipebench.KafkaStreams, Config: s.configPath("streams-exactly-once-v2.properties"),
			ExactlyOnce: true, Baseline: "Kafka Streams, at_least_once"},
	}
	for _, eos := range []bool{false, true} {
		sp := streamsSpace(eos)
		set := streamsTuned
		if !eos {
			set = streamsTunedALOS
		}
		v, err := sp.variant(trial{Name: "tuned", Set: set}, filepath.Join(s.lay.compare, "configs"), s.work)
		if err != nil {
			panic(err) // streamsTuned sets only knobs of the space: TestStreamsTunedVariants
		}
		v.Name = "Kafka Streams, tuned, " + sp.Variant
		if eos {
			v.Baseline = "Kafka Streams, tuned, at_least_once"
		}
		vs = append(vs, v)
	}
	return vs
}

// streamsLatencyVariants are the Kafka Streams variants of the latency
// phase (the exactly_once_v2 one read read_committed, as its users do).
func (s *suite) streamsLatencyVariants() []report.LatencyVariant {
	vs := s.streamsVariants()
	return []report.LatencyVariant{
		{Variant: vs[0], Settings: "`commit.interval.ms=100`"},
		{Variant: vs[1], Settings: "`processing.guarantee=exactly_once_v2`, `commit.interval.ms=100` (read read_committed)"},
		{Variant: vs[2], Settings: tunedSettings(vs[2])},
		{Variant: vs[3], Settings: "`processing.guarantee=exactly_once_v2`, " + tunedSettings(vs[3]) + " (read read_committed)"},
	}
}

// tunedSettings is what a tuned Kafka Streams variant sets beyond its
// properties file (`commit.interval.ms=100`): its properties and JVM
// options, for the latency table.
func tunedSettings(v pipebench.Variant) string {
	var parts []string
	for _, a := range append(append([]string(nil), v.Args...), v.JVM...) {
		parts = append(parts, "`"+a+"`")
	}
	return strings.Join(append(parts, "`commit.interval.ms=100`"), ", ")
}

// minJava is the oldest Java that Kafka Streams 4.x runs on, and that
// the app's pom.xml compiles for.
const minJava = 17

// buildStreams finds java and mvn and builds the app's jar into the
// work directory.
func (s *suite) buildStreams(ctx context.Context) error {
	end := s.prog.step("build the Kafka Streams app (mvn package in bench/compare/streams)", 20)
	defer end()
	java, mvn, err := streamsTools(ctx)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.work, "streams-build")
	if err := toolCmd(ctx, filepath.Join(s.lay.compare, "streams"), mvn, "-B", "-q", "package", "-Dstreams.buildDir="+dir); err != nil {
		return fmt.Errorf("build the Kafka Streams app: %w", err)
	}
	jar := filepath.Join(dir, "streams-bench.jar")
	if _, err := os.Stat(jar); err != nil {
		return fmt.Errorf("mvn package left no jar: %w", err)
	}
	state := filepath.Join(s.work, "streams-state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	s.bins.streams = pipebench.Java{Bin: java, Jar: jar, StateDir: state}
	return nil
}

// errStreamsTools says what the streams phase needs.
var errStreamsTools = errors.New("the streams phase (Kafka Streams) needs Java 17 or newer and Maven: " +
	"install a JDK and Maven (Debian: apt-get install openjdk-17-jdk-headless maven) or set JAVA_HOME, or leave streams out of -only")

// streamsTools returns the java launcher ($JAVA_HOME/bin/java if
// JAVA_HOME is set, else the one on PATH), checked to be Java 17 or
// newer, and mvn from PATH.
func streamsTools(ctx context.Context) (java, mvn string, err error) {
	java = "java"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java = filepath.Join(home, "bin", "java")
	}
	if java, err = exec.LookPath(java); err != nil {
		return "", "", fmt.Errorf("%w (%v)", errStreamsTools, err)
	}
	out, err := exec.CommandContext(ctx, java, "-version").CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("%w (%s -version: %v: %s)", errStreamsTools, java, err, bytes.TrimSpace(out))
	}
	major, err := javaMajor(string(out))
	if err != nil {
		return "", "", fmt.Errorf("%w (%s -version: %v)", errStreamsTools, java, err)
	}
	if major < minJava {
		return "", "", fmt.Errorf("%w (%s is Java %d)", errStreamsTools, java, major)
	}
	if mvn, err = exec.LookPath("mvn"); err != nil {
		return "", "", fmt.Errorf("%w (%v)", errStreamsTools, err)
	}
	return java, mvn, nil
}

var javaVersionRE = regexp.MustCompile(`version "([0-9]+)(?:\.([0-9]+))?[^"]*"`)

// javaMajor is the major version in the output of java -version:
// `openjdk version "17.0.15" 2025-04-15` is 17, `java version
// "1.8.0_381"` is 8, `openjdk version "25" 2025-09-16` is 25.
func javaMajor(versionOutput string) (int, error) {
	m := javaVersionRE.FindStringSubmatch(versionOutput)
	if m == nil {
		return 0, fmt.Errorf("no version in %.100q", versionOutput)
	}
	major, err := strconv.Atoi(m[1])
	if err == nil && major == 1 && m[2] != "" { // 1.8 and older
		major, err = strconv.Atoi(m[2])
	}
	return major, err
}
