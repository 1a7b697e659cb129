// Package stats has the few order statistics the report uses.
package stats

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of sorted, by
// the nearest-rank method: the smallest sample such that at least p% of
// the samples are at or below it. So p=100 is the maximum, and the 99th
// percentile of 100 samples is the 99th smallest. It returns 0 for no
// samples and panics if p is out of range.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if p <= 0 || p > 100 {
		panic("stats: percentile out of (0, 100]")
	}
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// Median returns the median of xs (the mean of the middle two for an
// even count), and NaN for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
