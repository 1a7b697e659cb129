package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// counter counts its records per value in the store "counts".
type counter struct{}

func (counter) Stores() []string { return []string{"counts"} }

func (counter) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	st, err := stages.StoreFor(ctx, "counts")
	if err != nil {
		return nil, err
	}
	counts := stages.Typed[int]{Store: st, Codec: stages.JSONCodec[int]{}}
	for _, r := range in {
		n, _, err := counts.Get(r.Value)
		if err != nil {
			return nil, err
		}
		if err := counts.Put(r.Value, n+1); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// changelogFold reads topic read_committed from the start and returns the
// latest value per partition and key.
func changelogFold(t *testing.T, c *kafkatest.Kafka, topic string) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fold := map[string]int{}
	for quiet := 0; quiet < 3; {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			k := fmt.Sprintf("p%d/%s", r.Partition, r.Key)
			if r.Value == nil {
				delete(fold, k)
				return
			}
			var v int
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Errorf("changelog value %q of %s: %v", r.Value, k, err)
			}
			fold[k] = v
		})
		if n == 0 {
			quiet++
		}
	}
	return fold
}

// TestStateSurvivesRestore counts records per value in a store, at both
// guarantees, over three runs: the first on an empty disk, the second on
// another empty disk (everything restores from the changelog), the third
// on the second's disk (only the tail restores); and with the stores in
// memory (every run restores everything). After each, the
// changelog read read_committed holds exactly the count of every value
// in every partition: nothing lost, nothing counted twice.
func TestStateSurvivesRestore(t *testing.T) {
	for _, tc := range stateRestoreCases {
		t.Run(string(tc.g)+"/"+tc.store, func(t *testing.T) { stateSurvivesRestore(t, kafkatest.New(t, 1).Kafka, tc.g, tc.store) })
	}
}

var stateRestoreCases = []struct {
	g     pipeline.Guarantee
	store string
}{{pipeline.AtLeastOnce, pipeline.StoreDisk}, {pipeline.ExactlyOnce, pipeline.StoreDisk}, {pipeline.ExactlyOnce, pipeline.StoreMemory}}

// stateSurvivesRestore is TestStateSurvivesRestore's scenario on cluster
// c (the embedded broker, or Apache Kafka in the real-Kafka suite).
func stateSurvivesRestore(t *testing.T, c *kafkatest.Kafka, g pipeline.Guarantee, store string) {
	const partitions, keys = 2, 7
	in, group := c.Name("state-in"), c.Name("g-state")
	c.CreateTopic(t, in, partitions)
	want := map[string]int{}
	produced := 0
	produce := func(per int) {
		for p := range int32(partitions) {
			if err := c.ProduceE(in, p, per, 50, func(i int) []byte { return []byte(fmt.Sprintf("k%d", (produced+i)%keys)) }); err != nil {
				t.Fatal(err)
			}
			for i := range per {
				want[fmt.Sprintf("p%d/k%d", p, (produced+i)%keys)]++
			}
		}
		produced += per
	}
	dirs := []string{t.TempDir(), t.TempDir()}
	var written []int64 // changelog records each run wrote
	for run, dir := range []string{dirs[0], dirs[1], dirs[1]} {
		produce(100 + 50*run)
		cfg := fastConfig(c, group, in)
		cfg.Guarantee = g
		cfg.State.Dir = dir
		cfg.State.Store = store
		r := start(t, cfg, pipeline.WithStage("count", counter{}))
		waitFor(t, 30*time.Second, "every offset committed", func() bool {
			got := c.Committed(t, group, in)
			return got[0] == int64(produced) && got[1] == int64(produced)
		})
		if err := r.shutdown(t); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		s, _ := r.p.Stats(context.Background()) // the counters, after the run
		// what a restore must read: nothing on an empty
		// changelog or on the disk of the run before, the
		// changelog of the earlier runs on an empty disk
		wantRestored := int64(0)
		if run == 1 || (run == 2 && store == pipeline.StoreMemory) {
			for _, n := range written {
				wantRestored += n
			}
		}
		if s.State.RestoredRecords != wantRestored || s.State.Restores < partitions || s.State.ChangelogRecords == 0 {
			t.Fatalf("run %d: restored %d records in %d restores, wrote %d changes; want %d restored (earlier runs wrote %v) in at least %d restores",
				run, s.State.RestoredRecords, s.State.Restores, s.State.ChangelogRecords, wantRestored, written, partitions)
		}
		written = append(written, s.State.ChangelogRecords)
		if got := changelogFold(t, c, pipeline.ChangelogTopic(group, "counts")); !maps.Equal(got, want) {
			t.Fatalf("run %d: the changelog folds to %v, want %v", run, got, want)
		}
	}
}

