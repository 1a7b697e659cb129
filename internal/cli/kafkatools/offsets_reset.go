package kafkatools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/cli/kafkaclient"
	"github.com/fencepost-dev/fencepost/internal/config"
)

// resetOptions are offsets reset's flags.
type resetOptions struct {
	cluster  clusterFlags
	group    string
	topics   []string
	earliest bool
	latest   bool
	datetime string
	offset   int64
	shift    int64
	duration time.Duration
	execute  bool
	output   string
	set      func(name string) bool // whether a flag was given

	// parsed by check
	want   map[string][]int32 // topic -> partitions named (none: all)
	order  []string           // the topics of want, as first named
	timeAt time.Time          // --to-datetime
}

func (c *cli) resetCmd() *cobra.Command {
	var o resetOptions
	cmd := &cobra.Command{
		Use:   "reset --group G --topic T[:P,...] (--to-earliest | --to-latest | --to-datetime T | --to-offset N | --shift-by N | --by-duration D) [--execute]",
		Short: "Move a consumer group's offsets; prints the plan, applies it with --execute",
		Long: `reset computes new committed offsets for the partitions of the topics named
(all partitions, or those listed after a colon: orders:0,2) and prints the
plan: each partition's current and new offset and how many records the
group skips (new > current) or processes again (new < current). Only
--execute commits it.

A target outside the log is clamped to the log start or the high watermark,
and the plan says where. The group must have no live members: a running
processor would overwrite the offsets with its next commit, so reset
refuses to apply a plan while any member is in the group (stop them first;
"offsets describe" lists them).

--to-datetime takes RFC 3339 (2026-01-02T15:04:05Z): the first record at or
after it. --by-duration D is --to-datetime now minus D. --shift-by N moves
each committed offset by N (negative: back).`,
		Example: "  processor offsets reset -c app.yaml --group enricher --topic orders --to-datetime 2026-01-02T00:00:00Z\n" +
			"  processor offsets reset --brokers localhost:9092 --group enricher --topic orders:0,1 --shift-by -100 --execute",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.set = cmd.Flags().Changed
			if err := o.check(); err != nil {
				return err
			}
			return c.reset(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	o.cluster.add(f)
	f.StringVarP(&o.group, "group", "g", "", "consumer group `ID` (required)")
	f.StringArrayVarP(&o.topics, "topic", "t", nil, "`TOPIC[:P,P...]` to reset, all partitions or those listed (repeatable; required)")
	f.BoolVar(&o.earliest, "to-earliest", false, "to the log start")
	f.BoolVar(&o.latest, "to-latest", false, "to the high watermark (skip everything not yet processed)")
	f.StringVar(&o.datetime, "to-datetime", "", "to the first record at or after this RFC 3339 `TIME`")
	f.Int64Var(&o.offset, "to-offset", 0, "to this `OFFSET`")
	f.Int64Var(&o.shift, "shift-by", 0, "move each committed offset by `N` (negative: back)")
	f.DurationVar(&o.duration, "by-duration", 0, "to the first record at or after now minus `D` (24h, 90m)")
	f.BoolVar(&o.execute, "execute", false, "commit the plan (without it, only print it)")
	f.StringVarP(&o.output, "output", "o", "table", "table or json")
	return cmd
}

// check validates the command line: a group, topics, one target.
func (o *resetOptions) check() error {
	if o.group == "" || len(o.topics) == 0 {
		return errors.New("offsets reset: name the group (--group) and the topics (--topic T or T:0,1)")
	}
	// --to-earliest=false would count as a target below and then plan a
	// time (the high watermark): refuse it
	for name, on := range map[string]bool{"to-earliest": o.earliest, "to-latest": o.latest} {
		if o.set(name) && !on {
			return fmt.Errorf("--%s=false: a target takes no value; leave it out, or give it alone", name)
		}
	}
	var targets []string
	for _, name := range []string{"to-earliest", "to-latest", "to-datetime", "to-offset", "shift-by", "by-duration"} {
		if o.set(name) {
			targets = append(targets, "--"+name)
		}
	}
	o.want, o.order = map[string][]int32{}, nil
	for _, spec := range o.topics {
		topic, parts, err := parseTopicSpec(spec)
		if err != nil {
			return err
		}
		if _, seen := o.want[topic]; !seen {
			o.order = append(o.order, topic)
		}
		o.want[topic] = append(o.want[topic], parts...)
	}
	if len(targets) != 1 {
		return fmt.Errorf("offsets reset: give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, --shift-by, --by-duration (got %d: %s)",
			len(targets), strings.Join(targets, " "))
	}
	if o.set("to-datetime") {
		var err error
		if o.timeAt, err = time.Parse(time.RFC3339Nano, o.datetime); err != nil {
			return fmt.Errorf("--to-datetime %q: use RFC 3339, such as 2026-01-02T15:04:05Z", o.datetime)
		}
	}
	if o.set("to-offset") && o.offset < 0 {
		return errors.New("--to-offset: an offset is 0 or more (use --to-earliest for the log start)")
	}
	if o.set("by-duration") && o.duration <= 0 {
		return errors.New("--by-duration: give a positive duration, such as 24h")
	}
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output %q: use table or json", o.output)
	}
	return nil
}

// planRow is one partition's move.
type planRow struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   *int64 `json:"current"` // nil: no committed offset
	New       int64  `json:"new"`
	// Skipped are records between the current and the new offset the
	// group will not process; Repeated those it will process again.
	Skipped  int64  `json:"skipped"`
	Repeated int64  `json:"repeated"`
	Note     string `json:"note,omitempty"` // where a target was clamped
}

