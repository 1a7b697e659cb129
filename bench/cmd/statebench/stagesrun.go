//go:build unix

package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/bench/internal/childproc"
)

// runTopics names what one run of a job reads and writes.
type runTopics struct {
	brokers              []string
	group                string // the consumer group, Kafka Streams' application.id: fresh each run
	input, table, output string // output: fresh each run
	stateDir             string
	windowMs, graceMs    int64
}

// stagesRun is what one run of one variant measured.
type stagesRun struct {
	steadyRecords int64         // input records committed in the steady window
	steady        time.Duration // the steady window: from the poll that saw -warmup committed to done
	steadyCPU     time.Duration // the process's user+system CPU over it
	total         time.Duration // from exec to done
	totalRecords  int64
	rssKiB        int64 // peak resident set (VmHWM), whole life
	check         outputCheck
	complete      bool // the output reached its expected size before the deadline after the input was committed
}

func (r stagesRun) rate() float64   { return float64(r.steadyRecords) / r.steady.Seconds() }
func (r stagesRun) perCPU() float64 { return float64(r.steadyRecords) / r.steadyCPU.Seconds() }
func (r stagesRun) rssMiB() float64 { return float64(r.rssKiB) / 1024 }
func (r stagesRun) exact() bool     { return r.complete && r.check.exact() }
func (r stagesRun) line() string {
	return fmt.Sprintf("steady %d records in %v: %.0f rec/s, %.0f rec/CPU-s; from exec %v; peak RSS %.0f MiB; output %s",
		r.steadyRecords, r.steady.Round(time.Millisecond), r.rate(), r.perCPU(), r.total.Round(time.Millisecond), r.rssMiB(), r.check)
}

// Kafka Streams' settings under `statebench stages`. Every variant: the
// commit interval of fencepost's default (a run ends when the group has
// committed the input; at_least_once's default would be 30 s), no
// standby. Tuned (unless preset=defaults): the record path's search
// (bench/README.md, "Tuning the peers": 2 stream threads, the producer
// batch and the collector per guarantee, -Xmx512m) and the source table's
// topic reused as its changelog (topology.optimization=all: the join's
// table is not written again). Kafka Streams' record cache (10 MB) holds
// every open window and the whole table here; its RocksDB settings are
// its own.
func streamsSettings(guarantee string, v variant) (jvm []string, props map[string]string) {
	props = map[string]string{"commit.interval.ms": "100", "num.standby.replicas": "0",
		"processing.guarantee": map[string]string{"at_least_once": "at_least_once", "exactly_once": "exactly_once_v2"}[guarantee]}
	jvm = []string{"-Xmx512m", "-XX:+UseG1GC"}
	tuned := !slices.Contains(v.settings, [2]string{"preset", "defaults"})
	if tuned {
		props["num.stream.threads"] = "2"
		props["topology.optimization"] = "all"
		if guarantee == "exactly_once" {
			props["producer.batch.size"] = "262144"
			jvm = []string{"-Xmx512m", "-XX:+UseParallelGC"}
		} else {
			props["producer.batch.size"] = "65536"
			jvm = []string{"-Xmx512m", "-XX:+UseSerialGC"}
		}
	}
	for _, kv := range v.settings {
		switch kv[0] {
		case "preset":
		case "jvm":
			jvm = strings.Fields(kv[1])
		default:
			props[kv[0]] = kv[1]
		}
	}
	return jvm, props
}

