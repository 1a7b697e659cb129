// Package pipebench runs the real-pipeline benchmark: one pipeline (the
// fencepost processor or Benthos) as a child process, consuming loaded
// shop events in a fresh group and writing the purchases to a fresh
// topic, measured from the outside.
package pipebench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/events"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/kafkaio"
	"github.com/fencepost-dev/fencepost/bench/compare/internal/proc"
)

// Engine is the program a variant runs.
type Engine int

// The engines.
const (
	Fencepost    Engine = iota // the repository's cmd/processor: processor run -c FILE
	Benthos                    // bench/compare/cmd/benthos: benthos -c FILE
	KafkaStreams               // bench/compare/streams: java OPTIONS -jar streams-bench.jar -c FILE (see streams.go)
)

func (e Engine) String() string {
	switch e {
	case Benthos:
		return "Benthos"
	case KafkaStreams:
		return "Kafka Streams"
	}
	return "fencepost"
}

// Variant is one engine with one configuration file.
type Variant struct {
	Name string // for tables and charts: "fencepost, tuned"
	// JVM are the java options of a KafkaStreams variant (heap, GC);
	// nil: DefaultJVM. Other engines ignore it.
	JVM    []string
	Engine Engine
	Config string // path of the configuration file
	// ExactlyOnce is set for a configuration with guarantee:
	// exactly_once: its output is written in Kafka transactions, so the
	// benchmarks read it read_committed, as its users do (a run is done
	// when the output has no open transaction, the check reads only
	// committed records, the latency consumer sees a record when its
	// transaction commits).
	ExactlyOnce bool
	// Baseline, for an exactly-once variant, names the at-least-once
	// variant the report compares it with: the same engine and settings
	// but the guarantee. Empty: no comparison.
	Baseline string
	// Env are extra environment variables (NAME=value) of the child, after
	// the BENCH_* ones: the knobs of a search (the search configurations
	// read them, see bench/compare/configs/*-search.*), GOGC, ...
	Env []string
	// Args are extra arguments of a KafkaStreams variant, after -c FILE:
	// key=value properties that win over the file's. Other engines
	// ignore them.
	Args []string
}

// Isolation is how the benchmarks read v's output.
func (v Variant) Isolation() kafkaio.Isolation {
	if v.ExactlyOnce {
		return kafkaio.ReadCommitted
	}
	return kafkaio.ReadUncommitted
}

// Env is what every run shares.
type Env struct {
	Procs     *proc.Group
	Processor string   // path of the processor binary
	Benthos   string   // path of the Benthos binary
	Streams   Java     // the Kafka Streams jar and the java that runs it
	Brokers   []string // the separate-process broker
	Timeout   time.Duration
}

// Start starts v reading topic input in group and writing to output.
func (e Env) Start(v Variant, name, group, input, output string) (*proc.Child, error) {
	env := []string{
		"BENCH_BROKERS=" + e.Brokers[0], "BENCH_GROUP=" + group,
		"BENCH_INPUT=" + input, "BENCH_OUTPUT=" + output,
	}
	env = append(env, v.Env...)
	cfg, err := filepath.Abs(v.Config)
	if err != nil {
		return nil, err
	}
	switch v.Engine {
	case Benthos:
		return e.Procs.Start(name, "", e.Benthos, []string{"-c", cfg}, env)
	case KafkaStreams:
		return e.Streams.start(e.Procs, v, name, cfg, env)
	default:
		return e.Procs.Start(name, "", e.Processor, []string{"run", "-c", cfg, "--http", "off", "--progress", "0"}, env)
	}
}

// Input is the loaded input topic.
type Input struct {
	Topic      string
	Partitions int
	Records    int64           // events 0..Records-1
	End        kafkaio.Offsets // its end offsets
	// Warmup, if positive, is how many input records a run consumes
	// before its steady-state window begins (Result.Steady): the first
	// poll at which the group has committed at least Warmup offsets
	// opens it. Start-up, the group join and, for the JVM, the JIT's
	// compilation of the hot path fall before it.
	Warmup int64
}

// Result is one run of one variant.
type Result struct {
	Variant     string
	Records     int64         // input records
	Elapsed     time.Duration // from the child's start until every input offset was committed and every expected output written (and, exactly-once, visible)
	FirstOutput time.Duration // from the child's start to the first output record (start-up, group join, first fetch; exactly-once: the first transaction's commit)
	CPU         time.Duration // the child's user+system time over Elapsed
	CPUTotal    time.Duration // ... over its whole life, graceful shutdown included
	MaxRSS      int64         // the child's peak resident set (VmHWM) until done, bytes
	Correct     events.Correctness
	ExitErr     string // how the child exited after SIGTERM, if not cleanly
	// Steady is the run after the warm-up (Input.Warmup): nil without
	// one, or when the group's commits jumped from below the warm-up
	// straight to the end (a run too short to have a window).
	Steady *Window
}

// Window is a part of a run: the input records the group committed
// during it, its length and the child's CPU time over it.
type Window struct {
	Records int64
	Elapsed time.Duration
	CPU     time.Duration
}

// RecordsPerSec is the window's records over its length.
func (w Window) RecordsPerSec() float64 { return float64(w.Records) / w.Elapsed.Seconds() }

// RecordsPerCPUSec is the window's records over the child's CPU time in it.
func (w Window) RecordsPerCPUSec() float64 { return float64(w.Records) / w.CPU.Seconds() }

// SteadyRecordsPerSec is Steady's records/s, or the whole run's without
// a steady window.
func (r Result) SteadyRecordsPerSec() float64 {
	if r.Steady != nil {
		return r.Steady.RecordsPerSec()
	}
	return r.RecordsPerSec()
}

