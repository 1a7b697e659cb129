package run

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/cli/broker"
	"github.com/fencepost-dev/fencepost/internal/cli/clitest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestLagReadCommitted: a read_committed pipeline's lag is measured
// against the last stable offset: the records of an open transaction are
// not lag it could work off; without read_committed they are.
func TestLagReadCommitted(t *testing.T) {
	cluster, err := broker.Start(broker.Options{Brokers: 1, Partitions: 1, Topics: []string{"tx"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	addr := cluster.ListenAddrs()[0]
	txn := clitest.Client(t, addr, kgo.TransactionalID("open"))
	defer txn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	plain := clitest.Client(t, addr)
	defer plain.Close()
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte("a")}, &kgo.Record{Topic: "tx", Value: []byte("b")}).FirstErr(); err != nil { // 0, 1
		t.Fatal(err)
	}
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for range 3 { // 2, 3, 4: open
		if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte("t")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl := clitest.Client(t, addr)
	defer cl.Close()
	tp := offsetstore.TopicPartition{Topic: "tx", Partition: 0}
	st := pipeline.Stats{Partitions: []pipeline.PartitionStatus{{Partition: tp, State: pipeline.Fetching, Position: 2, Committable: 2, Committed: 2}}}
	for _, tt := range []struct {
		readCommitted bool
		want          int64
	}{{false, 3}, {true, 0}} {
		l := &lagSampler{adm: kadm.NewClient(cl), topics: []string{"tx"}, maxAge: time.Second, readCommitted: tt.readCommitted}
		lags, err := l.lags(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		if got := lags[tp]; got.processed != tt.want || got.committed != tt.want {
			t.Errorf("read_committed=%v: lag %+v, want %d", tt.readCommitted, got, tt.want)
		}
	}
}