// resetPlan is what reset prints.
type resetPlan struct {
	groupHeader
	Executed   bool      `json:"executed"`
	Partitions []planRow `json:"partitions"`
}

func (c *cli) reset(ctx context.Context, o resetOptions) error {
	return o.cluster.withAdmin(ctx, c, func(ctx context.Context, adm *kadm.Client, _ *config.Config) error {
		return c.resetGroup(ctx, adm, o)
	})
}

// resetGroup plans the reset, applies it if asked and allowed, and
// prints it.
func (c *cli) resetGroup(ctx context.Context, adm *kadm.Client, o resetOptions) error {
	g, err := readGroup(ctx, adm, o.group)
	if err != nil {
		return o.cluster.unreachable(err)
	}
	plan, err := o.plan(ctx, adm, g)
	if err != nil {
		return err
	}
	if o.execute && g.live() {
		printPlan(c.Stdout, plan, o.output)
		return clibase.Failure("not applied: group %q has %d live member(s) (%s); stop them first, "+
			"or their next commit overwrites the offsets", o.group, len(g.members), memberList(g.members))
	}
	if o.execute {
		if err := commitPlan(ctx, adm, o.group, plan); err != nil {
			return clibase.Failure("not applied: %v (check the group has no members and the principal may commit its offsets)", err)
		}
		plan.Executed = true
	}
	printPlan(c.Stdout, plan, o.output)
	switch {
	case o.execute:
		fmt.Fprintf(c.Stderr, "applied: group %q now starts from the new offsets\n", o.group)
	case g.live():
		fmt.Fprintf(c.Stderr, "plan only; the group has %d live member(s) (%s): --execute refuses until they stop\n", len(g.members), memberList(g.members))
	default:
		fmt.Fprintln(c.Stderr, "plan only: add --execute to apply it")
	}
	return nil
}

func memberList(ms []kadm.DescribedGroupMember) string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s on %s", m.ClientID, m.ClientHost))
	}
	return strings.Join(out, ", ")
}

