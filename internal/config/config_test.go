package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// base is a valid configuration that cases extend or break.
const base = `kafka:
  brokers: [localhost:9092]
consumer:
  group: g
  topics: [orders]
pipeline:
  - stage: json
`

func envOf(vars map[string]string) LookupFunc {
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

func parse(t *testing.T, src string, env map[string]string) (*Config, Errors) {
	t.Helper()
	cfg, err := Loader{Registry: testRegistry(), LookupEnv: envOf(env)}.Parse("test.yaml", []byte(src))
	if err == nil {
		return cfg, nil
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse returned %T %v, want Errors", err, err)
	}
	if cfg != nil {
		t.Fatal("Parse returned a Config with errors")
	}
	return nil, es
}

// want is an expected error: "line:col", its key, and text its message
// holds.
type want struct {
	pos, key, msg string
}

func checkErrors(t *testing.T, got Errors, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d errors, want %d:\n%v", len(got), len(wants), got)
	}
	for i, w := range wants {
		e := got[i]
		if pos := fmt.Sprintf("%d:%d", e.Line, e.Col); pos != w.pos || e.Key != w.key || !strings.Contains(e.Msg, w.msg) {
			t.Errorf("error %d: got %s %q %q, want %s %q containing %q", i, pos, e.Key, e.Msg, w.pos, w.key, w.msg)
		}
		if e.Hint == "" {
			t.Errorf("error %d (%s) has no hint", i, e.Msg)
		}
		if e.File != "test.yaml" || !strings.HasPrefix(e.Error(), "test.yaml:"+w.pos+": ") {
			t.Errorf("error %d formats as %q, want it to start with test.yaml:%s", i, e.Error(), w.pos)
		}
	}
}

