package config

import (
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestGuaranteeErrors: guarantee and transaction_timeout are reported at
// their position like every other key, with a hint.
func TestGuaranteeErrors(t *testing.T) {
	const eos = "guarantee: exactly_once\n"
	checkCases(t, []errorCase{
		{"unknown guarantee", base + "guarantee: exactly_twice\n",
			[]want{{"8:1", "guarantee", `"exactly_twice" is not a guarantee`}}, "exactly_once"},
		{"guarantee of the wrong type", base + "guarantee: [exactly_once]\n",
			[]want{{"8:12", "guarantee", "want a string, found a list"}}, ""},
		{"misspelt key", base + "guarantees: exactly_once\n",
			[]want{{"8:1", "guarantees", "unknown key"}}, `did you mean "guarantee"?`},
		{"transaction timeout without a unit", base + eos + "transaction_timeout: 60\n",
			[]want{{"9:22", "transaction_timeout", "want a duration, found a number"}}, ""},
		{"transaction timeout of 0", base + eos + "transaction_timeout: 0s\n",
			[]want{{"9:1", "transaction_timeout", "0 would mean the default, 10s"}}, ""},
		{"transaction timeout above the brokers' maximum", base + eos + "transaction_timeout: 1h\n",
			[]want{{"9:1", "transaction_timeout", "transaction.max.timeout.ms"}}, "at most the brokers' transaction.max.timeout.ms"},
		{"transaction timeout too short", base + eos + "transaction_timeout: 500ms\n",
			[]want{{"9:1", "transaction_timeout", "too short for a transaction"}}, "transaction.max.timeout.ms"},
		{"commit interval too long for the transaction timeout",
			strings.Replace(base, "  group: g", "  group: g\n  commit_interval: 40s", 1) + eos,
			[]want{{"5:3", "consumer.commit_interval", "too little of transaction_timeout"}}, "raise transaction_timeout"},
		{"read_committed false with exactly_once",
			strings.Replace(base, "  group: g", "  group: g\n  read_committed: false", 1) + eos,
			[]want{{"5:3", "consumer.read_committed", "contradicts guarantee: exactly_once"}}, "remove read_committed"},
	})
}

// TestGuaranteeLoads: both keys load as written; read_committed may be
// written true with exactly_once, and false with at_least_once.
func TestGuaranteeLoads(t *testing.T) {
	for _, c := range []struct {
		name, extra string
		guarantee   pipeline.Guarantee
		timeout     time.Duration
	}{
		{"absent", "", "", 0},
		{"at_least_once", "guarantee: at_least_once\n", pipeline.AtLeastOnce, 0},
		{"exactly_once", "guarantee: exactly_once\ntransaction_timeout: 2m\n", pipeline.ExactlyOnce, 2 * time.Minute},
		{"exactly_once, read_committed true", "guarantee: exactly_once\nconsumer: {group: g, topics: [orders], read_committed: true}\n", pipeline.ExactlyOnce, 0},
		{"at_least_once, read_committed false", "consumer: {group: g, topics: [orders], read_committed: false}\n", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := base + c.extra
			if strings.Contains(c.extra, "consumer:") {
				src = strings.Replace(base, "consumer:\n  group: g\n  topics: [orders]\n", "", 1) + c.extra
			}
			cfg, errs := parse(t, src, nil)
			if errs != nil {
				t.Fatal(errs)
			}
			if cfg.Pipeline.Guarantee != c.guarantee || cfg.Pipeline.TransactionTimeout != c.timeout {
				t.Errorf("guarantee %q, transaction_timeout %v; want %q, %v",
					cfg.Pipeline.Guarantee, cfg.Pipeline.TransactionTimeout, c.guarantee, c.timeout)
			}
		})
	}
}

// TestExactlyOnceWarnings: with guarantee: exactly_once, each stage that
// does not take part in exactly-once is a warning at its entry, naming
// the stage; with at_least_once, or with only stages that take part,
// there is none.
func TestExactlyOnceWarnings(t *testing.T) {
	const head = "kafka:\n  brokers: [localhost:9092]\nconsumer: {group: g, topics: [orders]}\n"
	const mixed = "pipeline:\n" +
		"  - stage: json\n" + // line 6 (after head and guarantee)
		"  - stage: stdout\n" + // line 7
		"  - stage: filter\n" +
		"    if: x\n" +
		"  - stage: stdout\n" + // line 10
		"    name: sample\n" +
		"  - stage: produce\n" +
		"    topic: out\n"
	const qualifying = "pipeline:\n  - stage: json\n  - {stage: map, value: x}\n  - {stage: produce, topic: out}\n"
	for _, c := range []struct {
		name, src string
		want      []string // warnings, formatted
	}{
		{"exactly_once with printing stages", head + "guarantee: exactly_once\n" + mixed, []string{
			"test.yaml:7:5: warning: pipeline[1]: stage stdout does not take part in exactly-once: " +
				"its effects outside the output records are at-least-once: repeated after a crash or abort",
			`test.yaml:10:5: warning: pipeline[3]: stage stdout ("sample") does not take part in exactly-once`,
		}},
		{"at_least_once with printing stages", head + "guarantee: at_least_once\n" + mixed, nil},
		{"default guarantee with printing stages", head + mixed, nil},
		{"exactly_once with qualifying stages only", head + "guarantee: exactly_once\n" + qualifying, nil},
		{"exactly_once with no stages", head + "guarantee: exactly_once\npipeline: []\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, errs := parse(t, c.src, nil)
			if errs != nil {
				t.Fatal(errs)
			}
			got := cfg.Warnings()
			if len(got) != len(c.want) {
				t.Fatalf("%d warnings, want %d: %v", len(got), len(c.want), got)
			}
			for i, w := range c.want {
				if s := got[i].String(); !strings.HasPrefix(s, w) {
					t.Errorf("warning %d:\n got %s\nwant it to start with %s", i, s, w)
				}
				if got[i].Hint == "" {
					t.Errorf("warning %d has no hint", i)
				}
			}
		})
	}
}