// stagesOnce runs one variant of job under guarantee, in a fresh group
// writing a fresh topic, until the group has committed every input
// offset and the output is complete; then stops it, reads the output
// back and checks it, and deletes what the run created.
func (e *env) stagesOnce(ctx context.Context, s *stagesSetup, job, guarantee string, v variant, tag string) (stagesRun, error) {
	rt := runTopics{brokers: e.addrs, group: "sb-" + tag, input: eventsTopic, table: usersTopic, output: "out-" + tag,
		stateDir: filepath.Join(e.dir, "state-"+tag), windowMs: s.windowMs, graceMs: s.graceMs}
	if err := e.createTopic(ctx, rt.output, s.spec.partitions, false); err != nil {
		return stagesRun{}, err
	}
	defer e.cleanRun(rt)
	bin, args, err := e.command(s, job, guarantee, v, rt, tag)
	if err != nil {
		return stagesRun{}, err
	}
	started := time.Now()
	c, err := e.procs.Start(e.dir, tag, bin, args...)
	if err != nil {
		return stagesRun{}, err
	}
	defer c.Stop(syscall.SIGKILL, 10*time.Second)
	hwm := watchHWM(c)
	want := int64(len(s.want))
	if job == "join" {
		want = int64(s.joined)
	}
	res, err := e.waitStages(ctx, s, c, rt, guarantee, want, started)
	if err != nil {
		return res, err
	}
	if !c.Stop(syscall.SIGTERM, 45*time.Second) {
		logf("%s did not stop within 45s of SIGTERM; killed (see %s)", tag, c.Log)
	}
	res.rssKiB = hwm()
	var add func(key, value []byte)
	var finish func() outputCheck
	if job == "window" {
		wc := newWindowCheck(v.engine, s.windowMs)
		add, finish = wc.add, func() outputCheck { return wc.finish(s.want) }
	} else {
		jc := newJoinCheck(s.spec)
		add, finish = jc.add, jc.finish
	}
	var first string
	err = e.readAll(ctx, rt.output, guarantee == "exactly_once", func(key, value []byte) {
		if first == "" {
			first = fmt.Sprintf("key %q value %q", key, value)
		}
		add(key, value)
	})
	if err != nil {
		return res, fmt.Errorf("reading the output back: %w", err)
	}
	res.check = finish()
	logf("%s: an output record: %s", tag, first)
	if !res.exact() {
		logf("%s: output not exact: %s; first problem: %s (log %s)", tag, res.check, res.check.example, c.Log)
		if guarantee == "exactly_once" {
			// are the missing records in the log, in transactions
			// that did not commit, or were they never written?
			var all int64
			distinct := map[string]struct{}{}
			if err := e.readAll(ctx, rt.output, false, func(key, value []byte) {
				all++
				distinct[string(key)+"\x00"+string(value)] = struct{}{}
			}); err == nil {
				logf("%s: read_uncommitted, the output holds %d records, %d distinct", tag, all, len(distinct))
			}
			e.logOffsetGaps(ctx, tag, rt.output)
		}
	}
	return res, nil
}

// command returns the program and arguments of a run: the processor with
// the job's configuration, or the Kafka Streams app.
func (e *env) command(s *stagesSetup, job, guarantee string, v variant, rt runTopics, tag string) (string, []string, error) {
	if v.engine == "fencepost" {
		cfg, env, err := fencepostConfig(job, rt, guarantee, v.settings)
		if err != nil {
			return "", nil, err
		}
		path := filepath.Join(e.dir, tag+".yaml")
		if err := os.WriteFile(path, cfg, 0o644); err != nil {
			return "", nil, err
		}
		args := []string{s.processor, "run", "-c", path, "--http", "off", "--progress", "0"}
		if len(env) == 0 {
			return args[0], args[1:], nil
		}
		// env execs the processor: the child's pid is the processor's
		return "env", append(env, args...), nil
	}
	if e.kafka == "embedded" {
		return "", nil, fmt.Errorf("variant %s: Kafka Streams cannot run against the embedded broker (use -kafka apache)", v.name)
	}
	jvm, props := streamsSettings(guarantee, v)
	args := append(jvm, "-XX:+ExitOnOutOfMemoryError", "-jar", s.jar,
		"bootstrap.servers="+strings.Join(rt.brokers, ","), "application.id="+rt.group, "state.dir="+rt.stateDir,
		"bench.mode="+job, "input.topic="+rt.input, "output.topic="+rt.output, "table.topic="+rt.table,
		"bench.window.ms="+strconv.FormatInt(rt.windowMs, 10), "bench.grace.ms="+strconv.FormatInt(rt.graceMs, 10),
		"bench.join.as="+joinAs, "bench.partitions="+strconv.Itoa(s.spec.partitions))
	for _, k := range slices.Sorted(maps.Keys(props)) {
		args = append(args, k+"="+props[k])
	}
	return "java", args, nil
}

