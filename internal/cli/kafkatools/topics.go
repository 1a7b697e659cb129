package kafkatools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/config"
)

func (c *cli) topicsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topics",
		Short: "List, create or delete topics",
		Long: `topics lists a cluster's topics with their partitions and replication
factor (list), creates topics (create) and deletes them (delete). The
cluster comes from a configuration file's kafka: section (-c) or from flags
(--brokers, --tls..., --sasl-...). produce, consume and offsets never
create a topic: this is the way to make one.`,
	}
	cmd.AddCommand(c.topicsListCmd(), c.topicsCreateCmd(), c.topicsDeleteCmd())
	return cmd
}

// TopicRow is one topic of topics list.
type TopicRow struct {
	Topic             string `json:"topic"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal,omitempty"`
}

func (c *cli) topicsListCmd() *cobra.Command {
	var (
		cluster  clusterFlags
		output   string
		internal bool
	)
	cmd := &cobra.Command{
		Use:   "list [TOPIC...]",
		Short: "List topics with their partitions and replication factor",
		Long: `list prints every topic (or the topics named) with its partition count and
replication factor, sorted by name; internal topics (__consumer_offsets,
...) only with --internal. A named topic that does not exist is an error.`,
		Example: "  processor topics list --brokers localhost:9092\n  processor topics list -c app.yaml orders -o json",
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: use table or json", output)
			}
			var rows []TopicRow
			err := cluster.withAdmin(cmd.Context(), c, func(ctx context.Context, adm *kadm.Client, _ *config.Config) error {
				var (
					details kadm.TopicDetails
					err     error
				)
				if internal {
					details, err = adm.ListTopicsWithInternal(ctx, args...)
				} else {
					details, err = adm.ListTopics(ctx, args...)
				}
				if err != nil {
					return cluster.unreachable(err)
				}
				for _, name := range args {
					if d, ok := details[name]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
						return clibase.Failure("topic %q does not exist (check the name; 'processor topics list' lists them)", name)
					}
				}
				for _, d := range details.Sorted() {
					if d.Err != nil {
						return clibase.Failure("topic %q: %v", d.Topic, d.Err)
					}
					rows = append(rows, TopicRow{Topic: d.Topic, Partitions: len(d.Partitions), ReplicationFactor: d.Partitions.NumReplicas(), Internal: d.IsInternal})
				}
				return nil
			})
			if err != nil {
				return err
			}
			if output == "json" {
				if rows == nil {
					rows = []TopicRow{}
				}
				enc := json.NewEncoder(c.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			printTopics(c.Stdout, rows)
			return nil
		},
	}
	cluster.add(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	cmd.Flags().BoolVar(&internal, "internal", false, "list internal topics too")
	return cmd
}

func printTopics(w io.Writer, rows []TopicRow) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tREPLICATION")
	for _, r := range rows {
		name := r.Topic
		if r.Internal {
			name += " (internal)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\n", name, r.Partitions, r.ReplicationFactor)
	}
	_ = tw.Flush()
}

