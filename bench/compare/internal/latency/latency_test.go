package latency

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRecorderTimesOnlyFromTheFirstTimedID(t *testing.T) {
	var first atomic.Int64
	first.Store(-1)
	r := newRecorder(&first)
	ms := time.Millisecond
	steps := []struct {
		name      string
		setFirst  int64 // >= 0: the producer passes the warm-up here
		id        int64
		lat       time.Duration
		wantTimed int64
	}{
		{"warm-up record", -1, 0, 50 * ms, 0},
		{"another warm-up record", -1, 1, 40 * ms, 0},
		{"first timed", 2, 2, 3 * ms, 1},
		{"a late warm-up record is not counted", -1, 1, 90 * ms, 1},
		{"next timed", -1, 3, 5 * ms, 2},
		{"a duplicate is not timed again", -1, 3, 70 * ms, 2},
		{"last", -1, 4, 1 * ms, 3},
	}
	for _, st := range steps {
		if st.setFirst >= 0 {
			first.Store(st.setFirst)
		}
		r.add(st.id, st.lat)
		if got := r.timed.Load(); got != st.wantTimed {
			t.Fatalf("%s: %d timed, want %d", st.name, got, st.wantTimed)
		}
	}
	lat, dups := r.samples(2)
	res := summarize(10, 1000, 3, lat, dups)
	want := Result{Produced: 10, Rate: 1000, Expected: 3, Samples: 3, Duplicate: 1, P50: 3 * ms, P99: 5 * ms, Max: 5 * ms}
	if res != want {
		t.Errorf("got %+v\nwant %+v", res, want)
	}
}

func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		lat  []time.Duration
		want Result
	}{
		{"none received", nil, Result{Expected: 5}},
		{"unsorted input", []time.Duration{9 * ms, 1 * ms, 5 * ms, 3 * ms, 7 * ms},
			Result{Expected: 5, Samples: 5, P50: 5 * ms, P99: 9 * ms, Max: 9 * ms}},
		{"one outlier in a hundred stays out of p99", append(repeat(2*ms, 99), 800*ms),
			Result{Expected: 5, Samples: 100, P50: 2 * ms, P99: 2 * ms, Max: 800 * ms}},
		{"two outliers in a hundred reach p99", append(repeat(2*ms, 98), 800*ms, 900*ms),
			Result{Expected: 5, Samples: 100, P50: 2 * ms, P99: 800 * ms, Max: 900 * ms}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := summarize(0, 0, 5, tc.lat, 0); got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestConsumerIsolationFollowsReadCommitted(t *testing.T) {
	isolation := func(opts ...kgo.Opt) any {
		t.Helper()
		cl, err := kgo.NewClient(opts...) // connects lazily: no broker needed
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.OptValue(kgo.FetchIsolationLevel)
	}
	seed := kgo.SeedBrokers("127.0.0.1:1")
	committed := isolation(seed, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	uncommitted := isolation(seed, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if committed == uncommitted {
		t.Fatalf("OptValue does not tell the isolation levels apart (%v)", committed)
	}
	for _, tc := range []struct {
		readCommitted bool
		want          any
	}{{false, uncommitted}, {true, committed}} {
		cfg := Config{Brokers: []string{"127.0.0.1:1"}, Watch: "out", ReadCommitted: tc.readCommitted}
		if got := isolation(consumerOpts(cfg)...); got != tc.want {
			t.Errorf("ReadCommitted %v: consumer isolation %v, want %v", tc.readCommitted, got, tc.want)
		}
	}
}