// TestErrorClasses: each class of mistake is reported at its position
// with its message (and a hint where one helps).
func TestErrorClasses(t *testing.T) {
	checkCases(t, []errorCase{
		{"unknown top-level key", base + "consumr: {}\n",
			[]want{{"8:1", "consumr", "unknown key"}}, `did you mean "consumer"?`},
		{"unknown nested key", strings.Replace(base, "  group: g", "  group: g\n  gruop: h", 1),
			[]want{{"5:3", "consumer.gruop", "unknown key"}}, `did you mean "group"?`},
		{"list where a string is wanted", strings.Replace(base, "group: g", "group: [g]", 1),
			[]want{{"4:10", "consumer.group", "want a string, found a list"}}, ""},
		{"string where a list is wanted", strings.Replace(base, "topics: [orders]", "topics: orders", 1),
			[]want{{"5:11", "consumer.topics", "want a list, found a string"}}, "[a, b]"},
		{"duration without a unit", base + "shutdown_timeout: 30\n",
			[]want{{"8:19", "shutdown_timeout", "want a duration, found a number"}}, "500ms"},
		{"bad duration", base + "shutdown_timeout: soon\n",
			[]want{{"8:19", "shutdown_timeout", `"soon" is not a duration`}}, ""},
		{"bad size", strings.Replace(base, "  group: g", "  group: g\n  buffer_bytes: 12XB", 1),
			[]want{{"5:17", "consumer.buffer_bytes", `unknown unit "XB"`}}, "64KiB"},
		{"bad reset policy", strings.Replace(base, "  group: g", "  group: g\n  auto_offset_reset: oldest", 1),
			[]want{{"5:22", "consumer.auto_offset_reset", "not one of earliest, latest, none"}}, ""},
		{"bool wanted", strings.Replace(base, "  group: g", "  group: g\n  read_committed: 1", 1),
			[]want{{"5:19", "consumer.read_committed", "want true or false, found a number"}}, ""},
		{"section of the wrong type", base + "dead_letter: orders.dlq\n",
			[]want{{"8:14", "dead_letter", "want a mapping, found a string"}}, ""},
		{"duplicate key", base + "log: {level: info}\nlog: {level: debug}\n",
			[]want{{"9:1", "log", "duplicate key (first at line 8)"}}, ""},
		{"unknown stage", base + "  - stage: filtre\n",
			[]want{{"8:12", "pipeline[1].stage", `unknown stage "filtre"`}}, `did you mean "filter"? registered stages: broken, counter, filter, json, map, produce, stdout`},
		{"entry without a stage", base + "  - if: x\n",
			[]want{{"8:5", "pipeline[1].stage", "no stage key"}}, ""},
		{"entry that is not a mapping", base + "  - filter\n",
			[]want{{"8:5", "pipeline[1]", "want a stage entry (a mapping), found a string"}}, ""},
		{"unknown option", base + "  - stage: filter\n    if: a\n    iff: b\n",
			[]want{{"10:5", "pipeline[1].iff", `stage filter has no option "iff"`}}, `did you mean "if"?`},
		{"reserved key used as option", base + "  - stage: filter\n    if: a\n    name: x\n    name: y\n",
			[]want{{"11:5", "pipeline[1].name", "duplicate key"}}, ""},
		{"missing required option", base + "  - stage: filter\n",
			[]want{{"8:12", "pipeline[1]", `stage filter needs option "if" (expr)`}}, "the condition"},
		{"bad enum", base + "  - stage: stdout\n    format: xml\n",
			[]want{{"9:13", "pipeline[1].format", `"xml" is not one of text, json, value`}}, ""},
		{"option of the wrong type", base + "  - stage: stdout\n    every: often\n",
			[]want{{"9:12", "pipeline[1].every", "want a whole number, found a string"}}, ""},
		{"duration option", base + "  - stage: produce\n    topic: out\n    timeout: 5\n",
			[]want{{"10:14", "pipeline[1].timeout", "want a duration"}}, ""},
		{"map option", base + "  - stage: map\n    headers: [a]\n",
			[]want{{"9:14", "pipeline[1].headers", "want a mapping of names to strings, found a list"}}, ""},
		{"option without a value", base + "  - stage: filter\n    if:\n",
			[]want{{"9:5", "pipeline[1].if", "no value"}}, ""},
		{"expression error from the factory", base + "  - stage: filter\n    if: (json.amount > 3\n",
			[]want{{"9:9", "pipeline[1].if", `stage filter: option "if": unclosed (`}}, "the condition"},
		{"option error from the factory on a default", base + "  - stage: stdout\n    format: json\n    every: 0\n",
			[]want{{"10:12", "pipeline[1].every", "must be at least 1"}}, ""},
		{"other error from the factory", base + "  - stage: map\n",
			[]want{{"8:12", "pipeline[1]", "stage map: set at least one of value, key, headers"}}, "stages command"},
		{"factory that panics", base + "  - stage: broken\n",
			[]want{{"8:12", "pipeline[1]", "panicked: boom"}}, "bug in the stage"},
		{"duplicate stage names", base + "  - stage: json\n    name: parse\n  - stage: json\n    name: parse\n",
			[]want{{"11:11", "pipeline[2].name", `stage name "parse" is already used (line 8)`}}, ""},
		{"no pipeline", strings.TrimSuffix(base, "pipeline:\n  - stage: json\n"),
			[]want{{"1:1", "pipeline", "no pipeline"}}, "pipeline: []"},
		{"validation: missing key reported at its section", strings.Replace(base, "  group: g\n", "", 1),
			[]want{{"3:1", "consumer.group", "a consumer group id is required"}}, "group: order-enricher"},
		{"validation: missing section reported at the top", "kafka:\n  brokers: [b:1]\npipeline: []\n",
			[]want{{"1:1", "consumer.group", "required"}, {"1:1", "consumer.topics", "at least one topic"}}, ""},
		{"validation: list item", strings.Replace(base, "[localhost:9092]", "[localhost:9092, nope]", 1),
			[]want{{"2:29", "kafka.brokers[1]", `"nope" is not host:port`}}, "localhost:9092"},
		{"validation: present key", base + "dead_letter:\n  topic: orders\n",
			[]want{{"9:3", "dead_letter.topic", `"orders" is also consumed`}}, ".dlq"},
		{"validation: sasl", strings.Replace(base, "  brokers: [localhost:9092]", "  brokers: [localhost:9092]\n  sasl: {mechanism: PLAN, password: hunter2}", 1),
			[]want{{"3:3", "kafka.sasl.username", "required with SASL"}, {"3:10", "kafka.sasl.mechanism", `"PLAN" is not PLAIN`}}, ""},
		{"no duplicate report after a type error", strings.Replace(base, "group: g", "group: {id: g}", 1),
			[]want{{"4:10", "consumer.group", "want a string, found a mapping"}}, ""},
		{"http address", base + "http: {address: nope}\n",
			[]want{{"8:8", "http.address", `"nope" is not host:port`}}, "off"},
		{"http debug without an address", base + "http: {address: off, debug: true}\n",
			[]want{{"8:22", "http.debug", "served on http.address, which is off"}}, "set http.address"},
		{"log level", base + "log:\n  level: loud\n  format: xml\n",
			[]want{{"9:3", "log.level", `"loud" is not one of debug, info, warn, error`}, {"10:3", "log.format", "console, json"}}, ""},
		{"embedded with brokers", strings.Replace(base, "  brokers: [localhost:9092]", "  brokers: [localhost:9092]\n  embedded: {partitions: 0, demo_producer: {rate: -1}}", 1),
			[]want{{"2:3", "kafka.brokers", "must be empty with kafka.embedded"}, {"3:14", "kafka.embedded.partitions", "0 would mean the default, 4"},
				{"3:29", "kafka.embedded.demo_producer.topic", "needs a topic"},
				{"3:45", "kafka.embedded.demo_producer.rate", "-1 is out of range"}}, "remove kafka.brokers"},
		{"syntax error", base + "log: {level: info\n",
			[]want{{"8:6", "", "YAML syntax"}}, "indentation"},
		{"empty file", "# nothing\n", []want{{"1:1", "", "empty"}}, ""},
		{"not a mapping", "- a\n- b\n", []want{{"1:1", "", "must be a mapping"}}, ""},
		{"alias to no anchor", base + "shutdown_timeout: *t\n", []want{{"8:19", "shutdown_timeout", "names no anchor"}}, ""},
	})
}