// outputLag is how long a run may take, once its group has committed
// every input offset, for its output to reach the expected size (a run
// that outputs too little is then checked, not waited for).
const outputLag = 30 * time.Second

// waitStages polls every 20 ms until the group has committed the end of
// every input partition and the output holds at least want records (at
// exactly_once: and no output partition has an open transaction; end
// offsets then count transaction markers too, so want is a floor, and
// the offsets committing in the transaction of the outputs is what makes
// the rule exact), and measures the steady window.
func (e *env) waitStages(ctx context.Context, s *stagesSetup, c *childproc.Child, rt runTopics, guarantee string, want int64, started time.Time) (stagesRun, error) {
	var res stagesRun
	var inTotal int64
	for _, n := range s.inEnd {
		inTotal += n
	}
	type mark struct {
		at        time.Time
		cpu       time.Duration
		committed int64
	}
	var warm *mark
	var reachedAt time.Time
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if !c.Running() {
			return res, fmt.Errorf("%s exited before it was done (%v); see %s", c.Name, c.Err, c.Log)
		}
		var committed int64
		var reached bool
		if offs, err := e.adm.FetchOffsets(ctx, rt.group); err == nil { // an error until the group exists
			committed, reached = committedProgress(offs, rt.input, s.inEnd)
		}
		out, open, err := e.outputEnds(ctx, rt.output, guarantee == "exactly_once")
		if err != nil {
			return res, err
		}
		now := time.Now()
		done := reached && out >= want && !open
		if reached && reachedAt.IsZero() {
			reachedAt = now
		}
		late := reached && !done && now.Sub(reachedAt) > outputLag
		if warm == nil && committed >= s.warmup && !done {
			cpu, err := procCPU(c.Cmd.Process.Pid)
			if err != nil {
				return res, err
			}
			warm = &mark{at: now, cpu: cpu, committed: committed}
		}
		if done || late {
			cpu, err := procCPU(c.Cmd.Process.Pid)
			if err != nil {
				return res, err
			}
			res.complete = done
			res.total, res.totalRecords = now.Sub(started), inTotal
			if warm == nil { // done at the first poll past the warm-up: no steady window
				return res, fmt.Errorf("%s was done before -warmup %d records were seen committed: lower -warmup or raise -records", c.Name, s.warmup)
			}
			res.steadyRecords, res.steady, res.steadyCPU = inTotal-warm.committed, now.Sub(warm.at), cpu-warm.cpu
			if late {
				logf("%s: the input was committed %v ago but the output holds %d of %d records (open transactions: %v); checking it as it is",
					c.Name, outputLag, out, want, open)
			}
			return res, nil
		}
		if now.Sub(started) > s.timeout {
			return res, fmt.Errorf("%s not done after %v: committed %d of %d input records, output %d of %d; see %s",
				c.Name, s.timeout, committed, inTotal, out, want, c.Log)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-tick.C:
		}
	}
}

// committedProgress returns the input offsets a group has committed
// (offs), in all (each partition's counted up to its end), and whether
// they reached end in every partition.
func committedProgress(offs kadm.OffsetResponses, topic string, end map[int32]int64) (int64, bool) {
	var sum int64
	reached := true
	for p, n := range end {
		o, ok := offs.Lookup(topic, p)
		if !ok || o.Err != nil || o.At < 0 {
			reached = reached && n == 0
			continue
		}
		sum += min(o.At, n)
		reached = reached && o.At >= n
	}
	return sum, reached
}

// outputEnds returns the sum of the output's end offsets and, when
// committed, whether a partition has an open transaction (its last stable
// offset below its end).
func (e *env) outputEnds(ctx context.Context, topic string, committed bool) (int64, bool, error) {
	ends, err := e.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, false, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	var sum int64
	endOf := map[int32]int64{}
	for _, ps := range ends {
		for p, o := range ps {
			if o.Err != nil {
				return 0, false, fmt.Errorf("end offset of %s/%d: %w", topic, p, o.Err)
			}
			sum += o.Offset
			endOf[p] = o.Offset
		}
	}
	if !committed {
		return sum, false, nil
	}
	stable, err := e.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return 0, false, fmt.Errorf("last stable offsets of %s: %w", topic, err)
	}
	open := false
	for _, ps := range stable {
		for p, o := range ps {
			open = open || o.Err != nil || o.Offset < endOf[p]
		}
	}
	return sum, open, nil
}

