package kafkatools

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/cli/kafkaclient"
)

// consumeOptions are consume's flags.
type consumeOptions struct {
	cluster    clusterFlags
	topic      string
	partitions []int32
	from       string
	count      int64
	follow     bool
	output     string

	start startAt // from, parsed when the flags are checked
}

func (c *cli) consumeCmd() *cobra.Command {
	var o consumeOptions
	cmd := &cobra.Command{
		Use:   "consume --topic T [--from WHERE] [--count N] [--follow]",
		Short: "Print a topic's records (no consumer group)",
		Long: `consume prints a topic's records from a start position, without a consumer
group (nothing is committed): by default from the log start to the end of
every partition as it was when consume started, then it exits; --follow
keeps printing new records until Ctrl-C. --count stops after N records.

--from is earliest (the default), latest, an offset (42), an offset from
each partition's end (-10: the last ten records), or an RFC 3339 time (the
first record at or after it). An offset outside a partition's log is
clamped to it.

--output text prints "topic/partition@offset time key=... value" with
headers when there are any, quoting what is not printable; json prints one
JSON object per line (see produce --input json; binary keys and values are
base64, in key_base64 and value_base64); value prints the raw values, one
per line.`,
		Example: "  processor consume -c app.yaml --topic purchases --count 5\n" +
			"  processor consume --brokers localhost:9092 --topic events.dlq --from -10 --output json\n" +
			"  processor consume --brokers localhost:9092 --topic orders --from 2026-01-02T15:00:00Z --follow",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.topic == "" {
				return errors.New("consume: name the topic with --topic")
			}
			if o.output != "text" && o.output != "json" && o.output != "value" {
				return fmt.Errorf("--output %q: use text, json or value", o.output)
			}
			if o.count < 0 {
				return errors.New("--count must not be negative")
			}
			var err error
			if o.start, err = parseFrom(o.from); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return c.consume(ctx, o)
		},
	}
	f := cmd.Flags()
	o.cluster.add(f)
	o.cluster.records = true
	f.StringVarP(&o.topic, "topic", "t", "", "the `TOPIC` to read (required)")
	f.Int32SliceVarP(&o.partitions, "partitions", "p", nil, "only these partitions (default: all)")
	f.StringVar(&o.from, "from", "earliest", "where to start: earliest, latest, OFFSET, -N (N before the end) or an RFC 3339 time")
	f.Int64VarP(&o.count, "count", "n", 0, "stop after `N` records (0: no limit)")
	f.BoolVarP(&o.follow, "follow", "f", false, "keep printing new records until Ctrl-C")
	f.StringVarP(&o.output, "output", "o", "text", "text, json or value")
	return cmd
}

// startAt is a parsed --from.
type startAt struct {
	kind   string // earliest, latest, offset, tail, time
	offset int64  // offset, or the N of tail
	time   time.Time
}

func parseFrom(s string) (startAt, error) {
	switch s {
	case "earliest", "beginning", "":
		return startAt{kind: "earliest"}, nil
	case "latest", "end":
		return startAt{kind: "latest"}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return startAt{kind: "tail", offset: -n}, nil
		}
		return startAt{kind: "offset", offset: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return startAt{kind: "time", time: t}, nil
	}
	return startAt{}, fmt.Errorf("--from %q: use earliest, latest, an offset (42), -N (the last N) or an RFC 3339 time (2026-01-02T15:04:05Z)", s)
}

// partitionRange is where consume starts reading a partition and where
// it stops (the end as it was at start).
type partitionRange struct{ start, end int64 }

// ranges resolves the start of every partition read and its end now.
func (o *consumeOptions) ranges(ctx context.Context, adm *kadm.Client) (map[int32]partitionRange, error) {
	from := o.start
	b, err := kafkaclient.ReadBounds(ctx, adm, []string{o.topic}, false)
	if err != nil {
		return nil, err
	}
	var at kadm.ListedOffsets
	if from.kind == "time" {
		if at, err = kafkaclient.ListAfter(ctx, adm, from.time, o.topic); err != nil {
			return nil, err
		}
	}
	out := map[int32]partitionRange{}
	for _, p := range b.Partitions(o.topic, o.partitions) {
		end, ok := b.Ends.Lookup(o.topic, p)
		if !ok {
			return nil, clibase.Failure("topic %q has no partition %d", o.topic, p)
		}
		first, _ := b.Starts.Lookup(o.topic, p)
		r := partitionRange{start: first.Offset, end: end.Offset}
		switch from.kind {
		case "latest":
			r.start = r.end
		case "offset":
			r.start = from.offset
		case "tail":
			r.start = r.end - from.offset
		case "time":
			r.start = b.TimeOffset(at, o.topic, p)
		}
		r.start = min(max(r.start, first.Offset), r.end)
		out[p] = r
	}
	return out, nil
}

