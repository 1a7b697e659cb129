package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// consumerWith is base with lines added under consumer:.
func consumerWith(lines string) string {
	return strings.Replace(base, "  group: g\n", "  group: g\n"+lines, 1)
}

// TestLintRefusesWhatRunWouldRefuseOrChange: each value run would refuse,
// or silently change, is reported at its position (one case each).
func TestLintRefusesWhatRunWouldRefuseOrChange(t *testing.T) {
	checkCases(t, []errorCase{
		{"session timeout beyond Kafka's int32 milliseconds", consumerWith("  session_timeout: 1000000h\n"),
			[]want{{"5:3", "consumer.session_timeout", "1000000h0m0s is longer than Kafka's limit for it"}}, ""},
		{"http port out of range", base + "http: {address: '127.0.0.1:99999'}\n",
			[]want{{"8:8", "http.address", `"127.0.0.1:99999": the port must be a number from 0 to 65535`}}, ""},
		{"http port not a number", base + "http: {address: 'localhost:metrics'}\n",
			[]want{{"8:8", "http.address", "the port must be a number"}}, ""},
		{"broker port out of range", strings.Replace(base, "localhost:9092", "localhost:909200", 1),
			[]want{{"2:13", "kafka.brokers[0]", "the port must be a number from 1 to 65535"}}, ""},
		{"the same stage twice without names", base + "  - stage: json\n",
			[]want{{"8:5", "pipeline[1].name", `stage name "json" is already used (line 7)`}}, "name: "},
		{"the same name twice", base + "  - stage: filter\n    name: json\n    if: x\n",
			[]want{{"9:11", "pipeline[1].name", `stage name "json" is already used (line 7)`}}, ""},
		{"negative retries", base + "dead_letter: {retries: -2}\n",
			[]want{{"8:15", "dead_letter.retries", "-2 is not a number of retries (-1: none)"}}, ""},
		{"size that overflows", consumerWith("  buffer_bytes: 17179869184GiB\n"),
			[]want{{"5:17", "consumer.buffer_bytes", "is more than 8EiB"}}, ""},
		{"MB is ambiguous", consumerWith("  buffer_bytes: 64MB\n"),
			[]want{{"5:17", "consumer.buffer_bytes", `"MB" is ambiguous (10^6 or 2^20 bytes): write MiB`}}, ""},
		{"mib is written MiB", consumerWith("  buffer_bytes: 64mib\n"),
			[]want{{"5:17", "consumer.buffer_bytes", `unit "mib" is written MiB`}}, ""},
		{"a zero duration would mean the default", consumerWith("  session_timeout: 0s\n  commit_interval: 0\n"),
			[]want{{"5:3", "consumer.session_timeout", "0 would mean the default, 30s"}, {"6:3", "consumer.commit_interval", "0 would mean the default, 100ms"}},
			"leave the key out for the default"},
		{"every zero that would mean a default", `kafka:
  brokers: [localhost:9092]
  dial_timeout: 0s
  metadata_max_age: 0s
consumer:
  group: g
  topics: [orders]
  concurrency: 0
  fetch_concurrency: 0
  fetch_min_bytes: 0
  fetch_max_bytes: 0
  max_partition_fetch_bytes: 0
  buffer_bytes: 0
  fetch_max_wait: 0s
  processing_timeout: 0s
  heartbeat_interval: 0s
  rebalance_timeout: 0s
pipeline: []
dead_letter: {retries: 0, backoff: 0s}
shutdown_timeout: 0s
`, []want{{"3:3", "kafka.dial_timeout", "0 would mean the default, 10s"}, {"4:3", "kafka.metadata_max_age", "default, 5s"},
			{"10:3", "consumer.fetch_min_bytes", "default, 1B"},
			{"11:3", "consumer.fetch_max_bytes", "default, 50MiB"}, {"12:3", "consumer.max_partition_fetch_bytes", "default, 1MiB"},
			{"13:3", "consumer.buffer_bytes", "default, 16MiB"}, {"14:3", "consumer.fetch_max_wait", "default, 500ms"},
			{"15:3", "consumer.processing_timeout", "default, 1m0s"}, {"16:3", "consumer.heartbeat_interval", "default, 3s"},
			{"17:3", "consumer.rebalance_timeout", "default, 30s"}, {"19:15", "dead_letter.retries", "default, 3"},
			{"19:27", "dead_letter.backoff", "default, 100ms"}, {"20:1", "shutdown_timeout", "default, 30s"}}, ""},
		{"retries: 0 says how to ask for none", base + "dead_letter: {retries: 0}\n",
			[]want{{"8:15", "dead_letter.retries", "0 would mean the default, 3"}}, "-1 for no retries"},
		{"embedded zeros", "kafka:\n  embedded: {brokers: 0, partitions: 0, demo_producer: {topic: t, rate: 0, users: 0, malformed_every: 0}}\nconsumer: {group: g, topics: [t]}\npipeline: []\n",
			[]want{{"2:14", "kafka.embedded.brokers", "0 would mean the default, 1"}, {"2:26", "kafka.embedded.partitions", "default, 4"},
				{"2:67", "kafka.embedded.demo_producer.rate", "default, 10"}, {"2:76", "kafka.embedded.demo_producer.users", "default, 100"}}, ""},
		{"every: 0 next to another bad option", base + "  - stage: stdout\n    format: xml\n    every: 0\n",
			[]want{{"9:13", "pipeline[1].format", `"xml" is not one of text, json, value`}, {"10:12", "pipeline[1].every", "must be at least 1"}}, ""},
		{"every: 0 next to an unknown option", base + "  - stage: stdout\n    every: 0\n    colour: red\n",
			[]want{{"9:12", "pipeline[1].every", "must be at least 1"}, {"10:5", "pipeline[1].colour", `stage stdout has no option "colour"`}}, ""},
		{"reset alias", consumerWith("  auto_offset_reset: smallest\n"),
			[]want{{"5:22", "consumer.auto_offset_reset", `"smallest" is not one of earliest, latest, none`}}, "write earliest"},
		{"reset alias of latest", consumerWith("  auto_offset_reset: largest\n"),
			[]want{{"5:22", "consumer.auto_offset_reset", `"largest" is not one of`}}, "write latest"},
		{"empty reset", consumerWith("  auto_offset_reset: ''\n"),
			[]want{{"5:22", "consumer.auto_offset_reset", `"" is not one of`}}, "leave the key out"},
		{"topic name Kafka refuses", strings.Replace(base, "[orders]", "[orders, 'my orders']", 1),
			[]want{{"5:20", "consumer.topics[1]", `"my orders" is not a valid topic name`}}, ""},
		{"embedded topic name Kafka refuses", "kafka:\n  embedded: {topics: [a/b], demo_producer: {topic: 'x y'}}\nconsumer: {group: g, topics: [t]}\npipeline: []\n",
			[]want{{"2:23", "kafka.embedded.topics[0]", `"a/b" is not a valid topic name`}, {"2:45", "kafka.embedded.demo_producer.topic", `"x y" is not a valid topic name`}}, ""},
		{"TLS file that cannot be read", strings.Replace(base, "  brokers: [localhost:9092]", "  brokers: [localhost:9092]\n  tls: {ca_file: /nonexistent/ca.pem}", 1),
			[]want{{"3:9", "kafka.tls.ca_file", "no such file"}}, ""},
		{"TLS file that is a device", strings.Replace(base, "  brokers: [localhost:9092]", "  brokers: [localhost:9092]\n  tls: {cert_file: /dev/zero, key_file: /dev/zero}", 1),
			[]want{{"3:9", "kafka.tls.cert_file", "/dev/zero is not a regular file"}, {"3:31", "kafka.tls.key_file", "/dev/zero is not a regular file"}}, ""},
	})
}