// errorCase is a file and the errors it gives.
type errorCase struct {
	name string
	src  string
	want []want
	hint string // text the first error's hint holds
}

// checkCases parses each case's file and checks its errors.
func checkCases(t *testing.T, cases []errorCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := parse(t, c.src, nil)
			checkErrors(t, errs, c.want)
			if c.hint != "" && !strings.Contains(errs[0].Hint, c.hint) {
				t.Errorf("hint %q does not contain %q", errs[0].Hint, c.hint)
			}
		})
	}
}

// TestAllErrorsAtOnce: one file with many mistakes reports every one, in
// file order.
func TestAllErrorsAtOnce(t *testing.T) {
	src := `kafka:
  brokers: [localhost:9092]
  dial_timeout: 5
consumer:
  topics: [orders]
  ordering: random
pipeline:
  - stage: filtre
  - stage: filter
    if: ((x)
  - stage: stdout
    format: yaml
dead_letter: {retries: lots}
`
	_, errs := parse(t, src, nil)
	checkErrors(t, errs, []want{
		{"3:17", "kafka.dial_timeout", "want a duration"},
		{"4:1", "consumer.group", "required"},
		{"6:3", "consumer.ordering", `"random" is not partition or key`},
		{"8:12", "pipeline[0].stage", "unknown stage"},
		{"10:9", "pipeline[1].if", "unclosed ("},
		{"12:13", "pipeline[2].format", "not one of"},
		{"13:24", "dead_letter.retries", "want a whole number"},
	})
}

