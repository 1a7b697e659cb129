package kafkatools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// stateResetOptions are state reset's flags.
type stateResetOptions struct {
	stateOptions
	all     bool
	execute bool
}

func (c *cli) stateResetCmd() *cobra.Command {
	var o stateResetOptions
	cmd := &cobra.Command{
		Use:   "reset (STORE... | --all) [--execute]",
		Short: "Delete a group's stores: local directories and changelog topics; prints the plan, applies it with --execute",
		Long: `reset deletes the state of a group's stores, as Kafka Streams' application
reset tool does for an application: for each store, its directory in the
state directory (state.dir/<store>, every partition) and its changelog topic
<group>-<store>-changelog. The next run starts the stores empty, and creates
the changelog topics again.

Without --execute it only prints the plan: for each store, the local
directory (partitions, size) and the changelog topic (partitions) it would
delete. --all takes the stores the file's stages declare (-c) and those with
a directory in the state directory; topics named like a changelog of the
group but of no store in the plan are listed and left alone.

--execute refuses while the group has members (a running processor would
write to the changelog as it is deleted, and hold its local stores open:
stop every instance first), and while a process holds one of the local
stores open.

The group's committed offsets are left as they are: the stores start empty
and processing goes on from the committed offsets. To build the state again
from the input, move the offsets back too (processor offsets reset
--to-earliest). Only this machine's state directory is cleared: run reset
on every machine that keeps state for the group (or delete its state
directory), or an instance may load its old local copy on top of the new
changelog.`,
		Example: "  processor state reset -c app.yaml counts\n" +
			"  processor state reset -c app.yaml --all --execute\n" +
			"  processor state reset --brokers localhost:9092 --group enricher --dir /var/lib/fencepost/state counts --execute",
		RunE: func(cmd *cobra.Command, args []string) error {
			o.set = cmd.Flags().Changed
			if o.output != "text" && o.output != "json" {
				return fmt.Errorf("--output %q: use text or json", o.output)
			}
			switch {
			case o.all && len(args) > 0:
				return errors.New("state reset: name stores or give --all, not both")
			case !o.all && len(args) == 0:
				return errors.New("state reset: name the stores to reset, or give --all")
			}
			for _, s := range args {
				if err := checkStore(s); err != nil {
					return err
				}
			}
			return c.stateReset(cmd.Context(), &o, args)
		},
	}
	f := cmd.Flags()
	o.add(f, false)
	f.BoolVar(&o.all, "all", false, "every store: those the file's stages declare and those in the state directory")
	f.BoolVar(&o.execute, "execute", false, "delete (without it, only print the plan)")
	return cmd
}

// StoreReset is one store's row of reset's plan.
type StoreReset struct {
	Store string `json:"store"`
	// Dir is the store's local directory; "" when there is none.
	Dir             string  `json:"dir,omitempty"`
	LocalPartitions []int32 `json:"local_partitions"`
	LocalBytes      int64   `json:"local_bytes"`
	// InUse are the local partitions a process holds open.
	InUse     []int32 `json:"in_use,omitempty"`
	Changelog string  `json:"changelog"`
	// ChangelogPartitions is the changelog topic's partition count; 0
	// when it does not exist.
	ChangelogPartitions int `json:"changelog_partitions"`
}

// StateResetPlan is what state reset prints.
type StateResetPlan struct {
	Group string `json:"group"`
	// Members are the group's live members.
	Members []string `json:"members"`
	// Dir is the state directory; "" with state.store: memory.
	Dir      string       `json:"dir"`
	Executed bool         `json:"executed"`
	Stores   []StoreReset `json:"stores"`
	// LeftAlone are topics named like changelogs of the group that no
	// store of the plan names (--all).
	LeftAlone []string `json:"left_alone,omitempty"`
}

