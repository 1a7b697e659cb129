package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/offsetstore"
)

// interpEnv is the environment of the interpolation tests: values that
// would add keys, close quotes or break the file if they were pasted
// into the text.
var interpEnv = map[string]string{
	"NL":    "g\nauto_offset_reset: none",
	"NLI":   "g\n  auto_offset_reset: none\n",
	"QUOTE": `g", auto_offset_reset: "none`,
	"PW":    `p"w\d'#: [x] ${Y}`,
	"LIST":  "a, b",
	"HOST":  "kafka-1",
	"PORT":  "9093",
	"N":     "5",
	"T":     "true",
	"D":     "15s",
	"NULL":  "null",
	"EMPTY": "",
}

// TestInterpolateScalarsOnly: an environment value is only ever the
// value of the key it is written in, whatever it holds; references work
// in flow lists and inside longer strings, and unquoted values are typed
// as YAML types a plain value.
func TestInterpolateScalarsOnly(t *testing.T) {
	consumer := func(group string) string {
		return "kafka:\n  brokers: [localhost:9092]\nconsumer:\n  group: " + group + "\n  topics: [orders]\npipeline: []\n"
	}
	cases := []struct {
		name  string
		src   string
		check func(c *Config) any // the value to compare with want
		want  any
	}{
		{"newline in a plain value", consumer("${NL}"), group, interpEnv["NL"]},
		{"newline and indentation", consumer("${NLI}"), group, interpEnv["NLI"]},
		{"no key added", consumer("${NLI}"), reset, offsetstore.ResetEarliest},
		{"quote in a double-quoted value", consumer(`"${QUOTE}"`), group, interpEnv["QUOTE"]},
		{"quote in a single-quoted value", consumer(`'${QUOTE}'`), group, interpEnv["QUOTE"]},
		{"quote in a flow mapping", "kafka:\n  brokers: [localhost:9092]\nconsumer: {group: \"${QUOTE}\", topics: [orders]}\npipeline: []\n", group, interpEnv["QUOTE"]},
		{"password with YAML syntax, quoted", withSASL(`"${PW}"`), password, interpEnv["PW"]},
		{"password with YAML syntax, plain", withSASL(`${PW}`), password, interpEnv["PW"]},
		{"in a flow list, as part of an entry", strings.Replace(base, "[localhost:9092]", "[${HOST}:${PORT}, 'b:1']", 1), brokers, "kafka-1:9093,b:1"},
		{"a value is one entry", base + "  - stage: json\n    name: j2\n    require: [${LIST}, x]\n", require(1), []string{"a, b", "x"}},
		{"a default is one entry", base + "  - stage: json\n    name: j2\n    require: [${NOPE:-a, b: [c]}]\n", require(1), []string{"a, b: [c]"}},
		{"a default with a colon", consumer("${NOPE:-x: y}"), group, "x: y"},
		{"inside a longer string", consumer("pre-${HOST}-${PORT}.post"), group, "pre-kafka-1-9093.post"},
		{"null text stays text", consumer("${NULL}"), group, "null"},
		{"unquoted number", base + "dead_letter: {retries: ${N}}\n", retries, 5},
		{"unquoted bool", strings.Replace(base, "kafka:\n", "kafka:\n  create_topics: ${T}\n", 1), createTopics, true},
		{"unquoted duration", base + "shutdown_timeout: ${D}\n", shutdown, 15 * time.Second},
		{"empty is no value", strings.Replace(base, "kafka:\n", "kafka:\n  client_id: ${EMPTY}\n", 1), clientID, ""},
		{"escape", strings.Replace(base, "kafka:\n", "kafka:\n  client_id: $${HOST}$$HOST$5\n", 1), clientID, "${HOST}$$HOST$5"},
		{"comments are left alone", "# ${NOPE}\n" + strings.Replace(base, "kafka:\n", "kafka:\n  client_id: a # ${NOPE:-}} ${\n", 1), clientID, "a"},
		{"block scalar", base + "  - stage: filter\n    if: |\n      json.host == \"${HOST}\"\n", option(1, "if"), "json.host == \"kafka-1\"\n"},
		{"through an anchor", strings.Replace(base, "[orders]", "&t [${HOST}]", 1) + "  - stage: json\n    name: j2\n    require: *t\n", require(1), []string{"kafka-1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, errs := parse(t, c.src, interpEnv)
			if errs != nil {
				t.Fatal(errs)
			}
			if got := c.check(cfg); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func withSASL(password string) string {
	return strings.Replace(base, "  brokers: [localhost:9092]", "  brokers: [localhost:9092]\n  sasl:\n    mechanism: PLAIN\n    username: u\n    password: "+password, 1)
}

func group(c *Config) any        { return c.Pipeline.Consumer.Group }
func reset(c *Config) any        { return c.Pipeline.Consumer.AutoOffsetReset }
func password(c *Config) any     { return string(c.Pipeline.Kafka.SASL.Password) }
func brokers(c *Config) any      { return strings.Join(c.Pipeline.Kafka.Brokers, ",") }
func retries(c *Config) any      { return c.Pipeline.DeadLetter.Retries }
func shutdown(c *Config) any     { return c.Pipeline.ShutdownTimeout }
func clientID(c *Config) any     { return c.Pipeline.Kafka.ClientID }
func createTopics(c *Config) any { return c.Pipeline.Kafka.CreateTopics }
func option(i int, name string) func(c *Config) any {
	return func(c *Config) any { return c.Stages[i].Options[name] }
}
func require(i int) func(c *Config) any {
	return func(c *Config) any { l, _ := c.Stages[i].Options.StringList("require"); return slices.Clone(l) }
}

// TestInterpolateErrors: every missing variable and bad reference is
// reported at once, each at its own line:col in the file as written.
func TestInterpolateErrors(t *testing.T) {
	src := "kafka:\n  brokers: [${BROKER}]\n  sasl:\n    username: ${USER_NAME:-app}\n    password: \"${KAFKA_PASSWORD}\"\n" +
		"consumer: {group: ${GROUP}, topics: [${1BAD}, ${OK}]}\nlog:\n  level: é${UNCLOSED\n  format: ${OK}${ALSO_UNSET}\n" +
		"pipeline: []\n"
	_, errs := parse(t, src, map[string]string{"OK": "x"})
	checkErrors(t, errs, []want{
		{"2:13", "", "environment variable BROKER is not set"},
		{"5:16", "", "environment variable KAFKA_PASSWORD is not set"},
		{"6:19", "", "environment variable GROUP is not set"},
		{"6:38", "", "bad reference ${1BAD}"},
		{"8:11", "", "unterminated ${"},
		{"9:16", "", "environment variable ALSO_UNSET is not set"},
	})
	if !strings.Contains(errs[0].Hint, "${BROKER:-value}") {
		t.Errorf("hint %q", errs[0].Hint)
	}
}

// TestInterpolateWhereNot: references are replaced in values only; in a
// key they are an error (a value cannot add a key), and the file may not
// hold the characters the loader keeps for itself.
func TestInterpolateWhereNot(t *testing.T) {
	cases := []struct {
		name, src string
		want      []want
	}{
		{"in a key", base + "${KEY}: 1\n", []want{{"8:1", "", "${KEY} is in a key"}}},
		{"in a nested key", strings.Replace(base, "  group: g", "  group: g\n  x${KEY}: 1", 1), []want{{"5:4", "", "${KEY} is in a key"}}},
		{"private-use character", base + "log: {level: \"\U000F0001\"}\n", []want{{"8:15", "", "character U+F0001 is not allowed"}}},
		{"invalid UTF-8", base + "log: {level: \"\xff\"}\n", []want{{"8:15", "", "not valid UTF-8"}}},
		{"too many references", base + "log: {level: \"" + strings.Repeat("${OK}", 10001) + "\"}\n",
			[]want{{"8:50015", "", "more than 10000 ${...} references"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := parse(t, c.src, map[string]string{"KEY": "k", "OK": "x"})
			checkErrors(t, errs, c.want)
		})
	}
}

// TestPositionsAfterInterpolation: errors found after interpolation are
// reported at the position in the file as written, whatever the values
// hold (newlines included).
func TestPositionsAfterInterpolation(t *testing.T) {
	src := "kafka:\n  brokers: [${B}, ${B}, x]\nconsumer:\n  group: ${G}\n  topics: [\"${T}\", \"\"]\n  ordering: ${O}\npipeline: [{stage: ${S}}]\n"
	env := map[string]string{"B": "a-rather-long-host-name:9092", "G": "g\n\n\nx", "T": "t", "O": "sideways", "S": "filtre"}
	_, errs := parse(t, src, env)
	checkErrors(t, errs, []want{
		{"2:25", "kafka.brokers[2]", `"x" is not host:port`},
		{"5:20", "consumer.topics[1]", "empty topic name"},
		{"6:3", "consumer.ordering", `"sideways" is not partition or key`},
		{"7:20", "pipeline[0].stage", `unknown stage "filtre"`},
	})
}