// TestValidConfig: a full file loads with every section and the
// defaults the loader owns (http address, log, embedded, stage options).
func TestValidConfig(t *testing.T) {
	src := `kafka:
  embedded:
    topics: [purchases]
    demo_producer: {topic: events}
consumer:
  group: quickstart
  topics: [events]
  ordering: key
  concurrency: 8
  buffer_bytes: 16MiB
  commit_interval: 2s
  auto_offset_reset: latest
pipeline:
  - stage: json
    require: [type, user]
  - stage: filter
    if: json.type == "purchase"
  - stage: json
    name: json_again
  - stage: stdout
    name: sample
    every: 10
  - stage: map
    headers: {source: '"demo"'}
dead_letter: {topic: events.dlq, retries: -1}
shutdown_timeout: 10s
`
	cfg, errs := parse(t, src, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	pc := cfg.Pipeline
	if pc.Consumer.Group != "quickstart" || pc.Consumer.Ordering != pipeline.OrderByKey || pc.Consumer.Concurrency != 8 ||
		pc.Consumer.BufferBytes != 16*pipeline.MiB || pc.Consumer.CommitInterval != 2*time.Second ||
		pc.Consumer.AutoOffsetReset.String() != "latest" || pc.DeadLetter.Retries != -1 || pc.ShutdownTimeout != 10*time.Second {
		t.Errorf("pipeline config %+v", pc)
	}
	if len(pc.Kafka.Brokers) != 0 {
		t.Errorf("embedded: brokers %v, want empty until start", pc.Kafka.Brokers)
	}
	e := cfg.Embedded
	if e == nil || e.Brokers != 1 || e.Partitions != 4 || e.DemoProducer.Rate != 10 || e.DemoProducer.Users != 100 {
		t.Errorf("embedded %+v, want defaults applied", e)
	}
	if got := strings.Join(cfg.EmbeddedTopics(), ","); got != "purchases,events,events.dlq" {
		t.Errorf("embedded topics %s", got)
	}
	if cfg.HTTP.Address != DefaultHTTPAddress || cfg.Log.Level != "info" || cfg.Log.Format != "console" {
		t.Errorf("http %+v log %+v, want defaults", cfg.HTTP, cfg.Log)
	}
	var names []string
	for _, s := range cfg.Stages {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "json,filter,json_again,sample,map" {
		t.Errorf("stage names %s", got)
	}
	require, _ := cfg.Stages[0].Options.StringList("require")
	every, _ := cfg.Stages[3].Options.Int("every")
	format, _ := cfg.Stages[3].Options.String("format")
	headers, _ := cfg.Stages[4].Options.StringMap("headers")
	if len(require) < 2 || require[1] != "user" || every != 10 || format != "text" || headers["source"] != `"demo"` {
		t.Errorf("options not decoded or defaults not applied: %+v", cfg.Stages)
	}
	if cfg.Stages[1].Pos != (Position{16, 5}) {
		t.Errorf("stage position %v, want 16:5", cfg.Stages[1].Pos)
	}
}

// TestEmptySections: a section written without a value is enabled with
// its defaults.
func TestEmptySections(t *testing.T) {
	src := "kafka:\n  embedded:\n  tls:\nconsumer: {group: g, topics: [t]}\npipeline: []\n"
	_, errs := parse(t, src, nil)
	checkErrors(t, errs, []want{{"2:3", "kafka.embedded", "neither TLS nor SASL"}})
	cfg, errs := parse(t, "kafka:\n  embedded:\nconsumer: {group: g, topics: [t]}\npipeline: []\n", nil)
	if errs != nil {
		t.Fatal(errs)
	}
	if cfg.Embedded == nil || cfg.Embedded.Brokers != 1 || cfg.Pipeline.Kafka.TLS != nil {
		t.Errorf("embedded %+v tls %+v", cfg.Embedded, cfg.Pipeline.Kafka.TLS)
	}
}

// TestHTTPAddress: absent means the default; "" and off disable.
func TestHTTPAddress(t *testing.T) {
	for _, c := range []struct{ http, want string }{
		{"", DefaultHTTPAddress},
		{"http: {address: ''}\n", ""},
		{"http: {address: off}\n", ""},
		{"http: {address: OFF}\n", ""},
		{"http: {address: ':9000'}\n", ":9000"},
	} {
		cfg, errs := parse(t, base+c.http, nil)
		if errs != nil {
			t.Fatal(errs)
		}
		if cfg.HTTP.Address != c.want {
			t.Errorf("%q: address %q, want %q", c.http, cfg.HTTP.Address, c.want)
		}
	}
}

// TestSecretsNeverPrinted: a password does not appear in errors about
// the file, nor when the loaded configuration is printed.
func TestSecretsNeverPrinted(t *testing.T) {
	const pw = "hunter2-s3cret"
	env := map[string]string{"PW": pw}
	bad := strings.Replace(base, "  brokers: [localhost:9092]",
		"  brokers: [localhost:9092]\n  sasl: {mechanism: PLAIN, password: \"${PW}\", username: [u]}\n  dial_timeout: \"${PW}\"", 1)
	_, errs := parse(t, bad, env)
	if len(errs) == 0 {
		t.Fatal("want errors")
	}
	good := strings.Replace(base, "  brokers: [localhost:9092]", "  brokers: [localhost:9092]\n  sasl: {mechanism: PLAIN, username: u, password: \"${PW}\"}", 1)
	cfg, errs2 := parse(t, good, env)
	if errs2 != nil {
		t.Fatal(errs2)
	}
	if string(cfg.Pipeline.Kafka.SASL.Password) != pw {
		t.Fatalf("password not loaded")
	}
	for _, out := range []string{errs.Error(), fmt.Sprintf("%v %+v %#v", cfg, cfg.Pipeline, *cfg.Pipeline.Kafka.SASL)} {
		if strings.Contains(out, pw) {
			t.Errorf("secret printed: %s", out)
		}
	}
	if !strings.Contains(errs.Error(), "kafka.dial_timeout") {
		t.Errorf("errors %v lack the dial_timeout problem", errs)
	}
}

// TestLoadFile: Load reads a file and names it in errors; a missing file
// is a plain error.
func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(p, []byte(base+"bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, testRegistry())
	if err == nil || !strings.HasPrefix(err.Error(), p+":8:1: bogus: unknown key") {
		t.Errorf("Load: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "absent.yaml"), testRegistry()); err == nil || !strings.Contains(err.Error(), "read configuration") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

// TestLoops: a stage writing to a consumed topic, and a topic consumed
// twice, are refused at their key and line; allow_loop: true on the
// entry allows the first.
func TestLoops(t *testing.T) {
	const head = "kafka:\n  brokers: [localhost:9092]\nconsumer:\n  group: g\n  topics: [orders, audit]\npipeline:\n"
	cases := []struct {
		name, src string
		wants     []want
	}{
		{"produce to a consumed topic", head + "  - stage: produce\n    topic: audit\n",
			[]want{{"8:12", "pipeline[0].topic", `stage produce writes to "audit", which the pipeline consumes (consumer.topics[1])`}}},
		{"allowed", head + "  - stage: produce\n    topic: orders\n    allow_loop: true\n", nil},
		{"allowed, flow style", head + "  - {stage: produce, allow_loop: true, topic: orders}\n", nil},
		{"allow_loop false", head + "  - {stage: produce, allow_loop: false, topic: orders}\n",
			[]want{{"7:48", "pipeline[0].topic", `writes to "orders"`}}},
		{"allow_loop not a bool", head + "  - {stage: produce, allow_loop: yes please, topic: orders}\n",
			[]want{{"7:34", "pipeline[0].allow_loop", "want true or false, found a string"},
				{"7:53", "pipeline[0].topic", `writes to "orders"`}}},
		{"produce elsewhere", head + "  - {stage: produce, topic: orders-enriched}\n", nil},
		{"topic consumed twice", strings.Replace(head, "[orders, audit]", "[orders, audit, orders]", 1) + "  - stage: json\n",
			[]want{{"5:27", "consumer.topics[2]", `"orders" is listed twice (also consumer.topics[0])`}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, errs := parse(t, c.src, nil)
			if len(c.wants) == 0 {
				if errs != nil {
					t.Fatal(errs)
				}
				if s := cfg.Stages[0]; s.Spec.Name == "produce" && (len(s.Outputs) != 1 || s.AllowLoop != strings.Contains(c.src, "allow_loop: true")) {
					t.Errorf("stage %+v", s)
				}
				return
			}
			checkErrors(t, errs, c.wants)
		})
	}
}
