package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/partitioner"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// produceKeyed writes key/value pairs to topic, each on the partition
// murmur2 gives its key (as a Java producer places it).
func produceKeyed(t *testing.T, c *kafkatest.Kafka, topic string, partitions int, kv ...[2]string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, p := range kv {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(p[0]), Value: []byte(p[1]),
			Partition: partitioner.Murmur2([]byte(p[0]), partitions)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// joined collects the join's outputs: user -> the profile names seen, in
// order.
type joined struct {
	mu  sync.Mutex
	got map[string][]string
	n   int
}

func (j *joined) Process(_ context.Context, in []stages.Record) ([]stages.Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range in {
		var v struct {
			User    string `json:"user"`
			Profile *struct {
				Name string `json:"name"`
			} `json:"profile"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return nil, err
		}
		name := "<none>"
		if v.Profile != nil {
			name = v.Profile.Name
		}
		j.got[v.User] = append(j.got[v.User], name)
		j.n++
	}
	return in, nil
}

func (j *joined) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.n
}

// TestJoinWithATable joins clicks with a users table (a compacted topic
// partitioned like the clicks): rows present are added, a user without a
// row gets null (left join), a table update made while the pipeline runs
// is seen by the clicks after it, and a restart on an empty disk restores
// the table from its topic.
func TestJoinWithATable(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	const partitions = 3
	clicks, users, group := c.Name("clicks"), c.Name("users"), c.Name("g-join")
	c.CreateTopic(t, clicks, partitions)
	c.CreateTopic(t, users, partitions)
	var rows [][2]string
	for u := range 10 {
		rows = append(rows, [2]string{fmt.Sprintf("u%d", u), fmt.Sprintf(`{"name":"Name %d"}`, u)})
	}
	produceKeyed(t, c, users, partitions, rows...)
	click := func(round int) (kv [][2]string) {
		for u := range 11 {
			kv = append(kv, [2]string{fmt.Sprintf("u%d", u), fmt.Sprintf(`{"user":"u%d","round":%d}`, u, round)})
		}
		return kv
	}
	produceKeyed(t, c, clicks, partitions, click(0)...)

	st, err := stagetest.Build("join", stages.Options{"table": users, "key": "json.user", "as": "profile"}, stages.Env{})
	if err != nil {
		t.Fatal(err)
	}
	run := func(dir string, until int, then func(*joined)) *joined {
		out := &joined{got: map[string][]string{}}
		cfg := fastConfig(c, group, clicks)
		cfg.State.Dir = dir
		r := start(t, cfg, pipeline.WithStage("join", st), pipeline.WithStage("collect", out))
		waitFor(t, 30*time.Second, "the clicks joined", func() bool { return out.count() >= until })
		if then != nil {
			then(out)
		}
		if err := r.shutdown(t); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// while it runs: a table update, then a click after it
	first := run(t.TempDir(), 11, func(out *joined) {
		produceKeyed(t, c, users, partitions, [2]string{"u2", `{"name":"Updated live"}`})
		time.Sleep(100 * time.Millisecond) // the update is in the table's log first
		produceKeyed(t, c, clicks, partitions, [2]string{"u2", `{"user":"u2","round":9}`})
		waitFor(t, 10*time.Second, "the click after the update joined", func() bool { return out.count() >= 12 })
		out.mu.Lock()
		defer out.mu.Unlock()
		if got := out.got["u2"]; len(got) != 2 || got[1] != "Updated live" {
			t.Fatalf("u2 joined as %q, want the update seen by the click after it", got)
		}
		out.got["u2"] = out.got["u2"][:1]
	})
	for u := range 11 {
		want := fmt.Sprintf("Name %d", u)
		if u == 10 {
			want = "<none>"
		}
		if got := first.got[fmt.Sprintf("u%d", u)]; len(got) != 1 || got[0] != want {
			t.Fatalf("u%d joined as %q, want [%s]", u, got, want)
		}
	}

	// an update, then clicks after it; a fresh disk restores the table
	produceKeyed(t, c, users, partitions, [2]string{"u1", `{"name":"Renamed"}`}, [2]string{"u10", `{"name":"Late"}`})
	produceKeyed(t, c, clicks, partitions, click(1)...)
	second := run(t.TempDir(), 11, nil)
	for u, want := range map[string]string{"u0": "Name 0", "u1": "Renamed", "u2": "Updated live", "u10": "Late"} {
		if got := second.got[u]; len(got) != 1 || got[0] != want {
			t.Fatalf("after the update and a restore, %s joined as %q, want [%s]", u, got, want)
		}
	}
}

// TestJoinRepartitionsByItsKey: clicks spread over the partitions without
// regard to the user still find their user's row: a join with a key
// repartitions the clicks by it first (stages.Grouper), onto the
// partitions the table's rows are on.
func TestJoinRepartitionsByItsKey(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	const partitions = 3
	clicks, users, group := c.Name("clicks"), c.Name("users"), c.Name("g-join-rekey")
	c.CreateTopic(t, clicks, partitions)
	c.CreateTopic(t, users, partitions)
	var rows [][2]string
	for u := range 10 {
		rows = append(rows, [2]string{fmt.Sprintf("u%d", u), fmt.Sprintf(`{"name":"Name %d"}`, u)})
	}
	produceKeyed(t, c, users, partitions, rows...)
	for p := range int32(partitions) {
		if err := c.ProduceE(clicks, p, 20, 10, func(i int) []byte { return fmt.Appendf(nil, `{"user":"u%d","n":%d}`, (i+int(p))%10, i) }); err != nil {
			t.Fatal(err)
		}
	}
	st, err := stagetest.Build("join", stages.Options{"table": users, "key": "json.user", "as": "profile", "type": "inner"}, stages.Env{})
	if err != nil {
		t.Fatal(err)
	}
	out := &joined{got: map[string][]string{}}
	cfg := fastConfig(c, group, clicks)
	cfg.State.Dir = t.TempDir()
	r := start(t, cfg, pipeline.WithStage("join", st), pipeline.WithStage("collect", out))
	waitFor(t, 30*time.Second, "every click joined", func() bool { return out.count() >= partitions*20 })
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	for u := range 10 {
		for _, name := range out.got[fmt.Sprintf("u%d", u)] {
			if want := fmt.Sprintf("Name %d", u); name != want {
				t.Fatalf("u%d joined as %q, want %q: the click was looked up in another partition's table", u, name, want)
			}
		}
	}
	if out.count() != partitions*20 {
		t.Fatalf("%d clicks joined, want %d (an inner join drops a click that found no row)", out.count(), partitions*20)
	}
}

// TestJoinWithAGlobalTable: a global table may be partitioned in any way
// (here 2 partitions, rows placed without regard to their keys, against 3
// partitions of clicks): every instance reads all of it, so every click
// finds its row, and an update while running is seen by the clicks after
// it.
func TestJoinWithAGlobalTable(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	clicks, users, group := c.Name("clicks"), c.Name("users"), c.Name("g-join-global")
	c.CreateTopic(t, clicks, 3)
	c.CreateTopic(t, users, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	row := func(u int, name string) *kgo.Record {
		// partition u%2: not where murmur2 would put the key
		return &kgo.Record{Topic: users, Partition: int32(u % 2), Key: fmt.Appendf(nil, "u%d", u), Value: fmt.Appendf(nil, `{"name":%q}`, name)}
	}
	for u := range 10 {
		if err := cl.ProduceSync(context.Background(), row(u, fmt.Sprintf("Name %d", u))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for p := range int32(3) {
		if err := c.ProduceE(clicks, p, 20, 10, func(i int) []byte { return fmt.Appendf(nil, `{"user":"u%d"}`, (i+int(p))%10) }); err != nil {
			t.Fatal(err)
		}
	}
	st, err := stagetest.Build("join", stages.Options{"table": users, "key": "json.user", "as": "profile", "type": "inner", "global": true}, stages.Env{})
	if err != nil {
		t.Fatal(err)
	}
	out := &joined{got: map[string][]string{}}
	cfg := fastConfig(c, group, clicks)
	cfg.State.Dir = t.TempDir()
	r := start(t, cfg, pipeline.WithStage("join", st), pipeline.WithStage("collect", out))
	waitFor(t, 30*time.Second, "every click joined", func() bool { return out.count() >= 60 })
	if err := cl.ProduceSync(context.Background(), row(3, "Updated")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past the table's catch-up interval
	if err := c.ProduceE(clicks, 0, 1, 1, func(int) []byte { return []byte(`{"user":"u3"}`) }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the click after the update joined", func() bool { return out.count() >= 61 })
	if err := r.shutdown(t); err != nil {
		t.Fatal(err)
	}
	for u := range 10 {
		got := out.got[fmt.Sprintf("u%d", u)]
		for i, name := range got {
			want := fmt.Sprintf("Name %d", u)
			if u == 3 && i == len(got)-1 {
				want = "Updated"
			}
			if name != want {
				t.Fatalf("u%d joined as %q, want %q at %d", u, got, want, i)
			}
		}
	}
}

// TestJoinDoesNotWaitForItsTable: a join catches its table up before
// every batch, reading to the table's end; a read that finds nothing new
// must answer at once, not after consumer.fetch_max_wait. With a wait of
// 2s, 8 clicks produced one at a time (each its own batch, each after
// the last was joined) took over 16s when it did.
func TestJoinDoesNotWaitForItsTable(t *testing.T) {
	c := kafkatest.New(t, 1).Kafka
	clicks, users, group := c.Name("clicks"), c.Name("users"), c.Name("g-join-wait")
	c.CreateTopic(t, clicks, 1)
	c.CreateTopic(t, users, 1)
	produceKeyed(t, c, users, 1, [2]string{"u1", `{"name":"One"}`})
	st, err := stagetest.Build("join", stages.Options{"table": users, "key": "json.user", "as": "profile"}, stages.Env{})
	if err != nil {
		t.Fatal(err)
	}
	out := &joined{got: map[string][]string{}}
	cfg := fastConfig(c, group, clicks)
	cfg.Consumer.FetchMaxWait = 2 * time.Second
	cfg.State.Dir = t.TempDir()
	r := start(t, cfg, pipeline.WithStage("join", st), pipeline.WithStage("collect", out))
	defer func() {
		if err := r.shutdown(t); err != nil {
			t.Error(err)
		}
	}()
	produceKeyed(t, c, clicks, 1, [2]string{"u1", `{"user":"u1","round":0}`})
	waitFor(t, 30*time.Second, "the first click joined (restores included)", func() bool { return out.count() >= 1 })
	began := time.Now()
	const clicksAfter = 8
	for i := 1; i <= clicksAfter; i++ {
		produceKeyed(t, c, clicks, 1, [2]string{"u1", fmt.Sprintf(`{"user":"u1","round":%d}`, i)})
		waitFor(t, 30*time.Second, "the click joined", func() bool { return out.count() >= 1+i })
	}
	if took := time.Since(began); took > clicksAfter*cfg.Consumer.FetchMaxWait/2 {
		t.Errorf("%d clicks, one batch each, took %v: the table's catch-up waits for fetch_max_wait (%v)", clicksAfter, took, cfg.Consumer.FetchMaxWait)
	}
	for _, name := range out.got["u1"] {
		if name != "One" {
			t.Fatalf("u1 joined with %q, want One", name)
		}
	}
}