// TestZeroThatMeansSomething: the keys where 0 is documented (concurrency:
// one per CPU; malformed_every: never) accept it, and a key without a
// value (written so, or from an empty variable) is the default.
func TestZeroThatMeansSomething(t *testing.T) {
	src := "kafka:\n  embedded: {brokers: , demo_producer: {topic: t, malformed_every: 0, rate: ${NOPE:-}}}\n" +
		"consumer: {group: g, topics: [t], concurrency: 0, commit_interval: ${NOPE:-}, buffer_bytes: }\n" +
		"dead_letter:\n  retries:\npipeline: []\n"
	cfg, errs := parse(t, src, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	if cfg.Pipeline.Consumer.Concurrency != 0 || cfg.Embedded.DemoProducer.MalformedEvery != 0 {
		t.Errorf("config %+v", cfg.Pipeline.Consumer)
	}
}

// TestByteOrderMark: a UTF-8 byte-order mark is not part of the first key,
// and positions are as an editor shows them.
func TestByteOrderMark(t *testing.T) {
	cfg, errs := parse(t, "\ufeff"+base, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	if cfg.Pipeline.Consumer.Group != "g" {
		t.Errorf("group %q", cfg.Pipeline.Consumer.Group)
	}
	_, errs = parse(t, "\ufeffkafak: {}\n"+base, nil)
	checkErrors(t, errs, []want{{"1:1", "kafak", "unknown key"}})
}

// TestTabs: a tab is named, not printed raw, with a hint to indent with
// spaces.
func TestTabs(t *testing.T) {
	_, errs := parse(t, "kafka:\n\tbrokers: [b:1]\n", nil)
	if len(errs) != 1 {
		t.Fatalf("errors %v", errs)
	}
	if e := errs[0]; strings.Contains(e.Error(), "\t") || !strings.Contains(e.Msg, "tab") || !strings.Contains(e.Hint, "spaces") || e.Line != 2 {
		t.Errorf("error %q (hint %q)", e.Msg, e.Hint)
	}
}

// TestResourceLimits: a file too large, a list too long, nesting too
// deep, and aliases that expand too far are refused quickly with a clear
// error, whatever else the file holds.
func TestResourceLimits(t *testing.T) {
	topics := func(n int) string {
		var b strings.Builder
		b.WriteString("kafka:\n  brokers: [b:1]\nconsumer:\n  group: g\n  topics:\n")
		for i := range n {
			b.WriteString("    - t" + strconv.Itoa(i) + "\n")
		}
		return b.String() + "pipeline: []\n"
	}
	// 12 stages share a list of 9,000 through an alias: 108,012 values.
	bomb := "kafka:\n  brokers: [b:1]\nconsumer: {group: g, topics: [t]}\npipeline:\n" +
		"  - {stage: json, name: j0, require: &r [" + strings.Repeat("a, ", 8999) + "a]}\n"
	for i := 1; i <= 12; i++ {
		bomb += "  - {stage: json, name: j" + strconv.Itoa(i) + ", require: *r}\n"
	}
	cases := []struct {
		name string
		src  string
		want []want
	}{
		{"file too large", topics(100000), []want{{"1:1", "", "the file is larger than 1MiB"}}},
		{"list too long", topics(10001), []want{{"6:5", "consumer.topics", "10001 entries; at most 10000"}}},
		{"flow nesting too deep", base + "x: " + strings.Repeat("[", 65) + strings.Repeat("]", 65) + "\n", []want{{"8:67", "", "nested more than 64 deep"}}},
		{"block nesting too deep", base + "x:\n  " + strings.Repeat("- ", 65) + "a\n", []want{{"9:129", "", "nested more than 64 deep"}}},
		{"aliases that expand too far", bomb, []want{{"17:39", "pipeline[12].require", "aliases expand to more than 100000 values"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			began := time.Now()
			_, errs := parse(t, c.src, nil)
			if d := time.Since(began); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			checkErrors(t, errs[:min(len(errs), 1)], c.want)
		})
	}
}

// TestLoadRefusesLargeFiles: Load stops reading past the limit, so a
// device or a huge file is refused without reading it whole.
func TestLoadRefusesLargeFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(p, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, testRegistry())
	if err == nil || !strings.Contains(err.Error(), "larger than 1MiB") {
		t.Errorf("Load: %v", err)
	}
}

// TestEmbeddedDataDir: a data_dir that is a file (or under one) is
// reported as run would find it, at its key.
func TestEmbeddedDataDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "sub")} {
		src := "kafka:\n  embedded:\n    data_dir: '" + dir + "'\nconsumer: {group: g, topics: [t]}\npipeline: []\n"
		_, errs := parse(t, src, nil)
		checkErrors(t, errs, []want{{"3:5", "kafka.embedded.data_dir", "is not a directory"}})
	}
	if _, errs := parse(t, "kafka:\n  embedded:\n    data_dir: '"+filepath.Join(t.TempDir(), "new", "dir")+"'\nconsumer: {group: g, topics: [t]}\npipeline: []\n", nil); errs != nil {
		t.Errorf("a directory still to create: %v", errs)
	}
}

// TestLineEndings: CRLF and lone CR end lines as LF does (as YAML says),
// and positions count them so.
func TestLineEndings(t *testing.T) {
	for _, eol := range []string{"\r\n", "\r"} {
		src := strings.ReplaceAll(base+"bogus: 1\n", "\n", eol)
		_, errs := parse(t, src, nil)
		checkErrors(t, errs, []want{{"8:1", "bogus", "unknown key"}})
		_, errs = parse(t, strings.ReplaceAll(strings.Replace(base, "[orders]", "[${NOPE}]", 1), "\n", eol), nil)
		checkErrors(t, errs, []want{{"5:12", "", "NOPE is not set"}})
	}
}
