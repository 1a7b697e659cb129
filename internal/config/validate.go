package config

import (
	"regexp"
	"strings"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// validate runs pipeline.Config.Validate and reports each of its errors
// at the key it names, or at the nearest enclosing key in the file.
func (d *decoder) validate(cfg *Config) {
	pc := cfg.Pipeline
	if cfg.Embedded != nil && len(pc.Kafka.Brokers) == 0 {
		pc.Kafka.Brokers = []string{"embedded:1"} // filled in at start
	}
	err := pc.Validate()
	if err == nil {
		return
	}
	fes := pipeline.FieldErrors(err)
	if len(fes) == 0 { // not documented by Validate; shown as it is
		d.probs.add(Position{1, 1}, "", err.Error(), validateHint(""))
		return
	}
	for _, e := range fes {
		if d.reported(e.Key) {
			continue // a wrong type there was reported already
		}
		hint := validateHint(e.Key)
		if e.Key == "consumer.commit_interval" && cfg.Pipeline.Guarantee == pipeline.ExactlyOnce && strings.Contains(e.Msg, "transaction_timeout") {
			hint = "each transaction lasts about a commit interval: lower consumer.commit_interval, or raise transaction_timeout"
		}
		d.probs.addValue(d.keyPos(e.Key), e.Key, e.Value, e.Msg, hint)
	}
}

// reported says whether a problem was already reported at key, above it
// or below it.
func (d *decoder) reported(key string) bool {
	if key == "" {
		return false
	}
	for _, e := range d.probs.errs {
		if e.Key == key || strings.HasPrefix(e.Key, key+".") || strings.HasPrefix(e.Key, key+"[") ||
			strings.HasPrefix(key, e.Key+".") || strings.HasPrefix(key, e.Key+"[") {
			return true
		}
	}
	return false
}

// keyPos is where key is in the file, or the nearest key enclosing it
// that is, or the start of the file.
func (d *decoder) keyPos(key string) Position {
	for k := key; k != ""; k = parentKey(k) {
		if p, ok := d.keys[k]; ok {
			return p
		}
	}
	return Position{1, 1}
}

func parentKey(k string) string {
	if strings.HasSuffix(k, "]") {
		if i := strings.LastIndexByte(k, '['); i >= 0 {
			return k[:i]
		}
	}
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		return k[:i]
	}
	return ""
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// validateHints say what to do about what pipeline.Config.Validate
// rejects, by key (list indexes removed).
var validateHints = map[string]string{
	"kafka.brokers":               "list bootstrap addresses, brokers: [broker-1:9092], or use kafka.embedded for a local broker",
	"kafka.brokers[]":             "write host:port, such as localhost:9092; a ${VAR} is one entry, not a list",
	"kafka.sasl.mechanism":        "use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
	"kafka.sasl.username":         "set kafka.sasl.username (and the password, best as \"${KAFKA_PASSWORD}\")",
	"kafka.tls":                   "set both cert_file and key_file for mutual TLS, or neither",
	"consumer.group":              "name the consumer group, such as group: order-enricher",
	"consumer.topics":             "list the topics to consume, such as topics: [orders]",
	"consumer.topics[]":           "remove an empty entry; a topic name is letters, digits, '.', '_' and '-' (and a ${VAR} is one entry, not a list)",
	"consumer.auto_offset_reset":  "use earliest, latest or none",
	"consumer.ordering":           "use partition (the default) or key",
	"consumer.concurrency":        "use a positive number, or leave it out for one per CPU",
	"consumer.buffer_bytes":       "raise buffer_bytes, or lower max_partition_fetch_bytes",
	"consumer.fetch_max_bytes":    "raise fetch_max_bytes, or lower max_partition_fetch_bytes",
	"consumer.heartbeat_interval": "keep heartbeat_interval at a third of session_timeout or less",
	"dead_letter.topic":           "name a topic that is not consumed, such as <topic>.dlq",
	"dead_letter.retries":         "write -1 for no retries, or leave it out for 3",
	"dead_letter.backoff":         "write a duration from 1ms to 10s, or leave it out for 100ms",
	"consumer.fetch_concurrency":  "write 1 to 16, or 0 (or leave it out) for 1 or 2 chosen from the partitions per broker",
	"dead_letter.policy":          "use topic or stop",
	"guarantee":                   "use at_least_once (the default) or exactly_once",
	"state.store":                 "use disk (the default: pebble under state.dir) or memory (nothing kept across restarts)",
	"state.cache_bytes":           "write a size such as 64MiB, or leave it out for 64MiB",
	"state.write_buffer_bytes":    "write a size from 256KiB to 1GiB, or leave it out for 16MiB",
	"transaction_timeout": "write a duration of at least 1s and at most the brokers' transaction.max.timeout.ms " +
		"(15m by default), or leave it out for 10s",
	"kafka.partitioner": "use murmur2 (the default: where Java clients put a key), fnv1a (kafka-go's Hash balancer, " +
		"fencepost's placement up to 0.1) or crc32 (librdkafka's consistent partitioner)",
}

func validateHint(key string) string {
	if h, ok := validateHints[indexRE.ReplaceAllString(key, "[]")]; ok {
		return h
	}
	if strings.HasSuffix(key, "timeout") || strings.HasSuffix(key, "interval") || strings.HasSuffix(key, "backoff") ||
		strings.HasSuffix(key, "fetch_max_wait") || strings.HasSuffix(key, "max_age") {
		return "use a positive duration, or leave it out for the default"
	}
	return "see the documentation of pipeline.Config"
}
