package kafkatools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/config"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/internal/partitioner"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// produceOptions are produce's flags.
type produceOptions struct {
	cluster   clusterFlags
	topic     string
	partition int32
	keySep    string
	headers   []string
	input     string
	byKey     bool
	// partitioner places keyed records ("": the file's
	// kafka.partitioner, else murmur2)
	partitioner string

	recordHeaders []kgo.RecordHeader // headers, parsed once
}

func (c *cli) produceCmd() *cobra.Command {
	var o produceOptions
	cmd := &cobra.Command{
		Use:   "produce --topic T [--key-separator SEP] [-H key=value]...",
		Short: "Write records read from stdin, one per line",
		Long: `produce writes one record per line of stdin to a topic, waits until the
brokers acknowledged every one (acks=all), and says how many it wrote.

With --input text (the default) a line is the value, or, with
--key-separator, the key, the separator, then the value; -H key=value adds
a header to every record. A trailing \r is dropped. With --input json each
line is a record as consume --output json (or the log stage's json format)
prints it (key, value, headers, timestamp, partition; key_base64 and
value_base64 for binary data), so a topic's records can be copied exactly:
consume -o json ... | produce -i json .... A timestamp a Kafka record
cannot hold (before 1970, after 2262) is refused. A JSON line holds
exactly one record: anything after it on the line is an error naming the
line; blank lines are skipped.

Records go to the partition their key hashes to (records without a key
fill one partition's batch at a time), to the partition a JSON line names,
or to --partition, which wins over the lines; --by-key ignores the lines'
partitions (to replay dead letters, whose partition is the dead-letter
topic's, into the source topic). A key is placed as --partitioner says:
murmur2 (where Java clients, Kafka Streams and the processor put it),
fnv1a (kafka-go's Hash balancer, the processor's placement up to 0.1) or
crc32 (librdkafka's consistent partitioner); by default as the file's
kafka.partitioner, else murmur2. A line that cannot be read stops produce
with an error naming it; the lines before it were written.`,
		Example: "  echo 'u1:{\"type\":\"purchase\"}' | processor produce --brokers localhost:9092 --topic events --key-separator :\n" +
			"  processor consume -c app.yaml --topic events -o json | processor produce -c app.yaml --topic events.copy -i json\n" +
			"  processor consume -c app.yaml --topic events.dlq -o json | processor produce -c app.yaml --topic events -i json --by-key",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.topic == "" {
				return errors.New("produce: name the topic with --topic")
			}
			if o.input != "text" && o.input != "json" {
				return fmt.Errorf("--input %q: use text or json", o.input)
			}
			if o.byKey && cmd.Flags().Changed("partition") {
				return errors.New("--by-key and --partition: give one")
			}
			if err := pipeline.Partitioner(o.partitioner).Validate(); err != nil {
				return fmt.Errorf("--partitioner: %w", err)
			}
			if o.input == "json" && (o.keySep != "" || len(o.headers) > 0) {
				return errors.New("--key-separator and -H are for --input text: a JSON line carries its key and headers")
			}
			for _, h := range o.headers {
				k, v, ok := strings.Cut(h, "=")
				if !ok || k == "" {
					return fmt.Errorf("-H %q: write a header as key=value", h)
				}
				o.recordHeaders = append(o.recordHeaders, kgo.RecordHeader{Key: k, Value: []byte(v)})
			}
			return c.produce(cmd.Context(), o, cmd.Flags().Changed("partition"))
		},
	}
	f := cmd.Flags()
	o.cluster.add(f)
	f.StringVarP(&o.topic, "topic", "t", "", "the `TOPIC` to write to (required)")
	f.Int32VarP(&o.partition, "partition", "p", 0, "write every record to this `PARTITION` (default: a JSON line's partition, else by key)")
	f.StringVarP(&o.keySep, "key-separator", "K", "", "split each line at the first `SEP` into key and value")
	f.StringArrayVarP(&o.headers, "header", "H", nil, "add the header `KEY=VALUE` to every record (repeatable)")
	f.StringVarP(&o.input, "input", "i", "text", "text or json (the lines consume --output json prints)")
	f.BoolVar(&o.byKey, "by-key", false, "choose each record's partition by its key, ignoring the partition of JSON lines")
	f.StringVar(&o.partitioner, "partitioner", "", "place keyed records with `NAME`: murmur2 (as Java clients), fnv1a (kafka-go's Hash) "+
		"or crc32 (librdkafka's consistent) (default: the file's kafka.partitioner, else murmur2)")
	return cmd
}

