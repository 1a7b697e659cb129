package produce

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
)

// TestRecoverAfterBrokerCrash: the broker dies while a transaction is
// open and, restarted on its data, aborts that transaction and bumps the
// producer epoch (the embedded broker does this after a crash, Apache
// Kafka to a transaction that outlives its timeout). The producer learns
// it at Commit (PRODUCER_FENCED), takes its id back with Recover, and
// its next transaction commits. A read_committed reader must see that
// transaction's records: the embedded broker notes the crashed
// transaction as aborted without writing an abort marker, so a reader
// skips the producer's later records until it meets one, and Recover
// writes it (markAborted). Without it the next transaction's committed
// records are invisible, as in the kill loop that lost 12,096 records.
func TestRecoverAfterBrokerCrash(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c, err := kafkatest.Start(1, kfake.DataDir(filepath.Join(dir, "live")), kfake.Ports(port))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }()
	c.CreateTopic(t, "out", 1)
	ctx := context.Background()
	p := New(newWire(t, c.Addrs), Config{TransactionalID: "tx-crash", TransactionTimeout: time.Minute})
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("open-at-crash", 3)); err != nil {
		t.Fatal(err)
	}
	// The crash: the files as they are now are what a SIGKILL leaves.
	crashed := filepath.Join(dir, "crashed")
	if err := os.CopyFS(crashed, os.DirFS(filepath.Join(dir, "live"))); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c, err = kafkatest.Start(1, kfake.DataDir(crashed), kfake.Ports(port))
	if err != nil {
		t.Fatal(err)
	}

	if err := p.Commit(ctx); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("Commit of the transaction the restarted broker aborted: %v, want ErrProducerFenced", err)
	}
	if err := p.Recover(ctx); err != nil {
		t.Fatalf("Recover after the broker's restart: %v", err)
	}
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.ForTopic("out").Produce(ctx, numbered("after", 4)); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := values(consume(t, c.Addrs, "out", 4, true)); !slices.Equal(got, wantValues("after", 4)) {
		t.Fatalf("read_committed read %v, want the committed transaction's records and none of the crashed one", got)
	}
}
