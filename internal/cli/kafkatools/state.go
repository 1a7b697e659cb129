package kafkatools

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/config"
	"github.com/fencepost-dev/fencepost/internal/recordjson"
	"github.com/fencepost-dev/fencepost/internal/state"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

func (c *cli) stateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Inspect or reset the stores of stages with state",
		Long: `state looks into the stores that stages with state keep (get, scan, count)
and resets them (reset).

A store is kept per input partition: on the processor's disk under
state.dir/<store>/<partition>, and in its changelog topic
<group>-<store>-changelog, which is the truth the local copy is restored
from. get, scan and count read either:

  --from local      (the default) the local copy in the state directory,
                    offline: a running processor holds its stores open, and
                    the command refuses to read one it holds. The copy
                    reflects the changelog up to its checkpoint, which the
                    output names.
  --from changelog  the changelog topic, read_committed from its start to
                    its last stable offset, folded to the latest value of
                    each key: what a restore would give, readable while the
                    group runs. It needs the cluster (-c FILE or --brokers).

With -c FILE the group is the file's consumer.group and the directory its
state.dir (or its default); --group and --dir override them. Keys and values
that are valid UTF-8 are printed as text, others as base64; -o json prints
each in key or key_base64, value or value_base64, as consume -o json does.
KEY and PREFIX are text, or base64 with --base64.`,
	}
	cmd.AddCommand(c.stateGetCmd(), c.stateScanCmd(), c.stateCountCmd(), c.stateResetCmd())
	return cmd
}

// stateOptions are the flags the state commands share.
type stateOptions struct {
	cluster   clusterFlags
	group     string
	dir       string
	from      string
	partition int32
	base64    bool
	output    string
	set       func(name string) bool // whether a flag was given

	// resolved by resolve
	cfg *config.Config
}

func (o *stateOptions) add(f *pflag.FlagSet, reading bool) {
	o.cluster.add(f)
	f.StringVarP(&o.group, "group", "g", "", "consumer `GROUP` of the stores (default: the file's consumer.group)")
	f.StringVar(&o.dir, "dir", "", "state `DIR`ectory (default: the file's state.dir, or its default)")
	if reading {
		f.StringVar(&o.from, "from", "local", "read the local copy (local: offline, from --dir) or the changelog topic (changelog)")
		f.Int32VarP(&o.partition, "partition", "p", -1, "the input `PARTITION` whose store to read")
		f.BoolVar(&o.base64, "base64", false, "KEY and PREFIX are base64 (for keys that are not text)")
	}
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
}

// check validates the flags shared by the reading commands.
func (o *stateOptions) check(cmd *cobra.Command, needPartition bool) error {
	o.set = cmd.Flags().Changed
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("--output %q: use text or json", o.output)
	}
	if o.from != "local" && o.from != "changelog" {
		return fmt.Errorf("--from %q: use local (the state directory) or changelog (the changelog topic)", o.from)
	}
	if needPartition && !o.set("partition") {
		return fmt.Errorf("%s: name the partition with --partition N: a store is kept per input partition (the partition of the records that wrote it)", cmd.Name())
	}
	if o.set("partition") && o.partition < 0 {
		return errors.New("--partition: a partition is 0 or more")
	}
	return nil
}

// resolve reads the configuration file, if any, and fills in the group
// and the state directory from it. needDir: the command reads or removes
// the local copy.
func (o *stateOptions) resolve(c *cli, needGroup, needDir bool) error {
	cfg, err := o.cluster.file(c, "or name the group and directory with --group and --dir")
	if err != nil {
		return err
	}
	o.cfg = cfg
	if o.group == "" && cfg != nil {
		o.group = cfg.Pipeline.Consumer.Group
	}
	if needGroup && o.group == "" {
		return errors.New("name the consumer group with --group (or -c FILE with consumer.group): the changelog topics are named after it")
	}
	if !needDir || o.dir != "" {
		return nil
	}
	if cfg == nil {
		return errors.New("name the state directory with --dir (the processor's state.dir), or read it from the file with -c FILE")
	}
	st := cfg.Pipeline.WithDefaults().State
	if st.Store == pipeline.StoreMemory && o.from != "changelog" {
		return clibase.Failure("%s: state.store is memory: nothing is kept on disk; read the changelog with --from changelog", o.cluster.config)
	}
	o.dir = st.Dir
	return nil
}

