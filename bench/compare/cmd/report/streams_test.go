package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/kafkaio"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"
)

func TestJavaMajor(t *testing.T) {
	tests := []struct {
		out     string
		want    int
		wantErr bool
	}{
		{"openjdk version \"17.0.15\" 2025-04-15\nOpenJDK Runtime Environment (build 17.0.15+6-Debian-1deb12u1)\n", 17, false},
		{`openjdk version "25" 2025-09-16`, 25, false},
		{`openjdk version "21.0.2-ea" 2024-01-16`, 21, false},
		{`java version "1.8.0_381"`, 8, false},
		{`Picked up JAVA_TOOL_OPTIONS: -Xss1m` + "\n" + `openjdk version "11.0.22" 2024-01-16`, 11, false},
		{"bash: java: command not found", 0, true},
	}
	for _, tc := range tests {
		got, err := javaMajor(tc.out)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("javaMajor(%q) = %d, %v; want %d, error %v", tc.out, got, err, tc.want, tc.wantErr)
		}
	}
}

// The streams phase is known to -only but not in its default, so the
// default suite runs no Kafka Streams variant.
func TestStreamsPhaseOnlyWhenNamed(t *testing.T) {
	def, err := parsePhases(strings.Join(allPhases, ","))
	if err != nil {
		t.Fatal(err)
	}
	if def["streams"] {
		t.Error("the default -only runs the streams phase")
	}
	got, err := parsePhases("pipeline,streams")
	if err != nil || !got["streams"] || !got["pipeline"] {
		t.Errorf(`parsePhases("pipeline,streams") = %v, %v`, got, err)
	}

	s := &suite{phases: def}
	for _, v := range s.latencyVariants() {
		if v.Engine == pipebench.KafkaStreams {
			t.Errorf("default latency phase has %s", v.Name)
		}
	}
	s.phases = got
	var streams []string
	for _, v := range s.latencyVariants() {
		if v.Engine == pipebench.KafkaStreams {
			streams = append(streams, v.Name)
		}
	}
	if !slices.Equal(streams, []string{"Kafka Streams, at_least_once", "Kafka Streams, exactly_once_v2",
		"Kafka Streams, tuned, at_least_once", "Kafka Streams, tuned, exactly_once_v2"}) {
		t.Errorf("latency phase with streams has Kafka Streams variants %v, want both guarantees", streams)
	}
}

// Each Kafka Streams variant's properties file exists and sets the
// guarantee its name says, and the exactly_once_v2 one is read
// read_committed.
func TestStreamsVariants(t *testing.T) {
	lay := testLayout(t)
	s := &suite{lay: lay, work: t.TempDir()}
	vs := s.streamsVariants()
	if len(vs) != 4 {
		t.Fatalf("%d Kafka Streams variants, want 4", len(vs))
	}
	for _, v := range vs {
		guarantee := strings.TrimPrefix(strings.TrimPrefix(v.Name, "Kafka Streams, "), "tuned, ")
		data, err := os.ReadFile(v.Config)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if !strings.Contains(string(data), "\nprocessing.guarantee="+guarantee+"\n") {
			t.Errorf("%s: %s does not set processing.guarantee=%s", v.Name, filepath.Base(v.Config), guarantee)
		}
		wantIso := kafkaio.ReadUncommitted
		if guarantee == "exactly_once_v2" {
			wantIso = kafkaio.ReadCommitted
		}
		if v.Engine != pipebench.KafkaStreams || v.Isolation() != wantIso {
			t.Errorf("%s: engine %v, isolation %v; want Kafka Streams, %v", v.Name, v.Engine, v.Isolation(), wantIso)
		}
	}
}

// The app is built against the Kafka version the repository's launcher
// runs, and the report names that version.
func TestStreamsKafkaVersionMatchesLauncher(t *testing.T) {
	lay := testLayout(t)
	for _, f := range []struct{ path, re string }{
		{filepath.Join(lay.compare, "streams", "pom.xml"), `<kafka\.version>([^<]+)</kafka\.version>`},
		{filepath.Join(lay.root, "internal", "realkafka", "classpath.go"), `const DefaultVersion = "([^"]+)"`},
	} {
		data, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(f.re).FindSubmatch(data)
		if m == nil {
			t.Errorf("%s: no version matching %s", f.path, f.re)
			continue
		}
		if string(m[1]) != pipebench.StreamsKafkaVersion {
			t.Errorf("%s has Kafka %s, pipebench.StreamsKafkaVersion is %s", f.path, m[1], pipebench.StreamsKafkaVersion)
		}
	}
}

// Without Java 17+ or Maven the streams phase fails at once, saying what
// it needs.
func TestStreamsToolsMissing(t *testing.T) {
	fakeJava := func(t *testing.T, version string) string {
		home := t.TempDir()
		if err := os.Mkdir(filepath.Join(home, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		script := "#!/bin/sh\necho 'openjdk version \"" + version + "\" 2024-01-16' >&2\n"
		if err := os.WriteFile(filepath.Join(home, "bin", "java"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return home
	}
	tests := []struct {
		name, javaHome, path string
		want                 string
	}{
		{"no java", "", t.TempDir(), "executable file not found"},
		{"java 11", fakeJava(t, "11.0.22"), t.TempDir(), "is Java 11"},
		{"java 17, no mvn", fakeJava(t, "17.0.15"), t.TempDir(), `"mvn": executable file not found`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("JAVA_HOME", tc.javaHome)
			t.Setenv("PATH", tc.path)
			_, _, err := streamsTools(t.Context())
			if !errors.Is(err, errStreamsTools) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("streamsTools: %v; want errStreamsTools and %q", err, tc.want)
			}
		})
	}
}

// testLayout is the repository's layout, found from the test's directory.
func testLayout(t *testing.T) layout {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	lay, err := findLayout(wd)
	if err != nil {
		t.Fatal(err)
	}
	return lay
}