func (c *cli) consume(ctx context.Context, o consumeOptions) error {
	k, _, err := o.cluster.settings(c)
	if err != nil {
		return err
	}
	var ranges map[int32]partitionRange
	err = o.cluster.withAdminTo(ctx, k, func(ctx context.Context, adm *kadm.Client) error {
		var err error
		if ranges, err = o.ranges(ctx, adm); err != nil {
			return o.cluster.unreachable(err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	offsets := map[int32]kgo.Offset{}
	pending := map[int32]int64{} // partitions to read up to their end
	for p, r := range ranges {
		offsets[p] = kgo.NewOffset().At(r.start)
		if r.start < r.end {
			pending[p] = r.end
		}
	}
	cl, err := kafkaclient.NewClient(k, "-consume", kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: offsets}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return clibase.Failure("%v", err)
	}
	defer cl.Close()
	out := bufio.NewWriter(c.Stdout)
	defer out.Flush()
	var n int64
	for o.follow || len(pending) > 0 {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if !o.follow {
			// a partition whose last offsets hold no record (transaction
			// markers) never reaches its end: stop waiting after a while
			pctx, cancel = context.WithTimeout(ctx, o.cluster.timeout)
		}
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil // interrupted
		}
		if err := fetchError(fs); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				fmt.Fprintf(c.Stderr, "consume: nothing more arrived within %v; partitions not read to their end: %s\n", o.cluster.timeout, pendingList(pending))
				return nil
			}
			return o.cluster.unreachable(err)
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			end, reading := pending[r.Partition]
			if !o.follow && !reading {
				continue // past the end of this partition
			}
			if reading && r.Offset+1 >= end {
				delete(pending, r.Partition)
				if r.Offset >= end {
					continue
				}
			}
			if err := writeRecord(out, r, o.output); err != nil {
				return err
			}
			if n++; o.count > 0 && n >= o.count {
				return nil
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// fetchError returns the first error of a poll.
func fetchError(fs kgo.Fetches) error {
	for _, e := range fs.Errors() {
		return fmt.Errorf("%s/%d: %w", e.Topic, e.Partition, e.Err)
	}
	return nil
}

func pendingList(pending map[int32]int64) string {
	var out []string
	for p, end := range pending {
		out = append(out, fmt.Sprintf("%d (end %d)", p, end))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// writeRecord prints r in the output format.
func writeRecord(w io.Writer, r *kgo.Record, format string) error {
	var err error
	switch format {
	case "json":
		var b []byte
		if b, err = json.Marshal(toJSONRecord(r)); err == nil {
			_, err = fmt.Fprintf(w, "%s\n", b)
		}
	case "value":
		_, err = fmt.Fprintf(w, "%s\n", r.Value)
	default:
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, printable(h.Key, true)+"="+printable(string(h.Value), true))
		}
		headers := ""
		if len(hs) > 0 {
			headers = " headers=" + strings.Join(hs, ",")
		}
		key := "null"
		if r.Key != nil {
			key = printable(string(r.Key), true)
		}
		_, err = fmt.Fprintf(w, "%s/%d@%d %s key=%s%s %s\n", r.Topic, r.Partition, r.Offset,
			r.Timestamp.UTC().Format(time.RFC3339Nano), key, headers, printable(string(r.Value), false))
	}
	return err
}

// printable returns s as it is when it prints on one line (and, if
// field, has no space, comma, equals sign or quote, which separate the
// fields of a line), else quoted with Go's escapes.
func printable(s string, field bool) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r != ' ' && !unicode.IsGraphic(r) }) &&
		(!field || s != "" && s != "null" && !strings.ContainsAny(s, " ,=\"")) {
		return s
	}
	return strconv.Quote(s)
}