func (c *cli) topicsCreateCmd() *cobra.Command {
	var (
		cluster     clusterFlags
		partitions  int32
		replication int16
		configs     []string
	)
	cmd := &cobra.Command{
		Use:   "create TOPIC... [--partitions N] [--replication-factor R] [--topic-config KEY=VALUE]...",
		Short: "Create topics",
		Long: `create creates each topic named, with --partitions partitions and
--replication-factor replicas of each (-1, the default: the brokers'
num.partitions and default.replication.factor) and the topic settings
given with --topic-config (max.message.bytes=2097152,
retention.ms=86400000, ...). It reports each topic; the exit code is 1 if
any was not created (one that exists already counts as not created).`,
		Example: "  processor topics create --brokers localhost:9092 orders orders.dlq --partitions 12\n" +
			"  processor topics create -c app.yaml big --topic-config max.message.bytes=8388608",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if partitions == 0 || partitions < -1 {
				return errors.New("--partitions: use 1 or more, or -1 for the brokers' default")
			}
			if replication == 0 || replication < -1 {
				return errors.New("--replication-factor: use 1 or more, or -1 for the brokers' default")
			}
			settings := map[string]*string{}
			for _, kv := range configs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("--topic-config %q: write a topic setting as key=value", kv)
				}
				settings[k] = &v
			}
			if dup := duplicate(args); dup != "" {
				return fmt.Errorf("topic %q is named twice", dup)
			}
			return cluster.withAdmin(cmd.Context(), c, func(ctx context.Context, adm *kadm.Client, _ *config.Config) error {
				resps, err := adm.CreateTopics(ctx, partitions, replication, settings, args...)
				if err != nil {
					return cluster.unreachable(err)
				}
				failed := 0
				for _, name := range args {
					r, ok := resps[name]
					switch {
					case !ok:
						failed++
						fmt.Fprintf(c.Stderr, "topic %q: the cluster did not answer for it\n", name)
					case r.Err != nil:
						failed++
						fmt.Fprintf(c.Stderr, "topic %q not created: %v%s (%s)\n", name, r.Err, errDetail(r.ErrMessage), createHint(r.Err))
					default:
						fmt.Fprintf(c.Stdout, "created topic %q: %d partition(s), replication factor %d\n", name, r.NumPartitions, r.ReplicationFactor)
					}
				}
				if failed > 0 {
					return clibase.Failure("%d of %d topic(s) not created", failed, len(args))
				}
				return nil
			})
		},
	}
	cluster.add(cmd.Flags())
	cmd.Flags().Int32Var(&partitions, "partitions", -1, "partitions of each topic (-1: the brokers' num.partitions)")
	cmd.Flags().Int16Var(&replication, "replication-factor", -1, "replicas of each partition (-1: the brokers' default.replication.factor)")
	cmd.Flags().StringArrayVar(&configs, "topic-config", nil, "topic setting `KEY=VALUE` (repeatable)")
	return cmd
}

// createHint says what to check when creating a topic failed with err.
func createHint(err error) string {
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		return "it exists already: 'processor topics list' shows it"
	case errors.Is(err, kerr.InvalidReplicationFactor):
		return "the cluster has fewer brokers than the replication factor: lower --replication-factor"
	case errors.Is(err, kerr.InvalidPartitions):
		return "check --partitions"
	case errors.Is(err, kerr.InvalidConfig) || errors.Is(err, kerr.PolicyViolation):
		return "check the --topic-config settings"
	case errors.Is(err, kerr.InvalidTopicException):
		return "a topic name is 1 to 249 of the characters a-z A-Z 0-9 . _ -"
	case errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "the principal may not create topics: check its ACLs"
	}
	return "check that the brokers are up"
}

func (c *cli) topicsDeleteCmd() *cobra.Command {
	var cluster clusterFlags
	cmd := &cobra.Command{
		Use:   "delete TOPIC...",
		Short: "Delete topics and every record in them",
		Long: `delete deletes each topic named, with every record in it; this cannot be
undone. Consumer groups keep their committed offsets of a deleted topic
until they expire. It reports each topic; the exit code is 1 if any was not
deleted (one that does not exist counts as not deleted).`,
		Example: "  processor topics delete --brokers localhost:9092 orders.tmp",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dup := duplicate(args); dup != "" {
				return fmt.Errorf("topic %q is named twice", dup)
			}
			return cluster.withAdmin(cmd.Context(), c, func(ctx context.Context, adm *kadm.Client, _ *config.Config) error {
				resps, err := adm.DeleteTopics(ctx, args...)
				if err != nil {
					return cluster.unreachable(err)
				}
				failed := 0
				for _, name := range args {
					r, ok := resps[name]
					switch {
					case !ok:
						failed++
						fmt.Fprintf(c.Stderr, "topic %q: the cluster did not answer for it\n", name)
					case errors.Is(r.Err, kerr.UnknownTopicOrPartition):
						failed++
						fmt.Fprintf(c.Stderr, "topic %q not deleted: it does not exist (check the name; 'processor topics list' lists them)\n", name)
					case r.Err != nil:
						failed++
						fmt.Fprintf(c.Stderr, "topic %q not deleted: %v%s\n", name, r.Err, errDetail(r.ErrMessage))
					default:
						fmt.Fprintf(c.Stdout, "deleted topic %q\n", name)
					}
				}
				if failed > 0 {
					return clibase.Failure("%d of %d topic(s) not deleted", failed, len(args))
				}
				return nil
			})
		},
	}
	cluster.add(cmd.Flags())
	return cmd
}

// duplicate returns a name given twice in names, or "".
func duplicate(names []string) string {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return sorted[i]
		}
	}
	return ""
}

// errDetail is a broker's message about an error, as ": message", or "".
func errDetail(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}
