//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// franzWorkerCommand runs this program as the franz-go instance of
// -membership franz: what a franz-go user writes to copy a topic
// at-least-once, as franz-go's own examples do it.
const franzWorkerCommand = "franz-worker"

// franzWorker copies -in to -out in group -group with franz-go's consumer
// (cooperative-sticky, its default): it produces a poll's records, waits
// for their acknowledgement, marks them, and commits marked offsets every
// 100ms (as the processor's commit_interval), on every revoke and when it
// stops (SIGTERM). It serves the count of partitions it gave up and of
// those it has on -http, under the processor's metric names, and logs
// the moments of a restart's phases with the processor's messages and
// time format ("starting", "joined the consumer group" when partitions
// are assigned, "signal received", "stopped").
func franzWorker(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(franzWorkerCommand, flag.ContinueOnError)
	brokers := fs.String("brokers", "", "bootstrap brokers, comma separated")
	grp := fs.String("group", group, "consumer group")
	in := fs.String("in", inputT, "topic to read")
	out := fs.String("out", outputT, "topic to write")
	addr := fs.String("http", "", "serve /metrics on this address")
	session := fs.Duration("session-timeout", 10*time.Second, "session timeout")
	if err := fs.Parse(args); err != nil || *brokers == "" {
		fmt.Fprintln(stderr, "franz-worker: -brokers is required")
		return 2
	}
	logf := func(msg string) { fmt.Fprintf(stderr, "%s\tINFO\t%s\n", time.Now().Format("15:04:05.000"), msg) }
	logf("starting")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, func() { logf("signal received") })
	var revoked, assigned atomic.Int64
	size := func(ps map[string][]int32) (n int64) {
		for _, p := range ps {
			n += int64(len(p))
		}
		return n
	}
	count := func(ps map[string][]int32) {
		revoked.Add(size(ps))
		assigned.Add(-size(ps))
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumerGroup(*grp), kgo.ConsumeTopics(*in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(*session), kgo.HeartbeatInterval(*session/10), kgo.RebalanceTimeout(3**session),
		kgo.BlockRebalanceOnPoll(),
		kgo.AutoCommitMarks(), kgo.AutoCommitInterval(100*time.Millisecond),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			count(ps)
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				fmt.Fprintln(stderr, "franz-worker: commit on revoke:", err)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { count(ps) }),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			assigned.Add(size(ps))
			logf(fmt.Sprintf("joined the consumer group\t{\"added\": %d}", size(ps)))
		}),
	)
	if err != nil {
		fmt.Fprintln(stderr, "franz-worker:", err)
		return 1
	}
	defer logf("stopped")
	defer cl.Close() // commits what is marked, leaves the group
	if *addr != "" {
		l, err := net.Listen("tcp", *addr)
		if err != nil {
			fmt.Fprintln(stderr, "franz-worker:", err)
			return 1
		}
		srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "fencepost_partitions_revoked_total %d\n%s %d\n", revoked.Load(), assignedGauge, assigned.Load())
		})}
		go func() { _ = srv.Serve(l) }()
		defer srv.Close()
	}
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			cl.AllowRebalance()
			return 0
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("%s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			fmt.Fprintln(stderr, "franz-worker: fetch:", ferr)
		}
		recs := fetches.Records()
		copies := make([]*kgo.Record, len(recs))
		for i, r := range recs {
			copies[i] = &kgo.Record{Topic: *out, Key: r.Key, Value: r.Value}
		}
		if err := cl.ProduceSync(context.Background(), copies...).FirstErr(); err != nil {
			fmt.Fprintln(stderr, "franz-worker: produce:", err)
			return 1 // nothing marked: the records are processed again by the next owner
		}
		cl.MarkCommitRecords(recs...)
		cl.AllowRebalance()
	}
}