// SteadyRecordsPerCPUSec is Steady's records per CPU-second, or the
// whole run's without a steady window.
func (r Result) SteadyRecordsPerCPUSec() float64 {
	if r.Steady != nil {
		return r.Steady.RecordsPerCPUSec()
	}
	return r.RecordsPerCPUSec()
}

// RecordsPerSec is input records over Elapsed.
func (r Result) RecordsPerSec() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// RecordsPerCPUSec is input records over CPU.
func (r Result) RecordsPerCPUSec() float64 { return float64(r.Records) / r.CPU.Seconds() }

// pollEvery is how often a run checks the group's commits and the
// output's end offsets: the resolution of Elapsed.
const pollEvery = 20 * time.Millisecond

// Run runs v once over in, in a fresh group, writing to a fresh topic
// named after tag. It stops the child (SIGTERM) once done and checks the
// output.
func (e Env) Run(ctx context.Context, v Variant, in Input, tag string) (Result, error) {
	adm, err := kafkaio.NewAdmin(e.Brokers)
	if err != nil {
		return Result{}, err
	}
	defer adm.Close()
	group, output := "group-"+tag, "out-"+tag
	if err := adm.CreateTopic(ctx, output, in.Partitions); err != nil {
		return Result{}, err
	}
	checker := events.NewChecker(in.Records)
	want := int64(checker.Result().Expected)
	child, err := e.Start(v, tag, group, in.Topic, output)
	if err != nil {
		return Result{}, err
	}
	defer func() { _, _ = child.Stop(5 * time.Second) }() // a no-op once stopped below
	res := Result{Variant: v.Name, Records: in.Records}
	if err := e.waitDone(ctx, adm, child, v, in, group, output, want, &res); err != nil {
		return res, err
	}
	u, err := child.Stop(30 * time.Second)
	if err != nil {
		return res, err
	}
	res.CPUTotal = u.CPU
	if u.Err != nil {
		res.ExitErr = u.Err.Error()
	}
	err = kafkaio.ReadAll(ctx, e.Brokers, output, v.Isolation(), time.Minute, func(r *kgo.Record) { checker.Add(r.Key, r.Value) })
	res.Correct = checker.Result()
	if err != nil {
		return res, err
	}
	return res, adm.DeleteTopics(ctx, output) // the broker keeps everything in memory

}

// waitDone polls until the group has committed the end of every input
// partition and the output holds at least want records (for an
// exactly-once variant: and no output partition has an open
// transaction, see outputDone), then fills in the timing and CPU of
// res.
func (e Env) waitDone(ctx context.Context, adm *kafkaio.Admin, child *proc.Child, v Variant, in Input, group, output string, want int64, res *Result) error {
	deadline := time.Now().Add(e.Timeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var warm *warmMark // where the steady window began
	for {
		if exited, err := child.Exited(); exited {
			return fmt.Errorf("%s exited before it was done (%v); its log ends:\n%s", child.Name, err, child.Tail(15))
		}
		committed, _ := adm.Committed(ctx, group, in.Topic) // nil (none reached) until the group exists
		out, err := adm.EndOffsets(ctx, output)
		if err != nil {
			return err
		}
		var stable kafkaio.Offsets
		if v.ExactlyOnce {
			if stable, err = adm.StableOffsets(ctx, output); err != nil {
				return err
			}
		}
		now := time.Since(child.Start)
		visible, done := outputDone(v.Isolation(), committed, in.End, out, stable, want)
		if res.FirstOutput == 0 && visible {
			res.FirstOutput = now
		}
		if warm == nil && in.Warmup > 0 && committed.Sum() >= in.Warmup && !done {
			cpu, err := child.CPU()
			if err != nil {
				return err
			}
			warm = &warmMark{at: now, cpu: cpu, committed: committed.Sum()}
		}
		if done {
			res.Elapsed = now
			if res.CPU, err = child.CPU(); err != nil {
				return err
			}
			if warm != nil {
				res.Steady = &Window{Records: in.End.Sum() - warm.committed, Elapsed: now - warm.at, CPU: res.CPU - warm.cpu}
			}
			res.MaxRSS, err = child.PeakRSS()
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not done after %v: committed %v of %v, output end offsets %v (last stable %v), want %d records; its log ends:\n%s",
				child.Name, e.Timeout, committed, in.End, out, stable, want, child.Tail(15))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// warmMark is the poll that opened a run's steady window.
type warmMark struct {
	at        time.Duration // since the child's start
	cpu       time.Duration // the child's CPU time then
	committed int64         // input offsets the group had committed then
}

// outputDone tells, from one poll, whether a reader of the output with
// isolation iso has any output record yet (visible), and whether the run
// is done: the group has committed inputEnd (every input offset) and
// the output's end offsets outEnd add up to at least want records.
//
// With ReadCommitted (an exactly-once variant) outStable, the output's
// last stable offsets, counts too: an output record is visible once a
// transaction has ended below it (outStable above 0), and the run is
// done only once no output partition has an open transaction. End
// offsets then count transaction markers as well as records, so want is
// only a floor; what makes the rule exact is the guarantee itself: the
// input offsets commit in the same transaction as the outputs of the
// records below them, so once the group has committed the end of the
// input, every output is in a committed transaction, and once nothing is
// open every one of them is visible (a commit writes its markers to the
// output partitions and its offsets separately, so either can show
// first; both are required).
func outputDone(iso kafkaio.Isolation, committed, inputEnd, outEnd, outStable kafkaio.Offsets, want int64) (visible, done bool) {
	done = committed.Reached(inputEnd) && outEnd.Sum() >= want
	if iso != kafkaio.ReadCommitted {
		return outEnd.Sum() > 0, done
	}
	return outStable.Sum() > 0, done && len(kafkaio.OpenTransactions(outStable, outEnd)) == 0
}
