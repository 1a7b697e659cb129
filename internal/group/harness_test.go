package group

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// TestMain keeps rapid's default steps modest (the model test drives a
// real broker) and checks that no test leaves a goroutine behind.
func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["rapid.checks"] {
		if f := flag.Lookup("rapid.checks"); f != nil {
			_ = f.Value.Set("100")
		}
	}
	goleak.VerifyTestMain(m)
}

// ledger records, across the members of one test, who owns which
// partition as seen through the events, and fails on a partition owned by
// two members at once.
type ledger struct {
	mu     sync.Mutex
	owner  map[offsetstore.TopicPartition]string
	errs   []error
	events map[string][]Event
	// changed is closed and replaced whenever ownership changes.
	changed chan struct{}
}

func newLedger() *ledger {
	return &ledger{owner: map[offsetstore.TopicPartition]string{}, events: map[string][]Event{}, changed: make(chan struct{})}
}

func (l *ledger) record(name string, ev Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events[name] = append(l.events[name], ev)
	switch ev := ev.(type) {
	case Assigned:
		for _, p := range ev.Partitions {
			if o, ok := l.owner[p.TopicPartition]; ok && o != name {
				l.errs = append(l.errs, fmt.Errorf("%s assigned to %s while %s owns it", p.TopicPartition, name, o))
			}
			l.owner[p.TopicPartition] = name
		}
	case Revoke:
		// still owned until the owner is done with them
		for _, p := range ev.Partitions {
			if o := l.owner[p]; o != name {
				l.errs = append(l.errs, fmt.Errorf("%s asked to revoke %s owned by %q", name, p, o))
			}
		}
	case Lost:
		// A revoke the owner finished as the session ended may be
		// reported lost too: only what name still owns is released.
		l.release(name, ev.Partitions)
	}
	l.notify()
}

// done records that name's owner finished revoking ps (drained,
// committed); it must be called before Revoke.Done.
func (l *ledger) done(name string, ps []offsetstore.TopicPartition) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.release(name, ps)
	l.notify()
}

func (l *ledger) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *ledger) release(name string, ps []offsetstore.TopicPartition) {
	for _, p := range ps {
		if l.owner[p] == name {
			delete(l.owner, p)
		}
	}
}

func (l *ledger) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}

// owned returns each member's partitions, sorted.
func (l *ledger) owned() map[string][]offsetstore.TopicPartition {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]offsetstore.TopicPartition{}
	for p, o := range l.owner {
		out[o] = append(out[o], p)
	}
	for _, ps := range out {
		slices.SortFunc(ps, func(a, b offsetstore.TopicPartition) int {
			return cmpTP(tp{a.Topic, a.Partition}, tp{b.Topic, b.Partition})
		})
	}
	return out
}

func (l *ledger) eventsOf(name string) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events[name])
}

// fataler is what waitFor needs of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// waitFor waits until cond holds on the owners, or fails the test.
func (l *ledger) waitFor(t fataler, d time.Duration, what string, cond func(map[string][]offsetstore.TopicPartition) bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		l.mu.Lock()
		ch := l.changed
		l.mu.Unlock()
		o := l.owned()
		if cond(o) {
			return
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; owners: %v", what, o)
		}
	}
}

// running is a member run by a test owner that records its events in a
// ledger, commits each revoked partition (offset 1 + its index in the
// revoke, to show a commit under revoke works) and signals Done.
type running struct {
	name   string
	m      *Member
	cancel context.CancelFunc
	done   chan error
	// commitErrs are errors of commits made on revoke.
	mu         sync.Mutex
	commitErrs []error
}

type memberOpts struct {
	revokeDelay time.Duration
	commitOnRev bool
	onAssigned  func(Assigned)
}

func startMember(t testing.TB, l *ledger, name string, cfg Config, o memberOpts) *running {
	t.Helper()
	if os.Getenv("GROUP_DEBUG") != "" {
		cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zap.DebugLevel)).Named(name)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{name: name, m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	go func() {
		for ev := range m.Events() {
			l.record(name, ev)
			switch ev := ev.(type) {
			case Revoke:
				if o.revokeDelay > 0 {
					time.Sleep(o.revokeDelay)
				}
				if o.commitOnRev {
					var offs []Offset
					for _, p := range ev.Partitions {
						offs = append(offs, Offset{TopicPartition: p, Offset: 7, LeaderEpoch: 0})
					}
					if err := m.Commit(context.Background(), offs); err != nil {
						r.mu.Lock()
						r.commitErrs = append(r.commitErrs, err)
						r.mu.Unlock()
					}
				}
				l.done(name, ev.Partitions)
				ev.Done()
			case Assigned:
				if o.onAssigned != nil {
					o.onAssigned(ev)
				}
			}
		}
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop ends Run and waits for it (idempotent).
func (r *running) stop(t testing.TB) error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(30 * time.Second):
		t.Errorf("member %s: Run did not return", r.name)
		return nil
	}
}

func testConfig(c *kafkatest.Cluster, group string, topics ...string) Config {
	return Config{
		Brokers:           c.Addrs,
		Group:             group,
		Topics:            topics,
		SessionTimeout:    1500 * time.Millisecond,
		RebalanceTimeout:  3 * time.Second,
		HeartbeatInterval: 100 * time.Millisecond,
		RetryBackoff:      50 * time.Millisecond,
	}
}

// counts returns how many partitions each named member owns.
func counts(o map[string][]offsetstore.TopicPartition, names ...string) []int {
	out := make([]int, len(names))
	for i, n := range names {
		out[i] = len(o[n])
	}
	return out
}

func total(o map[string][]offsetstore.TopicPartition) int {
	n := 0
	for _, ps := range o {
		n += len(ps)
	}
	return n
}

func lastAssigned(evs []Event) (Assigned, bool) {
	for i := len(evs) - 1; i >= 0; i-- {
		if a, ok := evs[i].(Assigned); ok {
			return a, true
		}
	}
	return Assigned{}, false
}

func generationOf(evs []Event) offsets.Generation {
	a, ok := lastAssigned(evs)
	if !ok {
		return -1
	}
	return a.Generation
}

var _ = maps.Keys[map[int]int]
