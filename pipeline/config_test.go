package pipeline_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/pipeline"
)

func validConfig() pipeline.Config {
	return pipeline.Config{
		Kafka:    pipeline.KafkaConfig{Brokers: []string{"localhost:9092"}},
		Consumer: pipeline.ConsumerConfig{Group: "g", Topics: []string{"t"}},
	}
}

// TestValidate: every mistake is reported, each naming its key.
func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*pipeline.Config)
		wants []string // substrings of the error, one per problem
	}{
		{name: "valid", edit: func(*pipeline.Config) {}},
		{name: "nothing set", edit: func(c *pipeline.Config) { *c = pipeline.Config{} },
			wants: []string{"kafka.brokers:", "consumer.group:", "consumer.topics:"}},
		{name: "broker not host:port", edit: func(c *pipeline.Config) { c.Kafka.Brokers = []string{"localhost"} },
			wants: []string{`kafka.brokers[0]: "localhost" is not host:port`}},
		{name: "bad sasl", edit: func(c *pipeline.Config) { c.Kafka.SASL = &pipeline.SASL{Mechanism: "GSSAPI"} },
			wants: []string{"kafka.sasl.mechanism:", "kafka.sasl.username:"}},
		{name: "cert without key", edit: func(c *pipeline.Config) { c.Kafka.TLS = &pipeline.TLS{CertFile: "c.pem"} },
			wants: []string{"kafka.tls: cert_file and key_file go together"}},
		{name: "bad ordering", edit: func(c *pipeline.Config) { c.Consumer.Ordering = "offset" },
			wants: []string{`consumer.ordering: "offset" is not partition or key`}},
		{name: "budget below a partition fetch", edit: func(c *pipeline.Config) {
			c.Consumer.BufferBytes = 1 * pipeline.KiB
		}, wants: []string{"consumer.buffer_bytes:"}},
		{name: "request size over 32 bits", edit: func(c *pipeline.Config) {
			c.Consumer.FetchMaxBytes, c.Consumer.BufferBytes = 4*pipeline.GiB, 8*pipeline.GiB
		}, wants: []string{"consumer.fetch_max_bytes: 4GiB is outside"}},
		{name: "heartbeat not below session", edit: func(c *pipeline.Config) {
			c.Consumer.HeartbeatInterval, c.Consumer.SessionTimeout = time.Minute, time.Second
		}, wants: []string{"consumer.heartbeat_interval:"}},
		{name: "negative duration", edit: func(c *pipeline.Config) { c.ShutdownTimeout = -time.Second },
			wants: []string{"shutdown_timeout: must not be negative"}},
		{name: "dead-letter topic policy without topic", edit: func(c *pipeline.Config) {
			c.DeadLetter.Policy = pipeline.DeadLetterTopic
		}, wants: []string{"dead_letter.topic: policy topic needs a topic name"}},
		{name: "dead-letter topic consumed", edit: func(c *pipeline.Config) { c.DeadLetter.Topic = "t" },
			wants: []string{`dead_letter.topic: "t" is also consumed`}},
		{name: "bad dead-letter policy", edit: func(c *pipeline.Config) { c.DeadLetter.Policy = "drop" },
			wants: []string{`dead_letter.policy: "drop" is not topic or stop`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.edit(&c)
			err := c.Validate()
			if len(tt.wants) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted it; want %q", tt.wants)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if got := strings.Count(err.Error(), "\n") + 1; got != len(tt.wants) {
				t.Errorf("%d problems reported, want %d: %v", got, len(tt.wants), err)
			}
		})
	}
}

// TestDefaults: the zero values of the optional fields become the
// documented defaults.
func TestDefaults(t *testing.T) {
	p, err := pipeline.New(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config()
	if c.Consumer.CommitInterval != 100*time.Millisecond || c.Consumer.ProcessingTimeout != time.Minute || c.Consumer.BufferBytes != 64*pipeline.MiB ||
		c.Consumer.Ordering != pipeline.OrderByPartition || c.DeadLetter.Policy != pipeline.DeadLetterStop ||
		c.DeadLetter.Retries != 3 || c.ShutdownTimeout != 30*time.Second || c.Consumer.FetchConcurrency != 2 {
		t.Fatalf("defaults: %+v", c)
	}
	withTopic := validConfig()
	withTopic.DeadLetter.Topic = "dlq"
	if p, _ := pipeline.New(withTopic); p.Config().DeadLetter.Policy != pipeline.DeadLetterTopic {
		t.Fatal("a dead-letter topic does not make the policy topic")
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want pipeline.ByteSize
		err  bool
	}{
		{"512", 512, false}, {"64KiB", 64 << 10, false}, {"1MiB", 1 << 20, false}, {"2 GB", 2 << 30, false},
		{"10kb", 10 << 10, false}, {"1.5MiB", 0, true}, {"-1", 0, true}, {"12 parsecs", 0, true}, {"", 0, true},
	}
	for _, tt := range tests {
		var b pipeline.ByteSize
		err := b.UnmarshalText([]byte(tt.in))
		if (err != nil) != tt.err || (!tt.err && b != tt.want) {
			t.Errorf("%q: %v, %v; want %v (error %v)", tt.in, b, err, tt.want, tt.err)
		}
	}
	if s := (64 * pipeline.MiB).String(); s != "64MiB" {
		t.Errorf("String: %s", s)
	}
}

// TestSecretNeverPrints: a password does not show through fmt verbs,
// marshalling, or a config printed whole.
func TestSecretNeverPrints(t *testing.T) {
	c := validConfig()
	c.Kafka.SASL = &pipeline.SASL{Mechanism: "PLAIN", Username: "u", Password: "hunter2"}
	js, _ := json.Marshal(c)
	for _, out := range []string{
		fmt.Sprint(c.Kafka.SASL.Password), fmt.Sprintf("%v %+v %#v %s %q", c, c, c.Kafka.SASL, c.Kafka.SASL.Password, c.Kafka.SASL.Password),
		string(js),
	} {
		if strings.Contains(out, "hunter2") {
			t.Fatalf("secret printed: %s", out)
		}
	}
	if string(c.Kafka.SASL.Password) != "hunter2" {
		t.Fatal("the value itself was lost")
	}
}
