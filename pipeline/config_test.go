package pipeline_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/internal/partitioner"
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
		{name: "batch limit below 1KiB", edit: func(c *pipeline.Config) { c.Kafka.MaxBatchBytes = 512 },
			wants: []string{"kafka.max_batch_bytes: 512B is outside 1KiB..1GiB"}},
		{name: "batch limit over 1GiB", edit: func(c *pipeline.Config) { c.Kafka.MaxBatchBytes = 2 * pipeline.GiB },
			wants: []string{"kafka.max_batch_bytes: 2GiB is outside 1KiB..1GiB"}},
		{name: "negative batch limit", edit: func(c *pipeline.Config) { c.Kafka.MaxBatchBytes = -1 },
			wants: []string{"kafka.max_batch_bytes:"}},
		{name: "every partitioner", edit: func(c *pipeline.Config) { c.Kafka.Partitioner = pipeline.PartitionerCRC32 }},
		{name: "unknown partitioner", edit: func(c *pipeline.Config) { c.Kafka.Partitioner = "murmur2_random" },
			wants: []string{`kafka.partitioner: "murmur2_random" is not a partitioner: use murmur2 (the default), fnv1a or crc32`}},
		{name: "partitioner in capitals", edit: func(c *pipeline.Config) { c.Kafka.Partitioner = "FNV1A" },
			wants: []string{`kafka.partitioner: "FNV1A" is not a partitioner`}},
		{name: "heartbeat not below session", edit: func(c *pipeline.Config) {
			c.Consumer.HeartbeatInterval, c.Consumer.SessionTimeout = time.Minute, time.Second
		}, wants: []string{"consumer.heartbeat_interval:"}},
		{name: "unknown guarantee", edit: func(c *pipeline.Config) { c.Guarantee = "exactly-once" },
			wants: []string{`guarantee: "exactly-once" is not a guarantee: at_least_once (the default) or exactly_once`}},
		{name: "commit interval too close to the transaction timeout", edit: func(c *pipeline.Config) {
			c.Guarantee, c.Consumer.CommitInterval, c.TransactionTimeout = pipeline.ExactlyOnce, 40*time.Second, time.Minute
		}, wants: []string{"consumer.commit_interval: 40s leaves a transaction too little of transaction_timeout (1m0s)"}},
		{name: "commit interval above a quarter of the transaction timeout", edit: func(c *pipeline.Config) {
			c.Guarantee, c.Consumer.CommitInterval, c.TransactionTimeout = pipeline.ExactlyOnce, 3*time.Second, 10*time.Second
		}, wants: []string{"consumer.commit_interval: 3s leaves a transaction too little of transaction_timeout (10s): " +
			"keep it at a quarter of it or less"}},
		{name: "commit interval above a quarter of the default transaction timeout", edit: func(c *pipeline.Config) {
			c.Guarantee, c.Consumer.CommitInterval = pipeline.ExactlyOnce, 5*time.Second
		}, wants: []string{"consumer.commit_interval: 5s leaves a transaction too little of transaction_timeout (10s)"}},
		{name: "transaction timeout above the broker's default maximum", edit: func(c *pipeline.Config) {
			c.Guarantee, c.TransactionTimeout = pipeline.ExactlyOnce, time.Hour
		}, wants: []string{"transaction_timeout: 1h0m0s is more than the brokers allow by default " +
			"(transaction.max.timeout.ms, 15m0s)"}},
		{name: "transaction timeout too short", edit: func(c *pipeline.Config) {
			c.Guarantee, c.TransactionTimeout = pipeline.ExactlyOnce, 500*time.Millisecond
		}, wants: []string{"transaction_timeout: 500ms is too short"}},
		{name: "negative duration", edit: func(c *pipeline.Config) { c.ShutdownTimeout = -time.Second },
			wants: []string{"shutdown_timeout: must not be negative"}},
		{name: "dead-letter topic policy without topic", edit: func(c *pipeline.Config) {
			c.DeadLetter.Policy = pipeline.DeadLetterTopic
		}, wants: []string{"dead_letter.topic: policy topic needs a topic name"}},
		{name: "dead-letter topic consumed", edit: func(c *pipeline.Config) { c.DeadLetter.Topic = "t" },
			wants: []string{`dead_letter.topic: "t" is also consumed`}},
		{name: "bad dead-letter policy", edit: func(c *pipeline.Config) { c.DeadLetter.Policy = "drop" },
			wants: []string{`dead_letter.policy: "drop" is not topic or stop`}},
		{name: "broker port not a number", edit: func(c *pipeline.Config) { c.Kafka.Brokers = []string{"localhost:kafka"} },
			wants: []string{`kafka.brokers[0]: "localhost:kafka": the port must be a number from 1 to 65535`}},
		{name: "broker port out of range", edit: func(c *pipeline.Config) { c.Kafka.Brokers = []string{"[::1]:9092", "b:99999"} },
			wants: []string{`kafka.brokers[1]: "b:99999": the port must be a number from 1 to 65535`}},
		{name: "session timeout beyond the protocol", edit: func(c *pipeline.Config) { c.Consumer.SessionTimeout = 1000000 * time.Hour },
			wants: []string{"consumer.session_timeout: 1000000h0m0s is longer than Kafka's limit for it (596h31m23.647s: int32 milliseconds)"}},
		{name: "every millisecond duration bounded", edit: func(c *pipeline.Config) {
			c.Consumer.RebalanceTimeout, c.Consumer.FetchMaxWait = 600*time.Hour, 600*time.Hour
			c.Kafka.DialTimeout, c.Kafka.MetadataMaxAge = 600*time.Hour, 600*time.Hour
			c.Consumer.SessionTimeout, c.Consumer.HeartbeatInterval = 599*time.Hour, 598*time.Hour
		}, wants: []string{"consumer.rebalance_timeout: 600h0m0s is longer", "consumer.fetch_max_wait: 600h0m0s is longer",
			"kafka.dial_timeout: 600h0m0s is longer", "kafka.metadata_max_age: 600h0m0s is longer",
			"consumer.session_timeout: 599h0m0s is longer", "consumer.heartbeat_interval: 598h0m0s is longer"}},
		{name: "sub-millisecond precision the protocol drops", edit: func(c *pipeline.Config) { c.Consumer.FetchMaxWait = 1500 * time.Microsecond },
			wants: []string{"consumer.fetch_max_wait: 1.5ms is not a whole number of milliseconds"}},
		{name: "retries below -1", edit: func(c *pipeline.Config) { c.DeadLetter.Retries = -2 },
			wants: []string{"dead_letter.retries: -2 is not a number of retries (-1: none)"}},
		{name: "backoff above the ceiling", edit: func(c *pipeline.Config) { c.DeadLetter.Backoff = time.Minute },
			wants: []string{"dead_letter.backoff: 1m0s is longer than the longest wait between retries (10s)"}},
		{name: "concurrency too high", edit: func(c *pipeline.Config) { c.Consumer.Concurrency = 1 << 40 },
			wants: []string{"consumer.concurrency: 1099511627776 is more than 10000"}},
		{name: "fetch concurrency too high", edit: func(c *pipeline.Config) { c.Consumer.FetchConcurrency = 17 },
			wants: []string{"consumer.fetch_concurrency: 17 is not between 1 and 16 (or 0 to choose from the partitions per broker)"}},
		{name: "fetch concurrency negative", edit: func(c *pipeline.Config) { c.Consumer.FetchConcurrency = -1 },
			wants: []string{"consumer.fetch_concurrency: -1 is not between 1 and 16 (or 0 to choose from the partitions per broker)"}},
		{name: "topic names Kafka refuses", edit: func(c *pipeline.Config) {
			c.Consumer.Topics = []string{"orders", "my orders", strings.Repeat("t", 250), ".."}
			c.DeadLetter.Topic = "orders/dlq"
		}, wants: []string{`consumer.topics[1]: "my orders" is not a valid topic name`, "consumer.topics[2]: topic name of 250 characters",
			`consumer.topics[3]: ".." is not a valid topic name`, `dead_letter.topic: "orders/dlq" is not a valid topic name`}},
		{name: "negative sizes", edit: func(c *pipeline.Config) { c.Consumer.BufferBytes = -1 },
			wants: []string{"consumer.buffer_bytes: -1B is negative"}},
		{name: "topic consumed twice", edit: func(c *pipeline.Config) { c.Consumer.Topics = []string{"a", "b", "a", "b"} },
			wants: []string{`consumer.topics[2]: "a" is listed twice (also consumer.topics[0])`,
				`consumer.topics[3]: "b" is listed twice (also consumer.topics[1])`}},
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
			fes := pipeline.FieldErrors(err)
			if len(fes) != len(tt.wants) {
				t.Fatalf("%d field errors, want %d: %v", len(fes), len(tt.wants), err)
			}
			for _, fe := range fes {
				if fe.Key == "" || fe.Msg == "" || fe.Error() != fe.Key+": "+fe.Msg || !strings.Contains(err.Error(), fe.Error()) {
					t.Errorf("field error %#v", fe)
				}
			}
		})
	}
}