// key decodes a KEY or PREFIX argument.
func (o *stateOptions) key(arg, what string) ([]byte, error) {
	if !o.base64 {
		return []byte(arg), nil
	}
	b, err := base64.StdEncoding.DecodeString(arg)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not base64 (--base64): %v", what, arg, err)
	}
	return b, nil
}

// checkStore refuses a name that cannot name a store.
func checkStore(name string) error { return stages.ValidStoreName(name) }

// declared are the stores the file's stages declare, for messages.
func (o *stateOptions) declared() string {
	if o.cfg == nil {
		return ""
	}
	if s := o.cfg.Stores(); len(s) > 0 {
		return fmt.Sprintf("; the stages of %s declare %s", o.cluster.config, strings.Join(s, ", "))
	}
	return fmt.Sprintf("; no stage of %s declares a store", o.cluster.config)
}

// openLocal opens a partition's local copy read-only, turning what can
// go wrong into what to do about it.
func (o *stateOptions) openLocal(c *cli, store string, p int32) (*state.View, error) {
	v, err := state.OpenView(o.dir, store, p)
	switch {
	case errors.Is(err, state.ErrInUse):
		return nil, clibase.Failure("%s: a running processor holds this store open (pebble locks its directory): "+
			"stop it first, or read the group's state from the changelog with --from changelog", state.PartitionDir(o.dir, store, p))
	case errors.Is(err, state.ErrNoLocalStore):
		parts, _ := state.LocalPartitions(o.dir, store)
		if len(parts) == 0 {
			return nil, o.noLocal(store)
		}
		return nil, clibase.Failure("store %q has no local copy of partition %d in %s (it has partitions %s: this machine processed those; try --from changelog)",
			store, p, o.dir, joinInts(parts))
	case err != nil:
		return nil, clibase.Failure("%v", err)
	}
	if id, ok := v.Identity(); ok && o.group != "" && id.Group != o.group {
		fmt.Fprintf(c.Stderr, "note: %s holds the store of group %q, not %q: a processor of %q opening it would rebuild it from its changelog\n",
			v.Dir(), id.Group, o.group, o.group)
	}
	return v, nil
}

func joinInts[T int32 | int64](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatInt(int64(x), 10)
	}
	return strings.Join(s, ", ")
}

// checkpointNote says what a local copy reflects.
func checkpointNote(v *state.View) string {
	if next, ok := v.Checkpoint(); ok {
		return fmt.Sprintf("local copy %s: the changelog up to offset %d", v.Dir(), next)
	}
	return fmt.Sprintf("local copy %s: no checkpoint (nothing applied yet)", v.Dir())
}

