package kafkatools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fencepost-dev/fencepost/internal/cli/kafkaclient"
	"github.com/fencepost-dev/fencepost/internal/config"
)

func (c *cli) offsetsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "offsets",
		Short: "Show or move a consumer group's offsets",
		Long: `offsets shows a consumer group's committed offsets against its partitions'
log bounds (describe), and moves them (reset), like kafka-consumer-groups.sh.
The cluster comes from a configuration file's kafka: section (-c) or from
flags (--brokers, --tls..., --sasl-...).`,
	}
	cmd.AddCommand(c.describeCmd(), c.resetCmd())
	return cmd
}

// describeOptions are offsets describe's flags.
type describeOptions struct {
	cluster clusterFlags
	group   string
	topics  []string
	output  string
}

func (c *cli) describeCmd() *cobra.Command {
	var o describeOptions
	cmd := &cobra.Command{
		Use:   "describe --group G [--topic T]...",
		Short: "Per partition: committed offset, log start, high watermark, lag and member",
		Long: `describe prints, for every partition of the topics the group committed or is
assigned (or of the topics named with --topic): the committed offset ("-"
if none), the log start offset, the high watermark, the lag (the records
still in the log from the committed offset, or from the log start without
one, to the high watermark) and the member that holds the partition. With
-c FILE the group defaults to the file's consumer.group.`,
		Example: "  processor offsets describe -c app.yaml\n  processor offsets describe --brokers localhost:9092 --group enricher --topic orders --output json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "table" && o.output != "json" {
				return fmt.Errorf("--output %q: use table or json", o.output)
			}
			return c.describe(cmd.Context(), o)
		},
	}
	o.cluster.add(cmd.Flags())
	cmd.Flags().StringVarP(&o.group, "group", "g", "", "consumer group `ID` (default: the file's consumer.group)")
	cmd.Flags().StringArrayVarP(&o.topics, "topic", "t", nil, "only this `TOPIC` (repeatable); its partitions are listed even without commits")
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "table or json")
	return cmd
}

// GroupPartition is one row of describe.
type GroupPartition struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Committed     *int64 `json:"committed"` // nil: none
	LogStart      int64  `json:"log_start"`
	HighWatermark int64  `json:"high_watermark"`
	Lag           int64  `json:"lag"`
	Member        string `json:"member,omitempty"`
	ClientID      string `json:"client_id,omitempty"`
	Host          string `json:"host,omitempty"`
}

// groupHeader names a group and counts its live members.
type groupHeader struct {
	Group   string `json:"group"`
	Members int    `json:"members"`
}

// GroupDescription is what describe prints.
type GroupDescription struct {
	groupHeader
	State      string           `json:"state"`
	Partitions []GroupPartition `json:"partitions"`
}

