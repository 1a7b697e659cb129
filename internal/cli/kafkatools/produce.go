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

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
)

// produceOptions are produce's flags.
type produceOptions struct {
	cluster   clusterFlags
	topic     string
	partition int32
	keySep    string
	headers   []string
	input     string

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
line is a record as consume --output json prints it (key, value, headers,
timestamp; key_base64 and value_base64 for binary data), so a topic's
records can be copied exactly: consume -o json ... | produce -i json ....

Records go to the partition their key hashes to (records without a key
fill one partition's batch at a time), or to --partition. A line that cannot be read stops produce with an
error naming it; the lines before it were written.`,
		Example: "  echo 'u1:{\"type\":\"purchase\"}' | processor produce --brokers localhost:9092 --topic events --key-separator :\n" +
			"  processor consume -c app.yaml --topic events -o json | processor produce -c app.yaml --topic events.copy -i json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.topic == "" {
				return errors.New("produce: name the topic with --topic")
			}
			if o.input != "text" && o.input != "json" {
				return fmt.Errorf("--input %q: use text or json", o.input)
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
	f.Int32VarP(&o.partition, "partition", "p", 0, "write every record to this `PARTITION` (default: by key)")
	f.StringVarP(&o.keySep, "key-separator", "K", "", "split each line at the first `SEP` into key and value")
	f.StringArrayVarP(&o.headers, "header", "H", nil, "add the header `KEY=VALUE` to every record (repeatable)")
	f.StringVarP(&o.input, "input", "i", "text", "text or json (the lines consume --output json prints)")
	return cmd
}

func (c *cli) produce(ctx context.Context, o produceOptions, fixedPartition bool) error {
	opts := []kgo.Opt{kgo.DefaultProduceTopic(o.topic), kgo.RequiredAcks(kgo.AllISRAcks())}
	if fixedPartition {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, _, err := o.cluster.client(c, "-produce", opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var (
		mu       sync.Mutex
		firstErr error
		acked    int64
	)
	done := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		} else if err == nil {
			acked++
		}
	}
	in := c.Stdin
	if in == nil {
		in = strings.NewReader("")
	}
	lines, readErr := 0, error(nil)
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
		r, perr := o.record(line)
		if perr != nil {
			readErr = fmt.Errorf("line %d: %w", lines, perr)
			break
		}
		if fixedPartition {
			r.Partition = o.partition
		}
		cl.Produce(ctx, r, done)
	}
	flushErr := cl.Flush(ctx)
	mu.Lock()
	defer mu.Unlock()
	switch {
	case firstErr != nil:
		return clibase.Failure("%d of %d record(s) acknowledged; writing to %q failed: %v (check the topic exists and the principal may write it)",
			acked, lines, o.topic, firstErr)
	case flushErr != nil:
		return clibase.Failure("%d record(s) acknowledged before the wait ended: %v", acked, flushErr)
	case readErr != nil:
		return clibase.Failure("%v; the %d record(s) before it were written to %q", readErr, acked, o.topic)
	}
	fmt.Fprintf(c.Stderr, "produced %d record(s) to %q\n", acked, o.topic)
	return nil
}

// record builds the record of one input line (its newline included).
func (o *produceOptions) record(line []byte) (*kgo.Record, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	if o.input == "json" {
		var j JSONRecord
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&j); err != nil {
			return nil, fmt.Errorf("not a record as consume -o json prints it: %w", err)
		}
		return j.record()
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	r := &kgo.Record{Value: bytes.Clone(line)}
	if o.keySep != "" {
		k, v, ok := bytes.Cut(line, []byte(o.keySep))
		if !ok {
			return nil, fmt.Errorf("no key separator %q", o.keySep)
		}
		r.Key, r.Value = bytes.Clone(k), bytes.Clone(v)
	}
	r.Headers = o.recordHeaders // shared by every record: the client only reads them
	return r, nil
}