// StateEntry is one key of a store as get and scan -o json print it:
// text in key and value, or base64 in key_base64 and value_base64.
type StateEntry struct {
	Store       string  `json:"store"`
	Partition   int32   `json:"partition"`
	Key         *string `json:"key,omitempty"`
	KeyBase64   *string `json:"key_base64,omitempty"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

func newEntry(store string, p int32, k, v []byte) StateEntry {
	e := StateEntry{Store: store, Partition: p}
	if k == nil {
		k = []byte{}
	}
	if v == nil {
		v = []byte{}
	}
	e.Key, e.KeyBase64 = recordjson.EncodeBytes(k)
	e.Value, e.ValueBase64 = recordjson.EncodeBytes(v)
	return e
}

// shown is b as text output shows it, and whether it is base64.
func shown(b []byte, field bool) (string, bool) {
	if utf8.Valid(b) {
		return printable(string(b), field), false
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b), true
}

const base64Note = "note: keys or values that are not UTF-8 are printed as base64:<base64>, and text with spaces, quotes or control characters is quoted; -o json keeps them apart"

func (c *cli) stateGetCmd() *cobra.Command {
	var o stateOptions
	cmd := &cobra.Command{
		Use:   "get STORE KEY --partition N",
		Short: "Print the value of a key in a store's partition",
		Long: `get prints the value of KEY in STORE's partition N: as it is when it is
UTF-8 text, else base64 (with a note on stderr). A key the store does not
hold is a failure (exit 1). See "processor state --help" for --from.`,
		Example: "  processor state get -c app.yaml counts user-17 --partition 3\n" +
			"  processor state get -c app.yaml counts user-17 -p 3 --from changelog -o json",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd, true); err != nil {
				return err
			}
			if err := checkStore(args[0]); err != nil {
				return err
			}
			key, err := o.key(args[1], "KEY")
			if err != nil {
				return err
			}
			return c.stateGet(cmd.Context(), &o, args[0], key)
		},
	}
	o.add(cmd.Flags(), true)
	return cmd
}

func (c *cli) stateGet(ctx context.Context, o *stateOptions, store string, key []byte) error {
	var (
		val   []byte
		found bool
	)
	if err := o.resolve(c, o.from == "changelog", o.from == "local"); err != nil {
		return err
	}
	if o.from == "local" {
		v, err := o.openLocal(c, store, o.partition)
		if err != nil {
			return err
		}
		defer v.Close()
		fmt.Fprintln(c.Stderr, checkpointNote(v))
		if val, found, err = v.Get(key); err != nil {
			return clibase.Failure("%v", err)
		}
	} else {
		f, err := c.foldChangelog(ctx, o, store, []int32{o.partition}, func(k []byte) bool { return string(k) == string(key) }, true)
		if err != nil {
			return err
		}
		val, found = f.parts[o.partition][string(key)]
	}
	if !found {
		k, _ := shown(key, true)
		return clibase.Failure("store %q, partition %d: no key %s", store, o.partition, k)
	}
	if o.output == "json" {
		return writeJSONLine(c.Stdout, newEntry(store, o.partition, key, val))
	}
	if utf8.Valid(val) {
		_, err := fmt.Fprintf(c.Stdout, "%s\n", val)
		return err
	}
	fmt.Fprintln(c.Stderr, "note: the value is not UTF-8: printed as base64 (-o json, or decode it with base64 -d)")
	_, err := fmt.Fprintln(c.Stdout, base64.StdEncoding.EncodeToString(val))
	return err
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func (c *cli) stateScanCmd() *cobra.Command {
	var o stateOptions
	cmd := &cobra.Command{
		Use:   "scan STORE [PREFIX] --partition N",
		Short: "Print the keys of a store's partition, in key order",
		Long: `scan prints every key of STORE's partition N that starts with PREFIX (all
without one), in byte order: one "KEY<tab>VALUE" line each, or one JSON
object a line with -o json. See "processor state --help" for --from.`,
		Example: "  processor state scan -c app.yaml counts user- --partition 3\n" +
			"  processor state scan -c app.yaml counts -p 0 --from changelog -o json",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd, true); err != nil {
				return err
			}
			if err := checkStore(args[0]); err != nil {
				return err
			}
			var prefix []byte
			if len(args) == 2 {
				var err error
				if prefix, err = o.key(args[1], "PREFIX"); err != nil {
					return err
				}
			}
			return c.stateScan(cmd.Context(), &o, args[0], prefix)
		},
	}
	o.add(cmd.Flags(), true)
	return cmd
}

func (c *cli) stateScan(ctx context.Context, o *stateOptions, store string, prefix []byte) error {
	if err := o.resolve(c, o.from == "changelog", o.from == "local"); err != nil {
		return err
	}
	out := bufio.NewWriter(c.Stdout)
	defer out.Flush()
	encoded := false
	emit := func(k, v []byte) error {
		if o.output == "json" {
			return writeJSONLine(out, newEntry(store, o.partition, k, v))
		}
		ks, kb := shown(k, true)
		vs, vb := shown(v, false)
		encoded = encoded || kb || vb || ks != string(k) || vs != string(v)
		_, err := fmt.Fprintf(out, "%s\t%s\n", ks, vs)
		return err
	}
	n := 0
	if o.from == "local" {
		v, err := o.openLocal(c, store, o.partition)
		if err != nil {
			return err
		}
		defer v.Close()
		fmt.Fprintln(c.Stderr, checkpointNote(v))
		if err := v.Scan(prefix, func(k, val []byte) error { n++; return emit(k, val) }); err != nil {
			return clibase.Failure("%v", err)
		}
	} else {
		f, err := c.foldChangelog(ctx, o, store, []int32{o.partition}, func(k []byte) bool { return strings.HasPrefix(string(k), string(prefix)) }, true)
		if err != nil {
			return err
		}
		m := f.parts[o.partition]
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			n++
			if err := emit([]byte(k), m[k]); err != nil {
				return err
			}
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if encoded {
		fmt.Fprintln(c.Stderr, base64Note)
	}
	fmt.Fprintf(c.Stderr, "%d key(s)\n", n)
	return nil
}

// StateCount is what count -o json prints.
type StateCount struct {
	Store string `json:"store"`
	// From is local or changelog.
	From       string           `json:"from"`
	Partitions []PartitionCount `json:"partitions"`
	Keys       int64            `json:"keys"`
}

// PartitionCount is one partition's row of count.
type PartitionCount struct {
	Partition int32 `json:"partition"`
	Keys      int64 `json:"keys"`
	// ChangelogOffset is the changelog offset the count reflects: the
	// local copy's checkpoint, or the last stable offset the changelog
	// was read to. nil: a local copy with no checkpoint.
	ChangelogOffset *int64 `json:"changelog_offset"`
	// Dir is the local copy's directory (--from local).
	Dir string `json:"dir,omitempty"`
}

func (c *cli) stateCountCmd() *cobra.Command {
	var o stateOptions
	cmd := &cobra.Command{
		Use:   "count STORE [--partition N]",
		Short: "Count the keys of a store, per partition",
		Long: `count prints the number of keys of STORE in each partition (only N with
--partition), with the changelog offset each count reflects: the local
copy's checkpoint, or where the changelog was read to. With --from local
only the partitions this machine keeps a copy of are counted. See
"processor state --help" for --from.`,
		Example: "  processor state count -c app.yaml counts\n  processor state count -c app.yaml counts --from changelog -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd, false); err != nil {
				return err
			}
			if err := checkStore(args[0]); err != nil {
				return err
			}
			return c.stateCount(cmd.Context(), &o, args[0])
		},
	}
	o.add(cmd.Flags(), true)
	cmd.Flags().Lookup("base64").Hidden = true
	return cmd
}

func (c *cli) stateCount(ctx context.Context, o *stateOptions, store string) error {
	if err := o.resolve(c, o.from == "changelog", o.from == "local"); err != nil {
		return err
	}
	res := StateCount{Store: store, From: o.from, Partitions: []PartitionCount{}}
	var want []int32
	if o.set("partition") {
		want = []int32{o.partition}
	}
	if o.from == "local" {
		parts := want
		if parts == nil {
			var err error
			if parts, err = state.LocalPartitions(o.dir, store); err != nil {
				return clibase.Failure("%v", err)
			}
			if len(parts) == 0 {
				return o.noLocal(store)
			}
		}
		for _, p := range parts {
			v, err := o.openLocal(c, store, p)
			if err != nil {
				return err
			}
			n, err := v.Count()
			row := PartitionCount{Partition: p, Keys: n, Dir: v.Dir()}
			if next, ok := v.Checkpoint(); ok {
				row.ChangelogOffset = &next
			}
			_ = v.Close()
			if err != nil {
				return clibase.Failure("%v", err)
			}
			res.Partitions = append(res.Partitions, row)
			res.Keys += n
		}
	} else {
		f, err := c.foldChangelog(ctx, o, store, want, func([]byte) bool { return true }, false)
		if err != nil {
			return err
		}
		for _, p := range f.order {
			end := f.ends[p]
			n := int64(len(f.parts[p]))
			res.Partitions = append(res.Partitions, PartitionCount{Partition: p, Keys: n, ChangelogOffset: &end})
			res.Keys += n
		}
	}
	if o.output == "json" {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tKEYS\tCHANGELOG-OFFSET")
	for _, r := range res.Partitions {
		off := "-"
		if r.ChangelogOffset != nil {
			off = strconv.FormatInt(*r.ChangelogOffset, 10)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\n", r.Partition, r.Keys, off)
	}
	_ = tw.Flush()
	where := "in " + o.dir
	if o.from == "changelog" {
		where = "in " + state.ChangelogTopic(o.group, store)
	}
	_, err := fmt.Fprintf(c.Stdout, "\nstore %s: %d key(s) in %d partition(s) %s\n", store, res.Keys, len(res.Partitions), where)
	return err
}

// noLocal is the failure of a store with no local copy at all.
func (o *stateOptions) noLocal(store string) error {
	stores, _ := state.LocalStores(o.dir)
	held := "no store"
	if len(stores) > 0 {
		held = "stores " + strings.Join(stores, ", ")
	}
	if o.cfg != nil && !slices.Contains(o.cfg.Stores(), store) {
		return clibase.Failure("no store %q: %s holds %s%s (check the name)", store, o.dir, held, o.declared())
	}
	return clibase.Failure("no local store %q in %s (it holds %s%s; this machine may not have processed it: try --from changelog)",
		store, o.dir, held, o.declared())
}