func (c *cli) describe(ctx context.Context, o describeOptions) error {
	var d GroupDescription
	err := o.cluster.withAdmin(ctx, c, func(ctx context.Context, adm *kadm.Client, cfg *config.Config) error {
		if o.group == "" && cfg != nil {
			o.group = cfg.Pipeline.Consumer.Group
		}
		if o.group == "" {
			return errors.New("offsets describe: name the group with --group (or -c FILE with consumer.group)")
		}
		var err error
		if d, err = describeGroup(ctx, adm, o.group, o.topics, cfg != nil && cfg.Pipeline.Consumer.ReadCommitted); err != nil {
			return o.cluster.unreachable(err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(d.Partitions) == 0 {
		fmt.Fprintf(c.Stderr, "group %q has no committed offsets and no members (check the name, or name topics with --topic)\n", o.group)
	}
	if o.output == "json" {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	printDescription(c.Stdout, d)
	return nil
}

// groupState is a group's state, members and commits.
type groupState struct {
	state   string
	members []kadm.DescribedGroupMember
	commits kadm.OffsetResponses
}

// readGroup describes group and fetches its committed offsets. A group
// that does not exist is Dead with no members and no commits.
func readGroup(ctx context.Context, adm *kadm.Client, group string) (groupState, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return groupState{}, fmt.Errorf("describe group %q: %w", group, err)
	}
	g := described[group]
	if g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
		return groupState{}, fmt.Errorf("describe group %q: %w", group, g.Err)
	}
	st := groupState{state: g.State, members: g.Members}
	if st.state == "" {
		st.state = "Dead"
	}
	st.commits, err = adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return groupState{}, fmt.Errorf("fetch the offsets of group %q: %w", group, err)
	}
	return st, nil
}

// live reports whether the group has members: its offsets are theirs.
func (g groupState) live() bool { return len(g.members) > 0 }

// owners maps each assigned partition to its member.
func (g groupState) owners() map[string]map[int32]*kadm.DescribedGroupMember {
	out := map[string]map[int32]*kadm.DescribedGroupMember{}
	for i := range g.members {
		m := &g.members[i]
		ca, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		for _, t := range ca.Topics {
			if out[t.Topic] == nil {
				out[t.Topic] = map[int32]*kadm.DescribedGroupMember{}
			}
			for _, p := range t.Partitions {
				out[t.Topic][p] = m
			}
		}
	}
	return out
}

// committed returns the group's committed offset of a partition, if any.
func (g groupState) committed(topic string, p int32) (int64, bool) {
	o, ok := g.commits.Lookup(topic, p)
	if !ok || o.Err != nil || o.At < 0 {
		return 0, false
	}
	return o.At, true
}

// describeGroup builds the description of group over topics (none: the
// topics it committed or is assigned); with readCommitted, lag is
// measured against the last stable offset.
func describeGroup(ctx context.Context, adm *kadm.Client, group string, topics []string, readCommitted bool) (GroupDescription, error) {
	g, err := readGroup(ctx, adm, group)
	if err != nil {
		return GroupDescription{}, err
	}
	owners := g.owners()
	if len(topics) == 0 {
		for t := range g.commits {
			topics = append(topics, t)
		}
		for t := range owners {
			topics = append(topics, t)
		}
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	d := GroupDescription{groupHeader: groupHeader{Group: group, Members: len(g.members)}, State: g.state, Partitions: []GroupPartition{}}
	if len(topics) == 0 {
		return d, nil
	}
	b, err := kafkaclient.ReadBounds(ctx, adm, topics, readCommitted)
	if err != nil {
		return GroupDescription{}, err
	}
	b.Ends.Each(func(end kadm.ListedOffset) {
		row := GroupPartition{Topic: end.Topic, Partition: end.Partition, HighWatermark: end.Offset, LogStart: -1}
		if st, ok := b.Starts.Lookup(end.Topic, end.Partition); ok {
			row.LogStart = st.Offset
		}
		// the records still in the log the group has not committed
		from := max(row.LogStart, 0)
		if off, ok := g.committed(end.Topic, end.Partition); ok {
			row.Committed, from = &off, max(off, from)
		}
		row.Lag = max(row.HighWatermark-from, 0)
		if m := owners[end.Topic][end.Partition]; m != nil {
			row.Member, row.ClientID, row.Host = m.MemberID, m.ClientID, m.ClientHost
		}
		d.Partitions = append(d.Partitions, row)
	})
	slices.SortFunc(d.Partitions, func(a, b GroupPartition) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
	return d, nil
}

func printDescription(w io.Writer, d GroupDescription) {
	fmt.Fprintf(w, "group %s: %s, %d member(s)\n\n", d.Group, d.State, d.Members)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tLOG-START\tHIGH-WATERMARK\tLAG\tMEMBER")
	var total int64
	for _, p := range d.Partitions {
		committed, member := "-", "-"
		if p.Committed != nil {
			committed = strconv.FormatInt(*p.Committed, 10)
		}
		if p.Member != "" {
			member = fmt.Sprintf("%s (%s, %s)", p.Member, p.ClientID, p.Host)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\n", p.Topic, p.Partition, committed, p.LogStart, p.HighWatermark, p.Lag, member)
		total += p.Lag
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\ntotal lag %d\n", total)
}
