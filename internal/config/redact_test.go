package config_test

import (
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/config"
	"github.com/fencepost-dev/fencepost/internal/logging/redacttest"
)

// TestSecretRedaction: a secret from the environment is hidden in the
// errors about the file whatever form they show it in (quoted with
// escapes, a token of it, with a tab), while the errors still name the
// key. A secret is the value of a secret field (and of the variables
// used there), or of a variable named like one.
func TestSecretRedaction(t *testing.T) {
	const head = "kafka:\n  brokers: [\"localhost:9092\"]\n"
	const consumer = "consumer: {group: g, topics: [orders]}\n"
	const sasl = "  sasl: {mechanism: PLAIN, username: u, password: \"${PW}\"}\n"
	cases := []struct {
		name, env, secret, src string
		keys                   []string // keys the errors name
	}{
		{"quoted broker, variable named like a secret", "KAFKA_PASSWORD", `pa"ss`,
			"kafka:\n  brokers: [\"${KAFKA_PASSWORD}\"]\n" + consumer + "pipeline: []\n", []string{"kafka.brokers[0]"}},
		{"quoted broker, secret field", "PW", `pa"ss`,
			"kafka:\n  brokers: [\"${PW}\"]\n" + sasl + consumer + "pipeline: []\n", []string{"kafka.brokers[0]"}},
		{"broker with a port", "PW", `pa"ss\word`,
			"kafka:\n  brokers: [\"${PW}:x\"]\n" + sasl + consumer + "pipeline: []\n", []string{"kafka.brokers[0]"}},
		{"topic", "PW", `pa"ss`,
			head + sasl + "consumer: {group: g, topics: [\"${PW}\"]}\npipeline: []\n", []string{"consumer.topics[0]"}},
		{"dead-letter topic", "PW", "ab\x01cd",
			head + sasl + consumer + "dead_letter: {topic: \"${PW}\"}\npipeline: []\n", []string{"dead_letter.topic"}},
		{"http address", "PW", `pa"ss`,
			head + sasl + consumer + "http: {address: \"${PW}\"}\npipeline: []\n", []string{"http.address"}},
		{"http address with a port", "PW", "pä\"ss",
			head + sasl + consumer + "http: {address: \"${PW}:99999\"}\npipeline: []\n", []string{"http.address"}},
		{"tab in an expression", "PW", "hunter2\ts3cret",
			head + sasl + consumer + "pipeline:\n  - stage: filter\n    if: \"${PW}\"\n", []string{"pipeline[0].if"}},
		{"tokens of an expression", "API_TOKEN", "hunter2 s3cret-t0ken(",
			head + consumer + "pipeline:\n  - stage: map\n    value: \"${API_TOKEN}\"\n", []string{"pipeline[0].value"}},
		{"newline and unicode", "DB_SECRET", "line1\nlïne2\\\"",
			head + consumer + "log: {level: \"${DB_SECRET}\"}\npipeline: []\n", []string{"log.level"}},
		{"duration", "PW", "10 s\"x",
			head + sasl + consumer + "shutdown_timeout: \"${PW}\"\npipeline: []\n", []string{"shutdown_timeout"}},
		{"reset policy", "PW", "earliest!'",
			head + sasl + "consumer: {group: g, topics: [t], auto_offset_reset: \"${PW}\"}\npipeline: []\n", []string{"consumer.auto_offset_reset"}},
		{"mechanism", "KAFKA_PASSWORD", "PLAIN\"x",
			head + "  sasl: {mechanism: \"${KAFKA_PASSWORD}\", username: u}\n" + consumer + "pipeline: []\n", []string{"kafka.sasl.mechanism"}},
		{"stage name", "PW", "stage\"1",
			head + sasl + consumer + "pipeline:\n  - {stage: json, name: \"${PW}\"}\n  - {stage: json, name: \"${PW}\"}\n", []string{"pipeline[1].name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := func(name string) (string, bool) { return c.secret, name == c.env }
			_, err := config.Loader{LookupEnv: env}.Parse("s.yaml", []byte(c.src))
			if err == nil {
				t.Fatal("accepted")
			}
			out := err.Error()
			if leak := redacttest.Leak(out, c.secret); leak != "" {
				t.Errorf("the errors show %q of the secret:\n%s", leak, out)
			}
			for _, k := range c.keys {
				if !strings.Contains(out, "s.yaml:") || !strings.Contains(out, ": "+k+": ") {
					t.Errorf("the errors do not name %s:\n%s", k, out)
				}
			}
		})
	}
}

// TestSecretNotHiddenElsewhere: a value from a variable not named like
// a secret and not used in a secret field is shown, as the errors need.
func TestSecretNotHiddenElsewhere(t *testing.T) {
	src := "kafka:\n  brokers: [\"${BROKER}\"]\nconsumer: {group: g, topics: [orders]}\npipeline: []\n"
	env := func(name string) (string, bool) { return "broker-1", name == "BROKER" }
	_, err := config.Loader{LookupEnv: env}.Parse("s.yaml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), `"broker-1" is not host:port`) {
		t.Errorf("got %v", err)
	}
}

// TestLoopBuiltinProduce: the built-in produce stage writing to a
// consumed topic is refused at its topic option (the topic comes from the
// producer it asks for when built), unless the entry allows it.
func TestLoopBuiltinProduce(t *testing.T) {
	const src = "kafka: {brokers: [\"localhost:9092\"]}\nconsumer: {group: g, topics: [events]}\npipeline:\n" +
		"  - stage: produce\n    topic: events\n    value: 'value'\n"
	_, err := config.Loader{}.Parse("loop.yaml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), `loop.yaml:5:12: pipeline[0].topic: stage produce writes to "events", which the pipeline consumes`) {
		t.Errorf("got %v", err)
	}
	cfg, err := config.Loader{}.Parse("loop.yaml", []byte(src+"    allow_loop: true\n"))
	if err != nil || len(cfg.Stages) != 1 || !cfg.Stages[0].AllowLoop || strings.Join(cfg.Stages[0].Outputs, ",") != "events" {
		t.Errorf("with allow_loop: %v %+v", err, cfg)
	}
}