// plan computes the new offset of every partition named.
func (o *resetOptions) plan(ctx context.Context, adm *kadm.Client, g groupState) (resetPlan, error) {
	topics := o.order
	b, err := kafkaclient.ReadBounds(ctx, adm, topics, false)
	if err != nil {
		return resetPlan{}, o.cluster.unreachable(err)
	}
	var at kadm.ListedOffsets
	if o.set("to-datetime") || o.set("by-duration") {
		t := o.timeAt
		if o.set("by-duration") {
			t = time.Now().Add(-o.duration)
		}
		if at, err = kafkaclient.ListAfter(ctx, adm, t, topics...); err != nil {
			return resetPlan{}, o.cluster.unreachable(err)
		}
	}
	plan := resetPlan{groupHeader: groupHeader{Group: o.group, Members: len(g.members)}, Partitions: []planRow{}}
	var missing, uncommitted []string
	for _, topic := range topics {
		for _, p := range b.Partitions(topic, o.want[topic]) {
			end, ok := b.Ends.Lookup(topic, p)
			start, _ := b.Starts.Lookup(topic, p)
			if !ok {
				missing = append(missing, fmt.Sprintf("%s:%d", topic, p))
				continue
			}
			row := planRow{Topic: topic, Partition: p}
			cur, has := g.committed(topic, p)
			if has {
				row.Current = &cur
			}
			switch {
			case o.earliest:
				row.New = start.Offset
			case o.latest:
				row.New = end.Offset
			case o.set("to-offset"):
				row.New = o.offset
			case o.set("shift-by"):
				if !has {
					uncommitted = append(uncommitted, fmt.Sprintf("%s:%d", topic, p))
					continue
				}
				row.New = cur + o.shift
			default: // a time
				row.New = b.TimeOffset(at, topic, p)
				if row.New >= end.Offset {
					row.Note = "no record at or after the time: the high watermark"
				}
			}
			row.clamp(start.Offset, end.Offset)
			plan.Partitions = append(plan.Partitions, row)
		}
	}
	if len(missing) > 0 {
		return resetPlan{}, clibase.Failure("no such partition: %s (offsets describe lists the partitions)", strings.Join(missing, ", "))
	}
	if len(uncommitted) > 0 {
		return resetPlan{}, clibase.Failure("--shift-by needs a committed offset, and %s have none (use --to-offset, --to-earliest or --to-latest for them)",
			strings.Join(uncommitted, ", "))
	}
	return plan, nil
}

// clamp keeps the new offset within [start, end] and computes what moves.
func (r *planRow) clamp(start, end int64) {
	switch {
	case r.New < start:
		r.New, r.Note = start, fmt.Sprintf("clamped to the log start %d", start)
	case r.New > end:
		r.New, r.Note = end, fmt.Sprintf("clamped to the high watermark %d", end)
	}
	if r.Current == nil {
		return
	}
	// only records still in the log are skipped or repeated
	cur := min(max(*r.Current, start), end)
	if r.New > cur {
		r.Skipped = r.New - cur
	} else {
		r.Repeated = cur - r.New
	}
}

// parseTopicSpec parses "topic" or "topic:0,1,2".
func parseTopicSpec(spec string) (string, []int32, error) {
	topic, list, hasList := strings.Cut(spec, ":")
	if topic == "" {
		return "", nil, fmt.Errorf("--topic %q: name a topic, optionally with partitions (orders:0,1)", spec)
	}
	if !hasList {
		return topic, nil, nil
	}
	var parts []int32
	for _, s := range strings.Split(list, ",") {
		p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil || p < 0 {
			return "", nil, fmt.Errorf("--topic %q: %q is not a partition number", spec, s)
		}
		parts = append(parts, int32(p))
	}
	return topic, parts, nil
}

// commitPlan commits the new offsets for the group.
func commitPlan(ctx context.Context, adm *kadm.Client, group string, plan resetPlan) error {
	offsets := kadm.Offsets{}
	for _, r := range plan.Partitions {
		offsets.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.New, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctx, group, offsets)
	if err == nil {
		err = resp.Error()
	}
	return err
}

func printPlan(w io.Writer, p resetPlan, output string) {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(p)
		return
	}
	fmt.Fprintf(w, "group %s: reset plan\n\n", p.Group)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT\tNEW\tCHANGE\tNOTE")
	var skipped, repeated int64
	for _, r := range p.Partitions {
		cur, change := "-", "-"
		if r.Current != nil {
			cur = strconv.FormatInt(*r.Current, 10)
			switch {
			case r.Skipped > 0:
				change = fmt.Sprintf("skips %d", r.Skipped)
			case r.Repeated > 0:
				change = fmt.Sprintf("repeats %d", r.Repeated)
			default:
				change = "none"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", r.Topic, r.Partition, cur, r.New, change, r.Note)
		skipped += r.Skipped
		repeated += r.Repeated
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d partition(s): %d record(s) skipped, %d processed again\n", len(p.Partitions), skipped, repeated)
}
