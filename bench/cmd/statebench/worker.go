//go:build unix

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fencepost-dev/fencepost/bench/internal/countstage"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// workerCommand is the first argument that makes this binary a fencepost
// instance (a child of the restore and failover measurements): a
// pipeline reading -topic in group -group whose one stage counts records
// per key in the store "counts". The processor's YAML has no state
// section yet, so the instance is built here with the pipeline API.
const workerCommand = "worker"

// worker runs one instance. It prints, each on a line with wall-clock
// milliseconds, what the drivers read:
//
//	start MS
//	restore-start MS                   (the first time a restore runs)
//	restored RECORDS FIRST_MS LAST_MS  (every store partition restored: -partitions restores ended)
//	restores N RECORDS MS              (whenever a restore ended)
//	partitions P,P,... MS              (whenever the assignment changed)
func worker(args []string) error {
	fs := flag.NewFlagSet(workerCommand, flag.ContinueOnError)
	brokers := fs.String("brokers", "", "bootstrap addresses, comma-separated")
	group := fs.String("group", "statebench", "consumer group (the changelog is <group>-counts-changelog)")
	topic := fs.String("topic", "in", "input topic")
	dir := fs.String("state-dir", "", "state.dir")
	store := fs.String("store", pipeline.StoreDisk, "state.store: disk or memory")
	var cache, fetchBytes, buffer pipeline.ByteSize
	fs.TextVar(&cache, "cache-bytes", pipeline.ByteSize(0), "state.cache_bytes (0: the default)")
	fs.TextVar(&fetchBytes, "max-partition-fetch-bytes", pipeline.ByteSize(0), "consumer.max_partition_fetch_bytes (0: the default)")
	fs.TextVar(&buffer, "buffer-bytes", pipeline.ByteSize(0), "consumer.buffer_bytes (0: the default)")
	concurrency := fs.Int("concurrency", 0, "consumer.concurrency (0: the default, one per CPU)")
	partitions := fs.Int("partitions", 4, "restores to wait for before printing the restored line")
	exitAfter := fs.Bool("exit-after-restore", false, "stop once -partitions restores ended")
	instance := fs.String("instance-id", "", "consumer.group_instance_id (static membership)")
	session := fs.Duration("session-timeout", 0, "consumer.session_timeout (0: the default)")
	heartbeat := fs.Duration("heartbeat-interval", 0, "consumer.heartbeat_interval (0: the default)")
	guarantee := fs.String("guarantee", string(pipeline.AtLeastOnce), "at_least_once or exactly_once")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `file`")
	traceFile := fs.String("trace", "", "write an execution trace of the whole run to `file` (where the restore waits)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}
	fmt.Printf("start %d\n", time.Now().UnixMilli())
	cfg := pipeline.Config{
		Kafka: pipeline.KafkaConfig{Brokers: strings.Split(*brokers, ",")},
		Consumer: pipeline.ConsumerConfig{Group: *group, Topics: []string{*topic}, MaxPartitionFetchBytes: fetchBytes,
			BufferBytes: buffer, Concurrency: *concurrency, GroupInstanceID: *instance,
			SessionTimeout: *session, HeartbeatInterval: *heartbeat},
		Guarantee: pipeline.Guarantee(*guarantee),
		State:     pipeline.StateConfig{Dir: *dir, Store: *store, CacheBytes: cache},
	}
	// the soft memory limit processor run sets (internal/cli/run): twice
	// buffer_bytes plus 48MiB, unless GOMEMLIMIT is in the environment
	if os.Getenv("GOMEMLIMIT") == "" {
		b := buffer
		if b == 0 {
			b = 16 * pipeline.MiB
		}
		debug.SetMemoryLimit(int64(2*b + 48*pipeline.MiB))
	}
	p, err := pipeline.New(cfg, pipeline.WithStage("count", countstage.Stateful{}))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watch(runCtx, p, *partitions, *exitAfter, cancel)
	return p.Run(runCtx)
}

// watch polls the pipeline's figures every 5ms and prints the lines
// worker's comment lists.
func watch(ctx context.Context, p *pipeline.Pipeline, partitions int, exitAfter bool, stop func()) {
	var first int64
	var restores int64
	var assigned []int32
	done := false
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		s, err := p.Stats(qctx)
		cancel()
		now := time.Now().UnixMilli()
		st := s.State
		if first == 0 && (st.Restoring > 0 || st.Restores > 0) {
			first = now
			fmt.Printf("restore-start %d\n", now)
		}
		if st.Restores != restores {
			restores = st.Restores
			fmt.Printf("restores %d %d %d\n", st.Restores, st.RestoredRecords, now)
		}
		if !done && st.Restores >= int64(partitions) && st.Restoring == 0 {
			done = true
			fmt.Printf("restored %d %d %d\n", st.RestoredRecords, first, now)
			if exitAfter {
				stop()
				return
			}
		}
		if err != nil {
			continue
		}
		var ps []int32
		for _, x := range s.Partitions {
			ps = append(ps, x.Partition.Partition)
		}
		slices.Sort(ps)
		if !slices.Equal(ps, assigned) {
			assigned = ps
			fmt.Printf("partitions %s %d\n", strings.Trim(strings.ReplaceAll(fmt.Sprint(ps), " ", ","), "[]"), now)
		}
	}
}