// TestFieldErrors: Validate's problems are *FieldError values, each with
// its key, the value it is about (as the message quotes it) and the
// message; FieldErrors finds them through wrapping.
func TestFieldErrors(t *testing.T) {
	c := validConfig()
	c.Kafka.Brokers = []string{`pa"ss`, "ok:1"}
	c.Consumer.Group = ""
	err := c.Validate()
	want := []pipeline.FieldError{
		{Key: "kafka.brokers[0]", Value: `pa"ss`, Msg: `"pa\"ss" is not host:port`},
		{Key: "consumer.group", Msg: "a consumer group id is required"},
	}
	for _, e := range []error{err, fmt.Errorf("new: %w", err)} {
		got := pipeline.FieldErrors(e)
		if len(got) != len(want) {
			t.Fatalf("FieldErrors(%v) = %v", e, got)
		}
		for i := range want {
			if *got[i] != want[i] {
				t.Errorf("field error %d: %#v, want %#v", i, *got[i], want[i])
			}
		}
	}
	var fe *pipeline.FieldError
	if !errors.As(err, &fe) || fe.Key != "kafka.brokers[0]" {
		t.Errorf("errors.As: %v", fe)
	}
	if pipeline.FieldErrors(nil) != nil || pipeline.FieldErrors(errors.New("x")) != nil {
		t.Error("FieldErrors of no field error")
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
	if c.Consumer.CommitInterval != 100*time.Millisecond || c.Consumer.ProcessingTimeout != time.Minute || c.Consumer.BufferBytes != 16*pipeline.MiB ||
		c.Consumer.Ordering != pipeline.OrderByPartition || c.DeadLetter.Policy != pipeline.DeadLetterStop ||
		c.DeadLetter.Retries != 3 || c.ShutdownTimeout != 30*time.Second || c.Consumer.FetchConcurrency != 0 {
		t.Fatalf("defaults: %+v", c)
	}
	if c.Kafka.Partitioner != pipeline.PartitionerMurmur2 {
		t.Errorf("default partitioner %q, want murmur2 (where Java clients put a key)", c.Kafka.Partitioner)
	}
	if c.TransactionTimeout != 10*time.Second {
		t.Errorf("default transaction_timeout %v, want 10s (as Kafka Streams under exactly-once: a crashed "+
			"instance's open transaction holds read_committed readers back until it)", c.TransactionTimeout)
	}
	if d := validConfig().WithDefaults(); !reflect.DeepEqual(d, c) {
		t.Errorf("WithDefaults %+v differs from what New runs with %+v", d, c)
	}
	withTopic := validConfig()
	withTopic.DeadLetter.Topic = "dlq"
	if p, _ := pipeline.New(withTopic); p.Config().DeadLetter.Policy != pipeline.DeadLetterTopic {
		t.Fatal("a dead-letter topic does not make the policy topic")
	}
}

// TestPartitionerValidate: the names of the partitioners and the empty
// one (the default) are valid; anything else is an error that lists the
// valid names, and is reported at kafka.partitioner with its value.
func TestPartitionerValidate(t *testing.T) {
	for _, p := range []pipeline.Partitioner{"", pipeline.PartitionerMurmur2, pipeline.PartitionerFNV1a, pipeline.PartitionerCRC32} {
		if err := p.Validate(); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	if pipeline.PartitionerMurmur2 != "murmur2" || pipeline.PartitionerFNV1a != "fnv1a" || pipeline.PartitionerCRC32 != "crc32" {
		t.Errorf("the names changed: %q, %q, %q (configuration files spell them)",
			pipeline.PartitionerMurmur2, pipeline.PartitionerFNV1a, pipeline.PartitionerCRC32)
	}
	if names := []string{string(pipeline.PartitionerMurmur2), string(pipeline.PartitionerFNV1a), string(pipeline.PartitionerCRC32)}; !slices.Equal(names, partitioner.Names()) {
		t.Errorf("the pipeline's partitioners %q are not internal/partitioner's %q", names, partitioner.Names())
	}
	for _, p := range []pipeline.Partitioner{"murmur", "Murmur2", "fnv1a_random", "consistent", "random", " crc32"} {
		err := p.Validate()
		if err == nil || err.Error() != fmt.Sprintf("%q is not a partitioner: use murmur2 (the default), fnv1a or crc32", string(p)) {
			t.Errorf("%q: %v", p, err)
		}
	}
	c := validConfig()
	c.Kafka.Partitioner = "hash"
	fes := pipeline.FieldErrors(c.Validate())
	if len(fes) != 1 || fes[0].Key != "kafka.partitioner" || fes[0].Value != "hash" {
		t.Fatalf("field errors %v", fes)
	}
	if _, err := pipeline.NewProducer(pipeline.KafkaConfig{Brokers: []string{"localhost:9092"}, Partitioner: "hash"}, "out"); err == nil ||
		!strings.Contains(err.Error(), `kafka.partitioner: "hash" is not a partitioner`) {
		t.Errorf("NewProducer with an unknown partitioner: %v", err)
	}
	if _, err := pipeline.NewOutputs(c); err == nil || !strings.Contains(err.Error(), `kafka.partitioner: "hash" is not a partitioner`) {
		t.Errorf("NewOutputs with an unknown partitioner: %v", err)
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want pipeline.ByteSize
		err  string // in the error; "" if none
	}{
		{"512", 512, ""}, {"64KiB", 64 << 10, ""}, {"1MiB", 1 << 20, ""}, {"2 GiB", 2 << 30, ""}, {"7B", 7, ""},
		{"9223372036854775807", 1<<63 - 1, ""}, {"8589934591GiB", 8589934591 << 30, ""},
		{"1.5MiB", 0, "not a size"}, {"-1", 0, "not a size"}, {"", 0, "not a size"},
		{"12 parsecs", 0, `unknown unit "parsecs"`},
		{"2 GB", 0, `"GB" is ambiguous (10^9 or 2^30 bytes): write GiB`}, {"10kb", 0, `"kb" is ambiguous`},
		{"64MB", 0, `"MB" is ambiguous (10^6 or 2^20 bytes): write MiB`},
		{"1mib", 0, `unit "mib" is written MiB`}, {"1KIB", 0, `unit "KIB" is written KiB`}, {"3b", 0, `unit "b" is written B`},
		{"17179869184GiB", 0, `"17179869184GiB" is more than 8EiB`}, {"8589934592GiB", 0, "more than 8EiB"},
		{"99999999999999999999", 0, "more than 8EiB"},
	}
	for _, tt := range tests {
		b := pipeline.ByteSize(-7)
		err := b.UnmarshalText([]byte(tt.in))
		switch {
		case tt.err == "" && (err != nil || b != tt.want):
			t.Errorf("%q: %v, %v; want %v", tt.in, b, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: error %v, want one containing %q", tt.in, err, tt.err)
		case tt.err != "" && b != -7:
			t.Errorf("%q: a failed parse changed the value to %v", tt.in, b)
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