// readAll reads topic from its start to its end offsets (read_committed
// when committed), calling fn with every data record. Control records are
// kept, so a partition whose last batch is a transaction marker is read
// to its end too.
func (e *env) readAll(ctx context.Context, topic string, committed bool, fn func(key, value []byte)) error {
	ends, err := e.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	left := map[int32]int64{}
	start := map[int32]kgo.Offset{}
	for _, ps := range ends {
		for p, o := range ps {
			if o.Offset > 0 {
				left[p] = o.Offset
				start[p] = kgo.NewOffset().At(0)
			}
		}
	}
	if len(left) == 0 {
		return nil
	}
	opts := []kgo.Opt{kgo.SeedBrokers(e.addrs...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.KeepControlRecords(), kgo.FetchMaxPartitionBytes(8 << 20)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for len(left) > 0 {
		fs := cl.PollFetches(rctx)
		if err := rctx.Err(); err != nil {
			return fmt.Errorf("%s: %d partitions not read to their end offsets in 5 minutes (%v)", topic, len(left), err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("%s/%d: %w", t, p, err) })
		if ferr != nil {
			return ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			if !r.Attrs.IsControl() {
				fn(r.Key, r.Value)
			}
		})
	}
	return nil
}

// cleanRun deletes the run's output and the topics its engine created
// (changelogs, Kafka Streams' suppress buffer changelog: named after the
// group), and its state directory.
func (e *env) cleanRun(rt runTopics) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics, err := e.adm.ListTopics(ctx)
	if err == nil {
		var del []string
		for _, t := range topics.Names() {
			if t == rt.output || strings.HasPrefix(t, rt.group+"-") {
				del = append(del, t)
			}
		}
		if len(del) > 0 {
			if _, err := e.adm.DeleteTopics(ctx, del...); err != nil {
				logf("deleting %v: %v", del, err)
			}
		}
	}
	if !e.keep {
		_ = os.RemoveAll(rt.stateDir)
	}
}

// logOffsetGaps logs, per partition of topic, its end offset, the
// records read (read_uncommitted, control records included) and the
// first gap in their offsets: where a run's missing output went.
func (e *env) logOffsetGaps(ctx context.Context, tag, topic string) {
	ends, err := e.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return
	}
	start := map[int32]kgo.Offset{}
	left := map[int32]int64{}
	for _, ps := range ends {
		for p, o := range ps {
			start[p] = kgo.NewOffset().At(0)
			if o.Offset > 0 {
				left[p] = o.Offset
			}
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addrs...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.KeepControlRecords(), kgo.FetchMaxPartitionBytes(8<<20))
	if err != nil {
		return
	}
	defer cl.Close()
	type seen struct {
		n, next, control int64
		gaps             []string
	}
	by := map[int32]*seen{}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for len(left) > 0 && rctx.Err() == nil {
		fs := cl.PollFetches(rctx)
		fs.EachRecord(func(r *kgo.Record) {
			s := by[r.Partition]
			if s == nil {
				s = &seen{}
				by[r.Partition] = s
			}
			if r.Offset != s.next && len(s.gaps) < 5 {
				s.gaps = append(s.gaps, fmt.Sprintf("%d..%d", s.next, r.Offset))
			}
			s.n++
			if r.Attrs.IsControl() {
				s.control++
			}
			s.next = r.Offset + 1
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	for _, ps := range ends {
		for p, o := range ps {
			s := by[p]
			if s == nil {
				s = &seen{}
			}
			logf("%s: %s/%d: end %d, read %d records (%d control), offsets missing %v, unread partitions %d", tag, topic, p, o.Offset, s.n, s.control, s.gaps, len(left))
		}
	}
}