func (c *cli) stateReset(ctx context.Context, o *stateResetOptions, named []string) error {
	if err := o.resolve(c, true, false); err != nil {
		return err
	}
	if o.dir == "" {
		if o.cfg == nil {
			return errors.New("name the state directory with --dir (the processor's state.dir), or read it from the file with -c FILE")
		}
		if st := o.cfg.Pipeline.WithDefaults().State; st.Store != pipeline.StoreMemory {
			o.dir = st.Dir
		}
	}
	stores := slices.Clone(named)
	if o.all {
		if o.cfg != nil {
			stores = append(stores, o.cfg.Stores()...)
		}
		if o.dir != "" {
			local, err := state.LocalStores(o.dir)
			if err != nil {
				return clibase.Failure("%v", err)
			}
			stores = append(stores, local...)
		}
	}
	stores = unique(stores)
	if o.all && len(stores) == 0 {
		return clibase.Failure("--all: no stores to reset: %s", o.noStores())
	}
	plan := StateResetPlan{Group: o.group, Dir: o.dir, Members: []string{}, Stores: []StoreReset{}}
	for _, s := range stores {
		row, err := o.local(s)
		if err != nil {
			return err
		}
		plan.Stores = append(plan.Stores, row)
	}
	k, _, err := o.cluster.settings(c)
	if err != nil {
		return err
	}
	return o.cluster.withAdminTo(ctx, k, func(ctx context.Context, adm *kadm.Client) error {
		if err := o.remote(ctx, adm, &plan); err != nil {
			return err
		}
		var unknown []string
		for _, s := range plan.Stores {
			if s.Dir == "" && s.ChangelogPartitions == 0 {
				unknown = append(unknown, s.Store)
			}
		}
		if len(unknown) > 0 && !o.all {
			return clibase.Failure("nothing to reset for store(s) %s: no directory in %s and no changelog topic (check the names%s)",
				strings.Join(unknown, ", "), o.where(), o.declared())
		}
		if !o.execute {
			printResetPlan(c.Stdout, plan, o.output)
			if len(plan.Members) > 0 {
				fmt.Fprintf(c.Stderr, "plan only; group %q has %d live member(s) (%s): --execute refuses until they stop\n",
					plan.Group, len(plan.Members), strings.Join(plan.Members, ", "))
			} else {
				fmt.Fprintln(c.Stderr, "plan only: add --execute to apply it")
			}
			return nil
		}
		if err := o.apply(ctx, adm, &plan); err != nil {
			printResetPlan(c.Stdout, plan, o.output)
			return err
		}
		printResetPlan(c.Stdout, plan, o.output)
		fmt.Fprintf(c.Stderr, "applied: the next run of group %q starts these stores empty and creates their changelog topics again "+
			"(a broker may take a moment to finish deleting a topic: 'processor topics list' shows when it is gone)\n", plan.Group)
		input := "TOPIC"
		if o.cfg != nil && len(o.cfg.Pipeline.Consumer.Topics) == 1 {
			input = o.cfg.Pipeline.Consumer.Topics[0]
		}
		fmt.Fprintf(c.Stderr, "the group's committed offsets are unchanged: to build the state again from the input, "+
			"also run processor offsets reset --group %s --topic %s --to-earliest --execute; "+
			"and reset the state directory of every other machine that ran the group\n", plan.Group, input)
		return nil
	})
}

// where names the state directory for messages.
func (o *stateResetOptions) where() string {
	if o.dir == "" {
		return "memory (state.store: memory)"
	}
	return o.dir
}

// noStores says why --all found nothing.
func (o *stateResetOptions) noStores() string {
	msg := "no configuration file names any (-c)"
	if o.cfg != nil {
		msg = fmt.Sprintf("no stage of %s declares a store", o.cluster.config)
	}
	if o.dir != "" {
		msg += fmt.Sprintf(", and %s holds none", o.dir)
	}
	return msg + "; name the stores to reset"
}

// local fills in a store's local directory.
func (o *stateResetOptions) local(store string) (StoreReset, error) {
	row := StoreReset{Store: store, LocalPartitions: []int32{}}
	if o.dir == "" {
		return row, nil
	}
	dir := filepath.Join(o.dir, store)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return row, nil
	case err != nil:
		return row, clibase.Failure("%v", err)
	case !fi.IsDir():
		return row, clibase.Failure("%s is not a directory: not a store's (check --dir)", dir)
	}
	if err := state.CheckStoreDir(o.dir, store); err != nil {
		return row, clibase.Failure("not a store's directory, so not reset: %v (a store's directory holds only its partitions' pebble databases: check --dir and the name)", err)
	}
	row.Dir = dir
	if row.LocalPartitions, err = state.LocalPartitions(o.dir, store); err != nil {
		return row, clibase.Failure("%v", err)
	}
	if row.LocalPartitions == nil {
		row.LocalPartitions = []int32{}
	}
	if row.InUse, err = state.InUse(o.dir, store); err != nil {
		return row, clibase.Failure("%v", err)
	}
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if fi, err := d.Info(); err == nil {
			row.LocalBytes += fi.Size()
		}
		return nil
	})
	if err != nil {
		return row, clibase.Failure("%v", err)
	}
	return row, nil
}

// remote fills in the group's members and the changelog topics.
func (o *stateResetOptions) remote(ctx context.Context, adm *kadm.Client, plan *StateResetPlan) error {
	members, err := liveMembers(ctx, adm, plan.Group)
	if err != nil {
		return o.cluster.unreachable(err)
	}
	plan.Members = append(plan.Members, members...)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return o.cluster.unreachable(err)
	}
	named := map[string]bool{}
	for i := range plan.Stores {
		s := &plan.Stores[i]
		s.Changelog = state.ChangelogTopic(plan.Group, s.Store)
		named[s.Changelog] = true
		if d, ok := topics[s.Changelog]; ok && d.Err == nil {
			s.ChangelogPartitions = len(d.Partitions)
		}
	}
	if o.all {
		for _, t := range topics.Names() {
			if !named[t] && strings.HasPrefix(t, plan.Group+"-") && strings.HasSuffix(t, "-changelog") {
				plan.LeftAlone = append(plan.LeftAlone, t)
			}
		}
		slices.Sort(plan.LeftAlone)
	}
	return nil
}

