package kafkatools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/cli/broker"
	"github.com/fencepost-dev/fencepost/internal/partitioner"
)

// TestProduceJSONTimestampsAndPartitions: produce -i json writes a record
// to the partition its line names (--partition wins over it), and refuses
// a timestamp a Kafka record cannot hold instead of writing another date.
func TestProduceJSONTimestampsAndPartitions(t *testing.T) {
	addr := testCluster(t, 3, "tp0", "tp1", "tp2", "tp3", "tp4", "tp5", "tp6", "tp7")
	const last = "2262-04-11T23:47:16.854Z" // the latest time the client can write
	keyPartition := int32(kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: []byte("k")}, 3))
	type at struct {
		value     string
		partition int32
		timestamp string // "": any
	}
	tests := []struct {
		name    string
		args    []string
		input   string
		code    int
		errText string
		want    []at
	}{
		{"the line's partition", nil,
			`{"value":"a","partition":2}` + "\n" + `{"value":"b","partition":0}` + "\n" + `{"value":"c","partition":2}` + "\n",
			ExitOK, "produced 3 record(s)", []at{{"b", 0, ""}, {"a", 2, ""}, {"c", 2, ""}}},
		{"--partition wins over the line's", []string{"--partition", "1"},
			`{"value":"a","partition":2}` + "\n" + `{"value":"b"}` + "\n",
			ExitOK, "produced 2 record(s)", []at{{"a", 1, ""}, {"b", 1, ""}}},
		{"--by-key ignores the line's", []string{"--by-key"},
			`{"key":"k","value":"a","partition":2}` + "\n" + `{"key":"k","value":"b","partition":0}` + "\n",
			ExitOK, "produced 2 record(s)", []at{{"a", keyPartition, ""}, {"b", keyPartition, ""}}},
		{"a year Kafka cannot hold", nil,
			`{"value":"ok","partition":1}` + "\n" + `{"value":"far","timestamp":"9999-12-31T23:59:59Z","partition":1}` + "\n",
			ExitFailure, `line 2: timestamp "9999-12-31T23:59:59Z" is outside what a Kafka record can hold: use a time from 1970-01-01T00:00:00Z to ` + last,
			[]at{{"ok", 1, ""}}},
		{"before 1970", nil, `{"value":"old","timestamp":"1969-12-31T23:59:59Z"}` + "\n",
			ExitFailure, `line 1: timestamp "1969-12-31T23:59:59Z" is outside`, nil},
		{"the first and the last times that fit", nil,
			`{"value":"first","timestamp":"1970-01-01T00:00:00Z","partition":0}` + "\n" + `{"value":"last","timestamp":"` + last + `","partition":0}` + "\n",
			ExitOK, "produced 2 record(s)", []at{{"first", 0, "1970-01-01T00:00:00Z"}, {"last", 0, last}}},
		{"a negative partition", nil, `{"value":"x","partition":-1}` + "\n",
			ExitFailure, "line 1: partition -1: use 0 or more, or leave it out to choose by key", nil},
	}
	ctx := context.Background()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := fmt.Sprintf("tp%d", i)
			args := append([]string{"produce", "--brokers", addr, "--topic", topic, "-i", "json"}, tt.args...)
			code, _, errOut := runCLIInput(ctx, nil, tt.input, args...)
			if code != tt.code || !strings.Contains(errOut, tt.errText) {
				t.Fatalf("produce: exit %d, want %d; stderr %q lacks %q", code, tt.code, errOut, tt.errText)
			}
			code, out, errOut := runCLI(ctx, nil, "consume", "--brokers", addr, "--topic", topic, "-o", "json")
			if code != ExitOK {
				t.Fatalf("consume: exit %d: %s", code, errOut)
			}
			var got []at
			if strings.TrimSpace(out) != "" {
				for _, j := range jsonLines(t, out) {
					got = append(got, at{*j.Value, j.Partition, j.Timestamp})
				}
			}
			// consume interleaves partitions as the fetches come; within
			// one, records are in offset order
			slices.SortStableFunc(got, func(a, b at) int { return cmp.Compare(a.partition, b.partition) })
			if len(got) != len(tt.want) {
				t.Fatalf("consumed %v, want %v", got, tt.want)
			}
			for i, w := range tt.want {
				g := got[i]
				if w.timestamp == "" {
					g.timestamp = ""
				}
				if g != w {
					t.Errorf("record %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// TestProduceFailureHints: when the brokers refuse a record, the hint
// fits the cause: a record too large, a partition the topic lacks, a
// topic that does not exist.
func TestProduceFailureHints(t *testing.T) {
	cl, err := broker.Start(broker.Options{Brokers: 1, Partitions: 2, Topics: []string{"small", "two"}, MaxMessageBytes: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	addr := cl.ListenAddrs()[0]
	big := incompressible(4096) // compression cannot shrink it below the limit
	tests := []struct {
		name, topic, input string
		args               []string
		want, notWant      string
	}{
		{"a record too large", "small", "ok\n" + big + "\n", nil,
			"MESSAGE_TOO_LARGE", "check the topic exists"},
		{"a partition the topic lacks", "two", `{"value":"x","partition":5}` + "\n", []string{"-i", "json"},
			`line 1 asks for partition 5, but "two" has 2 partition(s), 0 to 1: fix the line's partition, give --partition, or --by-key to choose by key`, "topic exists"},
		{"--partition the topic lacks", "two", "x\n", []string{"--partition", "7"},
			`line 1 asks for partition 7, but "two" has 2 partition(s)`, "topic exists"},
		{"a topic that does not exist", "absent", "x\n", nil,
			"UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition. (check the name; create the topic with: processor topics create absent)", "max.message.bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"produce", "--brokers", addr, "--topic", tt.topic}, tt.args...)
			code, _, errOut := runCLIInput(context.Background(), nil, tt.input, args...)
			if code != ExitFailure || !strings.Contains(errOut, tt.want) || strings.Contains(errOut, tt.notWant) {
				t.Errorf("exit %d, stderr:\n%s\nwant %q, not %q", code, errOut, tt.want, tt.notWant)
			}
		})
	}
	t.Run("the too-large hint names the limit and the record", func(t *testing.T) {
		code, _, errOut := runCLIInput(context.Background(), nil, big+"\n", "produce", "--brokers", addr, "--topic", "small")
		want := "the record of line 1 holds 4096 bytes of key, value and headers, more than the topic accepts: see its max.message.bytes"
		if code != ExitFailure || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, stderr:\n%s\nwant %q", code, errOut, want)
		}
	})
}

// TestProducePartitioner: produce puts each keyed record where
// --partitioner says, by default where the file's kafka.partitioner
// says, else with murmur2 (as Java clients); an unknown name is a usage
// error listing the valid ones.
func TestProducePartitioner(t *testing.T) {
	addr := testCluster(t, 7, "p0", "p1", "p2", "p3", "p4")
	fnvFile := writeFile(t, t.TempDir(), "fnv.yaml", "kafka:\n  brokers: ['"+addr+"']\n  partitioner: fnv1a\n"+
		"consumer:\n  group: g\n  topics: [in]\npipeline: []\n")
	var input strings.Builder
	for i := range 100 {
		fmt.Fprintf(&input, "user-%d:v%d\n", i, i)
	}
	ctx := context.Background()
	for i, tt := range []struct {
		name  string
		args  []string
		place partitioner.Func
	}{
		{"default", []string{"--brokers", addr}, partitioner.Murmur2},
		{"--partitioner fnv1a", []string{"--brokers", addr, "--partitioner", "fnv1a"}, partitioner.FNV1a},
		{"--partitioner crc32", []string{"--brokers", addr, "--partitioner", "crc32"}, partitioner.CRC32},
		{"the file's fnv1a", []string{"-c", fnvFile}, partitioner.FNV1a},
		{"--partitioner over the file's", []string{"-c", fnvFile, "--partitioner", "murmur2"}, partitioner.Murmur2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			topic := fmt.Sprintf("p%d", i)
			args := append([]string{"produce", "--topic", topic, "--key-separator", ":"}, tt.args...)
			if code, _, errOut := runCLIInput(ctx, nil, input.String(), args...); code != ExitOK {
				t.Fatalf("produce: exit %d: %s", code, errOut)
			}
			code, out, errOut := runCLI(ctx, nil, "consume", "--brokers", addr, "--topic", topic, "-o", "json")
			if code != ExitOK {
				t.Fatalf("consume: exit %d: %s", code, errOut)
			}
			recs := jsonLines(t, out)
			if len(recs) != 100 {
				t.Fatalf("consumed %d records, want 100", len(recs))
			}
			for _, r := range recs {
				if want := tt.place([]byte(*r.Key), 7); r.Partition != want {
					t.Errorf("key %s on partition %d, want %d", *r.Key, r.Partition, want)
				}
			}
		})
	}
	code, _, errOut := runCLIInput(ctx, nil, "k:v\n", "produce", "--brokers", addr, "--topic", "p0", "-K", ":", "--partitioner", "fnv")
	if code != ExitUsage || !strings.Contains(errOut, `--partitioner: "fnv" is not a partitioner: use murmur2 (the default), fnv1a or crc32`) {
		t.Errorf("--partitioner fnv: exit %d, stderr %q", code, errOut)
	}
}

// TestProduceHintClasses: a code without a hint of its own gets the hint
// of its class in the shared table (kafkawire): the record's, or the
// client's.
func TestProduceHintClasses(t *testing.T) {
	r := &kgo.Record{Value: []byte("v"), Context: context.WithValue(context.Background(), lineKey{}, lineInfo{line: 3})}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{kerr.InvalidRecord, "the brokers refuse the record of line 3 itself"},
		{fmt.Errorf("produce: %w", kerr.CorruptMessage), "the brokers refuse the record of line 3 itself"},
		{kerr.PolicyViolation, "the brokers refuse the record of line 3 itself"},
		{kerr.MessageTooLarge, "the record of line 3 holds 1 bytes"},
		{kerr.InvalidTopicException, "the brokers refuse this client, whatever the record"},
		{kerr.SaslAuthenticationFailed, "the brokers refuse this client, whatever the record"},
		{kerr.TopicAuthorizationFailed, "check its ACLs"},
		{kerr.NotEnoughReplicas, "check that the brokers are up"},
		{errors.New("no code"), "check that the brokers are up"},
	} {
		if got := produceHint(tt.err, r, "t", 0); !strings.Contains(got, tt.want) {
			t.Errorf("%v: hint %q, want %q", tt.err, got, tt.want)
		}
	}
}