func (c *cli) produce(ctx context.Context, o produceOptions, fixedPartition bool) error {
	// The cluster first (within --timeout, with the cause if not), then
	// the topic's max.message.bytes for the producing client's batch
	// limit: records up to it are written.
	probe, file, err := o.cluster.client(c, "-produce")
	if err != nil {
		return err
	}
	// kgo's default partitioner, with our placement of keyed records
	parts := &partitionChooser{by: kgo.UniformBytesPartitioner(64<<10, true, true, o.hasher(file))}
	opts := []kgo.Opt{kgo.DefaultProduceTopic(o.topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(parts)}
	err = o.cluster.reach(ctx, probe)
	if err == nil {
		opts = append(opts, o.cluster.batchLimitOpts(ctx, c, probe, o.topic)...)
	}
	probe.Close()
	if err != nil {
		return err
	}
	cl, _, err := o.cluster.client(c, "-produce", opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var (
		mu       sync.Mutex
		firstErr error
		failed   *kgo.Record
		acked    int64
		prog     progress
	)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer watchStall(&prog, o.cluster.timeout, cancel)()
	done := func(r *kgo.Record, err error) {
		defer prog.settled.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr, failed = err, r
		} else if err == nil {
			acked++
		}
	}
	in := c.Stdin
	if in == nil {
		in = strings.NewReader("")
	}
	lines, records, readErr := 0, 0, error(nil)
	rd := bufio.NewReaderSize(in, 1<<20)
	for {
		line, err := rd.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = fmt.Errorf("reading stdin: %w", err)
			}
			break
		}
		lines++
		if o.input == "json" && len(bytes.TrimSpace(line)) == 0 {
			continue // a blank line holds no record (see the help)
		}
		records++
		r, named, perr := o.record(line)
		if perr != nil {
			readErr = fmt.Errorf("line %d: %w", lines, perr)
			break
		}
		if fixedPartition {
			r.Partition, named = o.partition, true
		}
		r.Context = context.WithValue(ctx, lineKey{}, lineInfo{line: lines, named: named})
		prog.sent.Add(1)
		cl.Produce(ctx, r, done)
	}
	flushErr := cl.Flush(ctx)
	mu.Lock()
	defer mu.Unlock()
	switch {
	case errors.Is(context.Cause(ctx), errStalled):
		return clibase.Failure("%d of %d record(s) acknowledged; %v for --timeout %v while records waited "+
			"(check that the brokers are up, and that the topic %q exists and its partitions have leaders)", acked, records, errStalled, o.cluster.timeout, o.topic)
	case firstErr != nil:
		return clibase.Failure("%d of %d record(s) acknowledged; writing to %q failed: %v (%s)",
			acked, records, o.topic, firstErr, produceHint(firstErr, failed, o.topic, parts.count.Load()))
	case flushErr != nil:
		return clibase.Failure("%d record(s) acknowledged before the wait ended: %v", acked, flushErr)
	case readErr != nil:
		return clibase.Failure("%v; the %d record(s) before it were written to %q", readErr, acked, o.topic)
	}
	fmt.Fprintf(c.Stderr, "produced %d record(s) to %q\n", acked, o.topic)
	return nil
}

// hasher places keyed records as --partitioner says, else as the
// configuration file's kafka.partitioner (file is nil without one), else
// with murmur2.
func (o *produceOptions) hasher(file *config.Config) kgo.PartitionerHasher {
	name := o.partitioner
	if name == "" && file != nil {
		name = string(file.Pipeline.Kafka.Partitioner)
	}
	place, ok := partitioner.ByName(name)
	if !ok {
		place = partitioner.Murmur2 // not reached: the flag and the file were validated
	}
	return func(key []byte, n int) int { return int(place(key, n)) }
}

// produceHint says what to check when writing r to topic failed with
// err; partitions is the topic's partition count if it is known (0: not).
func produceHint(err error, r *kgo.Record, topic string, partitions int32) string {
	info := lineInfo{}
	if r != nil && r.Context != nil {
		info, _ = r.Context.Value(lineKey{}).(lineInfo)
	}
	code, _ := kafkawire.Code(err)
	class := kafkawire.ClassifyCode(code) // the table every caller shares
	switch {
	case errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge):
		size := 0
		if r != nil {
			size = len(r.Key) + len(r.Value)
			for _, h := range r.Headers {
				size += len(h.Key) + len(h.Value)
			}
		}
		return fmt.Sprintf("the record of line %d holds %d bytes of key, value and headers, more than the topic accepts: "+
			"see its max.message.bytes (and the brokers' message.max.bytes), which produce sends up to (or kafka.max_batch_bytes when set)", info.line, size)
	case info.named && partitions > 0 && r.Partition >= partitions:
		return fmt.Sprintf("line %d asks for partition %d, but %q has %d partition(s), 0 to %d: "+
			"fix the line's partition, give --partition, or --by-key to choose by key", info.line, r.Partition, topic, partitions, partitions-1)
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return fmt.Sprintf("check the name; create the topic with: processor topics create %s", topic)
	case errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "the principal may not write the topic: check its ACLs"
	case class == kafkawire.Permanent:
		return fmt.Sprintf("the brokers refuse the record of line %d itself (invalid, corrupt or against the topic's policy): writing it again gets the same answer", info.line)
	case class == kafkawire.Fatal:
		return "the brokers refuse this client, whatever the record: check the setting the error names (the topic's name, kafka.sasl, the brokers' version)"
	}
	return "check that the brokers are up and the principal may write the topic"
}