// apply deletes what the plan names, once nothing holds it: the
// changelog topics first, then, if they all went, the local directories.
func (o *stateResetOptions) apply(ctx context.Context, adm *kadm.Client, plan *StateResetPlan) error {
	if len(plan.Members) > 0 {
		return clibase.Failure("not applied: group %q has %d live member(s) (%s); stop every instance first: "+
			"a running processor writes to the changelog topics and holds the local stores open", plan.Group, len(plan.Members), strings.Join(plan.Members, ", "))
	}
	var busy []string
	for _, s := range plan.Stores {
		for _, p := range s.InUse {
			busy = append(busy, state.PartitionDir(o.dir, s.Store, p))
		}
	}
	if len(busy) > 0 {
		return clibase.Failure("not applied: a running process holds local stores open: %s (stop the processor using %s first)",
			strings.Join(busy, ", "), o.dir)
	}
	var topics []string
	for _, s := range plan.Stores {
		if s.ChangelogPartitions > 0 {
			topics = append(topics, s.Changelog)
		}
	}
	if len(topics) > 0 {
		resp, err := adm.DeleteTopics(ctx, topics...)
		if err != nil {
			return o.cluster.unreachable(err)
		}
		var failed []string
		for _, t := range topics {
			r, ok := resp[t]
			switch {
			case !ok:
				failed = append(failed, fmt.Sprintf("%s: no answer", t))
			case r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition):
				failed = append(failed, fmt.Sprintf("%s: %v", t, r.Err))
			}
		}
		if len(failed) > 0 {
			return clibase.Failure("not applied: changelog topics not deleted: %s (check the principal may delete them); "+
				"the local directories were left as they were: run reset again once fixed", strings.Join(failed, "; "))
		}
	}
	for _, s := range plan.Stores {
		if s.Dir == "" {
			continue
		}
		if err := os.RemoveAll(s.Dir); err != nil {
			return clibase.Failure("the changelog topics were deleted, but not every local directory: %v", err)
		}
	}
	plan.Executed = true
	return nil
}

// liveMembers returns the members of group, under either group protocol:
// classic (DescribeGroups) and consumer (KIP-848, ConsumerGroupDescribe,
// on brokers that have it; DescribeGroups does not list its members).
func liveMembers(ctx context.Context, adm *kadm.Client, group string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(id, client, host string) {
		if !seen[id] {
			seen[id] = true
			out = append(out, fmt.Sprintf("%s on %s", client, host))
		}
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("describe group %q: %w", group, err)
	}
	g := described[group]
	if g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("describe group %q: %w", group, g.Err)
	}
	for _, m := range g.Members {
		add(m.MemberID, m.ClientID, m.ClientHost)
	}
	// a broker without KIP-848, or a classic group, answers with an
	// error here: the classic description above is the answer then
	if cg, err := adm.DescribeConsumerGroups(ctx, group); err == nil {
		if d, ok := cg[group]; ok && d.Err == nil {
			for _, m := range d.Members {
				add(m.MemberID, m.ClientID, m.ClientHost)
			}
		}
	}
	return out, nil
}

func unique(xs []string) []string {
	var out []string
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// size formats a number of bytes for people.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

func printResetPlan(w io.Writer, p StateResetPlan, output string) {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(p)
		return
	}
	verb, title := "deletes", "state reset plan (nothing is changed without --execute)"
	if p.Executed {
		verb, title = "deleted", "state reset, executed"
	}
	fmt.Fprintf(w, "group %s: %s\n\n", p.Group, title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STORE\tLOCAL DIRECTORY\tCHANGELOG TOPIC")
	var dirs, topics int
	for _, s := range p.Stores {
		local := "-"
		if s.Dir != "" {
			dirs++
			local = fmt.Sprintf("%s (%d partition(s), %s)", s.Dir, len(s.LocalPartitions), size(s.LocalBytes))
			if len(s.InUse) > 0 {
				local += fmt.Sprintf(", in use: partition(s) %s", joinInts(s.InUse))
			}
		}
		changelog := s.Changelog + " (does not exist)"
		if s.ChangelogPartitions > 0 {
			topics++
			changelog = fmt.Sprintf("%s (%d partition(s))", s.Changelog, s.ChangelogPartitions)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Store, local, changelog)
	}
	_ = tw.Flush()
	if p.Dir == "" {
		fmt.Fprintln(w, "\n(state.store is memory: no local directories)")
	}
	if len(p.LeftAlone) > 0 {
		fmt.Fprintf(w, "\nleft alone, named like changelogs of group %s but of no store above (another group's, or a store no stage declares any more: name it to reset it): %s\n",
			p.Group, strings.Join(p.LeftAlone, ", "))
	}
	fmt.Fprintf(w, "\n%d store(s): %s %d local directory(ies) and %d changelog topic(s)\n", len(p.Stores), verb, dirs, topics)
}
