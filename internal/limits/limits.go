// Package limits holds the bounds on configuration values, and on the
// configuration file itself, in one place: pipeline.Config.Validate, the
// configuration loader (internal/config) and the built-in stages read them
// here. Where Kafka sets a limit, the limit is Kafka's.
package limits

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Bounds of pipeline settings.
const (
	// MaxRequestDuration is the longest duration a Kafka request carries as int32
	// milliseconds, about 24.8 days: JoinGroup's session and rebalance
	// timeouts, a Fetch's MaxWaitMs, a CreateTopics time-out (the
	// dial_timeout), and kafka-go's heartbeat and partition-watch
	// intervals (the metadata_max_age).
	MaxRequestDuration = time.Duration(math.MaxInt32) * time.Millisecond
	// MaxFetchBytes is the largest fetch size: Kafka's request sizes are
	// int32, and a response must fit one.
	MaxFetchBytes = 1 << 30
	// MaxTopicName is the longest topic name Kafka accepts.
	MaxTopicName = 249
	// MaxFetchConcurrency is the most fetch requests in flight per broker.
	MaxFetchConcurrency = 16
	// MaxConcurrency is the most batches processed at once.
	MaxConcurrency = 10000
	// MaxBackoff is the longest wait between two retries of a failed
	// record: the wait starts at dead_letter.backoff and doubles up to
	// this (the process step's ceiling).
	MaxBackoff = 10 * time.Second
)

// Bounds of a configuration file, so that a hostile or broken file is
// refused quickly, with a clear error, instead of using gigabytes.
const (
	// MaxFileBytes is the largest configuration file read.
	MaxFileBytes = 1 << 20
	// MaxListLen is the most entries of one list or mapping.
	MaxListLen = 10000
	// MaxDepth is the deepest nesting of lists and mappings.
	MaxDepth = 64
	// MaxAliasValues is the most values aliases (*name) may expand to,
	// in all.
	MaxAliasValues = 100000
	// MaxReferences is the most ${VAR} references in one file.
	MaxReferences = 10000
)

// TopicName checks a topic name against Kafka's rules: 1 to 249 of the
// characters a-z, A-Z, 0-9, '.', '_' and '-', and neither "." nor "..".
func TopicName(name string) error { return kafkaName("topic name", name) }

// GroupInstanceID checks a static member's group.instance.id: Kafka
// holds it to the rules of topic names.
func GroupInstanceID(id string) error { return kafkaName("group instance id", id) }

func kafkaName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty %s", what)
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a valid %s", name, what)
	case len(name) > MaxTopicName:
		return fmt.Errorf("%s of %d characters; Kafka allows at most %d", what, len(name), MaxTopicName)
	}
	if i := strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}); i >= 0 {
		return fmt.Errorf("%q is not a valid %s: Kafka allows only letters, digits, '.', '_' and '-' (found %q)", name, what, []rune(name[i:])[0])
	}
	return nil
}
