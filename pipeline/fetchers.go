package pipeline

import (
	"slices"

	meta "github.com/segmentio/kafka-go/protocol/metadata"
)

// manyPartitionsPerBroker is where the default fetch concurrency goes
// from one fetcher per broker to two: with fewer partitions than this led
// by every broker, two fetchers split a small fetch in halves and decode
// them at once, costing more CPU per record for no more speed; with this
// many or more, a second fetch on the wire while the first decodes is
// faster at the same or less CPU per record (bench/README.md, "Fetchers
// by default").
const manyPartitionsPerBroker = 16

// fetchersPerBroker is the number of fetch requests in flight per broker:
// consumer.fetch_concurrency when set (1 or more), else the default
// chosen from the consumed topics' metadata (see defaultFetchers).
func fetchersPerBroker(set int, consumed []string, resp *meta.Response) int {
	if set > 0 {
		return set
	}
	return defaultFetchers(consumed, resp)
}

// defaultFetchers is 1 if every broker leads fewer than
// manyPartitionsPerBroker partitions of the consumed topics, else 2. The
// partitions counted are all those of the topics, the most this member
// can be assigned: a member of a larger group may fetch fewer from each
// broker than counted. Partitions without a leader are not counted.
func defaultFetchers(consumed []string, resp *meta.Response) int {
	if resp == nil {
		return 1
	}
	led := map[int32]int{}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || !slices.Contains(consumed, t.Name) {
			continue
		}
		for _, p := range t.Partitions {
			if p.LeaderID < 0 {
				continue
			}
			led[p.LeaderID]++
			if led[p.LeaderID] >= manyPartitionsPerBroker {
				return 2
			}
		}
	}
	return 1
}
