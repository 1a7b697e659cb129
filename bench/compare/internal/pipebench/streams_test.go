package pipebench

import (
	"strings"
	"testing"
)

func TestJavaArgs(t *testing.T) {
	j := Java{Bin: "/usr/bin/java", Jar: "/w/streams-bench.jar"}
	got := strings.Join(j.javaArgs(Variant{Name: "Kafka Streams, at_least_once", Engine: KafkaStreams}, "/c/a.properties"), " ")
	if want := strings.Join(DefaultJVM, " ") + " -jar /w/streams-bench.jar -c /c/a.properties"; got != want {
		t.Errorf("default JVM options: %q, want %q", got, want)
	}
	got = strings.Join(j.javaArgs(Variant{JVM: []string{"-Xmx1g", "-XX:+UseParallelGC"}}, "/c/b.properties"), " ")
	if want := "-Xmx1g -XX:+UseParallelGC -jar /w/streams-bench.jar -c /c/b.properties"; got != want {
		t.Errorf("a variant's JVM options: %q, want %q", got, want)
	}
	if _, err := (Java{}).start(nil, Variant{Name: "x"}, "x", "c", nil); err == nil || !strings.Contains(err.Error(), "streams-bench.jar") {
		t.Errorf("start with no jar: %v, want an error naming the jar", err)
	}
	if KafkaStreams.String() != "Kafka Streams" {
		t.Errorf("KafkaStreams.String() = %q", KafkaStreams.String())
	}
}