// lineKey is the key of a record's lineInfo in its Context.
type lineKey struct{}

// lineInfo is where a record came from: its input line, and whether the
// line or --partition chose its partition.
type lineInfo struct {
	line  int
	named bool
}

// partitionChooser writes a record whose partition was named (by its
// line or --partition) to that partition, and any other where by
// chooses. It remembers the partition count of the topic it last saw, so
// a partition the topic lacks can be reported as such.
type partitionChooser struct {
	by    kgo.Partitioner
	count atomic.Int32
}

// ForTopic implements kgo.Partitioner.
func (p *partitionChooser) ForTopic(topic string) kgo.TopicPartitioner {
	return &topicChooser{p: p, by: p.by.ForTopic(topic)}
}

// topicChooser is partitionChooser for one topic. It implements
// kgo.TopicBackupPartitioner, as kgo's default partitioner does, so that
// by keeps its behaviour.
type topicChooser struct {
	p  *partitionChooser
	by kgo.TopicPartitioner
}

func named(r *kgo.Record) bool {
	info, _ := r.Context.Value(lineKey{}).(lineInfo)
	return info.named
}

// RequiresConsistency implements kgo.TopicPartitioner: a named
// partition is waited for even when it has no leader for a while.
func (t *topicChooser) RequiresConsistency(r *kgo.Record) bool {
	return named(r) || t.by.RequiresConsistency(r)
}

// Partition implements kgo.TopicPartitioner.
func (t *topicChooser) Partition(r *kgo.Record, n int) int {
	if named(r) {
		t.p.count.Store(int32(n))
		return int(r.Partition)
	}
	return t.by.Partition(r, n)
}

// PartitionByBackup implements kgo.TopicBackupPartitioner.
func (t *topicChooser) PartitionByBackup(r *kgo.Record, n int, backup kgo.TopicBackupIter) int {
	if named(r) {
		t.p.count.Store(int32(n))
		return int(r.Partition)
	}
	if b, ok := t.by.(kgo.TopicBackupPartitioner); ok {
		return b.PartitionByBackup(r, n, backup)
	}
	return t.by.Partition(r, n)
}

// record builds the record of one input line (its newline included);
// named says the line chose the record's partition.
func (o *produceOptions) record(line []byte) (r *kgo.Record, named bool, err error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	if o.input == "json" {
		var j struct {
			JSONRecord
			Partition *int32 `json:"partition"` // nil: not given
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&j); err != nil {
			return nil, false, fmt.Errorf("not a record as consume -o json prints it: %w", err)
		}
		if rest := bytes.TrimSpace(line[dec.InputOffset():]); len(rest) > 0 {
			return nil, false, fmt.Errorf("%q follows the record: write one JSON record per line", clip(rest, 20))
		}
		if j.Partition != nil && *j.Partition < 0 {
			return nil, false, fmt.Errorf("partition %d: use 0 or more, or leave it out to choose by key", *j.Partition)
		}
		if r, err = fromJSONRecord(j.JSONRecord); err != nil {
			return nil, false, err
		}
		if j.Partition == nil || o.byKey {
			return r, false, nil
		}
		r.Partition = *j.Partition
		return r, true, nil
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	r = &kgo.Record{Value: bytes.Clone(line)}
	if o.keySep != "" {
		k, v, ok := bytes.Cut(line, []byte(o.keySep))
		if !ok {
			return nil, false, fmt.Errorf("no key separator %q", o.keySep)
		}
		r.Key, r.Value = bytes.Clone(k), bytes.Clone(v)
	}
	r.Headers = o.recordHeaders // shared by every record: the client only reads them
	return r, false, nil
}

// clip is b, cut to at most n bytes with "..." after if it was longer.
func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}