// TestStateDirIsHeldByOneProcess: a second pipeline given a state
// directory a running one holds refuses to run, naming the fix, and the
// directory keeps one process id across runs.
func TestStateDirIsHeldByOneProcess(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	in := c.Name("held-in")
	c.CreateTopic(t, in, 1)
	cfg := fastConfig(c, c.Name("g-held"), in)
	cfg.State.Dir = t.TempDir()
	first := start(t, cfg, pipeline.WithStage("count", counter{}))
	waitFor(t, 10*time.Second, "the process id written", func() bool {
		_, err := os.Stat(filepath.Join(cfg.State.Dir, "process-id"))
		return err == nil
	})
	id, _ := os.ReadFile(filepath.Join(cfg.State.Dir, "process-id"))
	second, err := pipeline.New(cfg, pipeline.WithStage("count", counter{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = second.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "held by another process") {
		t.Fatalf("second pipeline on a held state.dir: Run = %v, want an error saying the directory is held", err)
	}
	if err := first.shutdown(t); err != nil {
		t.Fatal(err)
	}
	again := start(t, cfg, pipeline.WithStage("count", counter{}))
	time.Sleep(200 * time.Millisecond)
	if err := again.shutdown(t); err != nil {
		t.Fatal(err)
	}
	if id2, _ := os.ReadFile(filepath.Join(cfg.State.Dir, "process-id")); len(id) == 0 || string(id2) != string(id) {
		t.Fatalf("process id %q, then %q after a restart on the same disk: want the same", id, id2)
	}
}

// TestStateRestoreWaitsForOpenTransactions: a restore must read what was
// committed after a transaction that is still open. An owner killed in
// the middle of a transaction leaves it open on the changelog until the
// broker aborts it; the partition's next owner commits changes after
// it; and read_committed readers see nothing past the first open
// transaction, so a third owner restoring to the last stable offset
// would miss the second's changes and count from the first's. Here a
// producer of its own leaves a transaction open on the changelog while
// pipeline B counts and commits past it; pipeline C, on an empty store,
// must not start from the state before it: its restore waits for the
// transaction to end (aborted here after a second), and the changelog
// then holds every count exactly.
func TestStateRestoreWaitsForOpenTransactions(t *testing.T) {
	const keys = 5
	c := kafkatest.New(t, 1).Kafka
	in, group := c.Name("open-in"), c.Name("g-open")
	changelog := pipeline.ChangelogTopic(group, "counts")
	c.CreateTopic(t, in, 1)
	want := map[string]int{}
	produced := 0
	produce := func(n int) {
		t.Helper()
		if err := c.ProduceE(in, 0, n, 50, func(i int) []byte { return []byte(fmt.Sprintf("k%d", (produced+i)%keys)) }); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			want[fmt.Sprintf("p0/k%d", (produced+i)%keys)]++
		}
		produced += n
	}
	committed := func() bool { return c.Committed(t, group, in)[0] == int64(produced) }
	cfg := fastConfig(c, group, in)
	cfg.Guarantee = pipeline.ExactlyOnce
	cfg.State.Store = pipeline.StoreMemory // every start restores everything
	cfg.State.Dir = t.TempDir()

	produce(100)
	b := start(t, cfg, pipeline.WithStage("count", counter{}))
	waitFor(t, 30*time.Second, "the first records committed", committed)
	// the transaction of an owner that died in it, open on the changelog
	dead, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.TransactionalID(c.Name("dead-owner")),
		kgo.TransactionTimeout(time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dead.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := dead.ProduceSync(ctx, &kgo.Record{Topic: changelog, Partition: 0, Key: []byte("k0"), Value: []byte("1000")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// B goes on, committing changes past the open transaction
	produce(100)
	waitFor(t, 30*time.Second, "the records after the open transaction committed", committed)
	if err := b.shutdown(t); err != nil {
		t.Fatal(err)
	}

	produce(100)
	r := start(t, cfg, pipeline.WithStage("count", counter{}))
	time.Sleep(time.Second) // C restores meanwhile
	if err := dead.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "every record committed", committed)
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	if got := changelogFold(t, c, changelog); !maps.Equal(got, want) {
		t.Fatalf("the changelog folds to %v, want %v", got, want)
	}
}

// TestStateChangelogNotKnownYet: a changelog topic that Metadata lists but
// the broker asked for its configuration does not know yet (another
// instance created it a moment before; a 3-node Apache Kafka 3.9.1 answered
// so) is asked about again: the pipeline starts and counts, instead of
// stopping at start with UNKNOWN_TOPIC_OR_PARTITION.
func TestStateChangelogNotKnownYet(t *testing.T) {
	c := kafkatest.New(t, 1)
	in, group := c.Name("lag-in"), c.Name("g-lag")
	c.CreateTopic(t, in, 1)
	changelog := pipeline.ChangelogTopic(group, "counts")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	compact := "compact"
	if _, err := c.Admin.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, changelog); err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	c.ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.DescribeConfigsRequest)
		if len(r.Resources) != 1 || r.Resources[0].ResourceName != changelog || asked.Add(1) > 3 {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = r.Resources[0].ResourceType, changelog
		res.ErrorCode = kerr.UnknownTopicOrPartition.Code
		resp.Resources = append(resp.Resources, res)
		return resp, nil, true
	})
	c.Produce(t, in, 0, 20, values("k"))
	cfg := fastConfig(c, group, in)
	cfg.State.Dir = t.TempDir()
	r := start(t, cfg, pipeline.WithStage("count", counter{}))
	waitFor(t, 20*time.Second, "every offset committed", func() bool { return c.Committed(t, group, in)[0] == 20 })
	if err := r.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := asked.Load(); n < 4 {
		t.Fatalf("the changelog's configuration was asked %d times, want 3 refused and 1 answered", n)
	}
}
