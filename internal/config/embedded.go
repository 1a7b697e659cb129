package config

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/fencepost-dev/fencepost/internal/limits"
)

// Embedded configures an in-process Kafka-protocol broker, for
// development and the quickstart: nothing to install. Its data lives in
// memory unless DataDir is set.
type Embedded struct {
	// Brokers is the number of brokers. Default 1.
	Brokers int `yaml:"brokers"`
	// Partitions is the partition count of every topic created. Default 4.
	Partitions int `yaml:"partitions"`
	// Topics are created at start, with consumer.topics,
	// dead_letter.topic and demo_producer.topic. A stage that writes to
	// another topic needs it listed here.
	Topics []string `yaml:"topics"`
	// DataDir keeps the broker's data across runs; empty: in memory.
	DataDir string `yaml:"data_dir"`
	// DemoProducer, if set, writes demo events while the pipeline runs.
	DemoProducer *DemoProducer `yaml:"demo_producer"`
}

// DemoProducer writes JSON events to a topic at a steady rate, keyed by
// user, such as
//
//	{"id":42,"user":"u17","type":"purchase","amount":12.5,"ts":"2026-01-02T15:04:05Z"}
//
// where type is view (most), click or purchase (fewest).
type DemoProducer struct {
	// Topic receives the events. Required.
	Topic string `yaml:"topic"`
	// Rate is events per second. Default 10.
	Rate int `yaml:"rate"`
	// Users is the number of distinct users. Default 100.
	Users int `yaml:"users"`
	// MalformedEvery makes every n-th event invalid JSON, to show the
	// dead-letter path. 0 (the default) never does.
	MalformedEvery int `yaml:"malformed_every"`
}

// EmbeddedTopics returns every topic the embedded broker creates at start for
// cfg: Embedded.Topics, consumer.topics, dead_letter.topic and the demo
// producer's topic, without duplicates.
func (c *Config) EmbeddedTopics() []string {
	if c.Embedded == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	add := func(ts ...string) {
		for _, t := range ts {
			if t != "" && !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	add(c.Embedded.Topics...)
	add(c.Pipeline.Consumer.Topics...)
	add(c.Pipeline.DeadLetter.Topic)
	if dp := c.Embedded.DemoProducer; dp != nil {
		add(dp.Topic)
	}
	return out
}

// checkEmbedded applies kafka.embedded's defaults and checks its bounds.
func (d *decoder) checkEmbedded(cfg *Config) {
	e := cfg.Embedded
	if e == nil {
		return
	}
	if len(cfg.Pipeline.Kafka.Brokers) > 0 {
		d.probs.add(d.keys["kafka.brokers"], "kafka.brokers", "must be empty with kafka.embedded: the embedded broker's address is filled in at start",
			"remove kafka.brokers to use the embedded broker, or remove kafka.embedded to use a real cluster")
	}
	if cfg.Pipeline.Kafka.SASL != nil || cfg.Pipeline.Kafka.TLS != nil {
		d.probs.add(d.keys["kafka.embedded"], "kafka.embedded", "the embedded broker speaks neither TLS nor SASL",
			"remove kafka.tls and kafka.sasl, or remove kafka.embedded")
	}
	bound := func(key string, v *int, def, lo, hi int) {
		if d.zeroMeansDefault(key, int64(*v), int64(def)) {
			d.probs.add(d.keys[key], key, fmt.Sprintf("0 would mean the default, %d", def),
				fmt.Sprintf("leave the key out for the default, or write %d to %d", lo, hi))
			return
		}
		if *v == 0 && def != 0 {
			*v = def
		}
		if *v < lo || *v > hi {
			d.probs.add(d.keys[key], key, fmt.Sprintf("%d is out of range", *v), fmt.Sprintf("use %d to %d", lo, hi))
		}
	}
	if e.DataDir != "" {
		d.checkDataDir(e.DataDir)
	}
	bound("kafka.embedded.brokers", &e.Brokers, 1, 1, 9)
	bound("kafka.embedded.partitions", &e.Partitions, 4, 1, 1000)
	for i, t := range e.Topics {
		k := fmt.Sprintf("kafka.embedded.topics[%d]", i)
		if err := limits.TopicName(t); err != nil && !d.reported(k) {
			d.probs.add(d.keys[k], k, err.Error(), "remove an empty entry; a name is letters, digits, '.', '_' and '-'")
		}
	}
	if dp := e.DemoProducer; dp != nil {
		const key = "kafka.embedded.demo_producer.topic"
		if err := limits.TopicName(dp.Topic); dp.Topic == "" && !d.reported(key) {
			d.probs.add(d.keyPos(key), key, "the demo producer needs a topic",
				"add topic: <name> under demo_producer (usually one of consumer.topics)")
		} else if err != nil && !d.reported(key) {
			d.probs.add(d.keyPos(key), key, err.Error(), "a name is letters, digits, '.', '_' and '-'")
		}
		bound("kafka.embedded.demo_producer.rate", &dp.Rate, 10, 1, 100000)
		bound("kafka.embedded.demo_producer.users", &dp.Users, 100, 1, 1000000)
		bound("kafka.embedded.demo_producer.malformed_every", &dp.MalformedEvery, 0, 0, 1<<30)
	}
}

// checkDataDir reports a data_dir the embedded broker could not use: one
// that is, or is under, something other than a directory.
func (d *decoder) checkDataDir(dir string) {
	const key = "kafka.embedded.data_dir"
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil && !fi.IsDir() {
			d.probs.add(d.keys[key], key, fmt.Sprintf("%s is not a directory", p),
				"name a directory the processor can write, or one to create, or leave data_dir out to keep the data in memory")
			return
		}
		if err == nil || filepath.Dir(p) == p {
			return
		}
	}
}
