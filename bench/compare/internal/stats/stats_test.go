package stats

import (
	"math"
	"testing"
	"time"
)

func ms(xs ...int) []time.Duration {
	out := make([]time.Duration, len(xs))
	for i, x := range xs {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond // 1..100 ms
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"none", nil, 50, 0},
		{"one sample is every percentile", ms(7), 99, 7 * time.Millisecond},
		{"median of an odd count", ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"median of an even count is the lower middle", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of 1..100", hundred, 99, 99 * time.Millisecond},
		{"p99.9 of 1..100 is the max", hundred, 99.9, 100 * time.Millisecond},
		{"p100 is the max", hundred, 100, 100 * time.Millisecond},
		{"p1 of 1..100", hundred, 1, time.Millisecond},
		{"tiny p is the min", hundred, 0.001, time.Millisecond},
		{"p99 of ten samples is the max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 50), 99, 50 * time.Millisecond},
		{"p90 of ten samples", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 50), 90, 9 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.sorted, tc.p, got, tc.want)
			}
		})
	}
}

func TestPercentileRejectsOutOfRange(t *testing.T) {
	for _, p := range []float64{0, -1, 100.5} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Percentile(_, %v) did not panic", p)
				}
			}()
			Percentile(ms(1), p)
		}()
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{2, 2, 9}, 2},
	}
	for _, tc := range tests {
		in := append([]float64(nil), tc.xs...)
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.xs[i] {
				t.Errorf("Median reordered its input: %v", tc.xs)
			}
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}
