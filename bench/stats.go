package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of ds: the smallest
// value such that at least p% of the values are less than or equal to it. The median of
// 10 values is the 5th smallest. It returns 0 for no values.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = max(1, min(rank, len(s)))
	return s[rank-1]
}

// Summary is the distribution of a set of durations.
type Summary struct {
	N                       int
	Min, P50, P90, P99, Max time.Duration
	Mean                    time.Duration
}

// Summarize computes the distribution of ds.
func Summarize(ds []time.Duration) Summary {
	s := Summary{N: len(ds)}
	if len(ds) == 0 {
		return s
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	s.Min, s.Max = slices.Min(ds), slices.Max(ds)
	s.P50, s.P90, s.P99 = Percentile(ds, 50), Percentile(ds, 90), Percentile(ds, 99)
	s.Mean = sum / time.Duration(len(ds))
	return s
}

// Ratio returns a/b, or NaN when b is zero.
func Ratio(a, b time.Duration) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// secs formats d in seconds with two decimals ("3.42 s"); "-" for zero.
func secs(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// ratio formats r with two decimals ("1.73×"); "-" for NaN.
func ratio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f×", r)
}

// MiB formats a byte count in MiB.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
