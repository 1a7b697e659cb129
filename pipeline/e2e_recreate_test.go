package pipeline_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/group"
	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestRecreatedTopicConsumedAgain: the input topic is deleted under a
// running processor and created again; the records written to the new
// topic are processed from auto_offset_reset (earliest: all of them),
// with a reset event that names the recreation, and committed. Under
// both group protocols; "stale" variants keep an offset committed for
// the deleted topic (as a commit landing after the deletion, or a
// broker that does not drop them, leaves it): it is below the new
// topic's end, and must not make the processor skip the new records.
func TestRecreatedTopicConsumedAgain(t *testing.T) {
	for _, tc := range []struct {
		proto string
		stale bool
	}{{group.ProtocolClassic, false}, {group.ProtocolConsumer, false}, {group.ProtocolClassic, true}, {group.ProtocolConsumer, true}} {
		proto := tc.proto
		name := proto
		if tc.stale {
			name += "-stale"
		}
		t.Run(name, func(t *testing.T) {
			kc := kafkatest.New(t, 1)
			c := kc.Kafka
			topic, grp := c.Name("again"), c.Name("g-again-"+proto)
			tp := offsetstore.TopicPartition{Topic: topic, Partition: 0}
			c.CreateTopic(t, topic, 1)
			c.Produce(t, topic, 0, 20, values("old"))
			rec := newRecorder()
			ev := &events{}
			cfg := fastConfig(c, grp, topic)
			cfg.Consumer.GroupProtocol = proto
			cfg.Consumer.AutoOffsetReset = offsetstore.ResetEarliest
			r := start(t, cfg, append(ev.options(), pipeline.WithStage("record", rec))...)
			waitFor(t, 15*time.Second, "the old records committed", func() bool { return c.Committed(t, grp, topic)[0] == 20 })

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := c.Admin.DeleteTopics(ctx, topic); err != nil {
				t.Fatal(err)
			}
			// the processor notices the topic is gone (one metadata
			// interval) before it comes back
			waitFor(t, 15*time.Second, "the partition to be given up", func() bool {
				st, err := r.p.Stats(context.Background())
				return err == nil && len(st.Partitions) == 0
			})
			n := 10
			if tc.stale {
				// kfake refuses commits for a deleted topic and drops
				// the topic's commits: the group's next offset fetch
				// of the topic answers the old 20 (leader epoch 0, as
				// the new topic's) instead
				n = 30
				kc.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
					r := req.(*kmsg.OffsetFetchRequest)
					if r.Group != grp || len(r.Topics) != 1 || r.Topics[0].Topic != topic {
						kc.KeepControl()
						return nil, nil, false
					}
					resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
					rt := kmsg.NewOffsetFetchResponseTopic()
					rt.Topic = topic
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch = 0, 20, 0
					rt.Partitions = append(rt.Partitions, rp)
					resp.Topics = append(resp.Topics, rt)
					return resp, nil, true
				})
			}
			var err error
			waitFor(t, 10*time.Second, "the topic to be created again", func() bool { err = c.CreateTopicE(topic, 1); return err == nil })
			c.Produce(t, topic, 0, n, values("new"))
			waitFor(t, 20*time.Second, "the new topic's records", func() bool { return rec.total() >= 20+n })
			waitFor(t, 10*time.Second, "the new topic's records committed", func() bool { return c.Committed(t, grp, topic)[0] == int64(n) })
			if err := r.shutdown(t); err != nil {
				t.Fatal(err)
			}
			if got, want := rec.offsets(tp), append(seq(0, 20), seq(0, int64(n))...); !slices.Equal(got, want) {
				t.Fatalf("processed %v, want %v", got, want)
			}
			rs := ev.resetsOf(tp)
			if len(rs) != 2 || rs[1].Reason != offsetstore.ReasonTopicRecreated || rs[1].To != 0 {
				t.Fatalf("resets %+v, want the first start and then a topic_recreated reset to 0", rs)
			}
		})
	}
}
