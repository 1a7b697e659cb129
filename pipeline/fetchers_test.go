package pipeline

import (
	"testing"

	meta "github.com/segmentio/kafka-go/protocol/metadata"
)

// topicLed is a metadata topic whose partitions are led by leaders in
// turn (-1: no leader).
func topicLed(name string, partitions int, leaders ...int32) meta.ResponseTopic {
	t := meta.ResponseTopic{Name: name}
	for i := range partitions {
		t.Partitions = append(t.Partitions, meta.ResponsePartition{PartitionIndex: int32(i), LeaderID: leaders[i%len(leaders)]})
	}
	return t
}

func TestFetchersPerBroker(t *testing.T) {
	unknown := meta.ResponseTopic{Name: "gone", ErrorCode: 3}
	for _, tc := range []struct {
		name     string
		set      int
		consumed []string
		topics   []meta.ResponseTopic
		want     int
	}{
		{"4 partitions, one broker", 0, []string{"a"}, []meta.ResponseTopic{topicLed("a", 4, 1)}, 1},
		{"15 partitions, one broker", 0, []string{"a"}, []meta.ResponseTopic{topicLed("a", 15, 1)}, 1},
		{"16 partitions, one broker", 0, []string{"a"}, []meta.ResponseTopic{topicLed("a", 16, 1)}, 2},
		{"64 partitions, one broker", 0, []string{"a"}, []meta.ResponseTopic{topicLed("a", 64, 1)}, 2},
		{"512 partitions, one broker", 0, []string{"a"}, []meta.ResponseTopic{topicLed("a", 512, 1)}, 2},
		{"30 partitions over 3 brokers: 10 each", 0, []string{"a"}, []meta.ResponseTopic{topicLed("a", 30, 1, 2, 3)}, 1},
		{"48 partitions over 3 brokers: 16 each", 0, []string{"a"}, []meta.ResponseTopic{topicLed("a", 48, 1, 2, 3)}, 2},
		{"two topics add up on one broker", 0, []string{"a", "b"},
			[]meta.ResponseTopic{topicLed("a", 8, 1), topicLed("b", 8, 1)}, 2},
		{"a topic not consumed does not count", 0, []string{"a"},
			[]meta.ResponseTopic{topicLed("a", 8, 1), topicLed("out", 64, 1)}, 1},
		{"partitions without a leader do not count", 0, []string{"a"}, []meta.ResponseTopic{topicLed("a", 32, -1)}, 1},
		{"a topic with an error does not count", 0, []string{"gone"}, []meta.ResponseTopic{unknown}, 1},
		{"no metadata", 0, []string{"a"}, nil, 1},
		{"set to 1 with many partitions", 1, []string{"a"}, []meta.ResponseTopic{topicLed("a", 512, 1)}, 1},
		{"set to 2 with few partitions", 2, []string{"a"}, []meta.ResponseTopic{topicLed("a", 4, 1)}, 2},
		{"set to 16", 16, []string{"a"}, []meta.ResponseTopic{topicLed("a", 4, 1)}, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp *meta.Response
			if tc.topics != nil {
				resp = &meta.Response{Topics: tc.topics}
			}
			if got := fetchersPerBroker(tc.set, tc.consumed, resp); got != tc.want {
				t.Errorf("fetchersPerBroker(%d, %v) = %d, want %d", tc.set, tc.consumed, got, tc.want)
			}
		})
	}
}
