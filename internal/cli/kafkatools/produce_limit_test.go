package kafkatools

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/cli/broker"
)

// TestProduceRecordOverOneMB: with the brokers' message.max.bytes and
// the topic's max.message.bytes at 20 MiB, produce writes a 5 MB line as
// one record, whole, rather than refuse it (MESSAGE_TOO_LARGE) at kgo's
// default batch limit of about 1 MB.
func TestProduceRecordOverOneMB(t *testing.T) {
	cl, err := broker.Start(broker.Options{Brokers: 1, Partitions: 1, MaxMessageBytes: 20 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	addr := cl.ListenAddrs()[0]
	if code, _, errOut := runCLIInput(context.Background(), nil, "", "topics", "create", "--brokers", addr, "big",
		"--partitions", "1", "--topic-config", "max.message.bytes=20971520"); code != ExitOK {
		t.Fatalf("topics create: exit %d:\n%s", code, errOut)
	}
	line := strings.Repeat("0123456789", 500_000) // 5 MB
	code, _, errOut := runCLIInput(context.Background(), nil, line+"\n", "produce", "--brokers", addr, "--topic", "big")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("big"), kgo.FetchMaxBytes(40<<20), kgo.FetchMaxPartitionBytes(40<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs := kc.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if rs := fs.Records(); len(rs) != 1 || string(rs[0].Value) != line {
		t.Fatalf("read %d records, want the 5 MB line whole", len(rs))
	}
}
