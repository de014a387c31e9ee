// Package stats holds the statistics helpers of the comparison harness: median,
// percentiles (nearest rank) and a compact summary of a sample.
package stats

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
)

// Median returns the median of xs (the mean of the two middle values for an even count),
// or NaN for an empty sample. xs is not modified.
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	s := sorted(xs)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Percentile returns the p-th percentile (0 ≤ p ≤ 100) of xs by the nearest-rank method:
// the smallest value such that at least p% of the sample is ≤ it. Percentile(xs, 0) is the
// minimum, Percentile(xs, 100) the maximum; NaN for an empty sample. xs is not modified.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 || math.IsNaN(p) {
		return math.NaN()
	}
	return PercentileSorted(sorted(xs), p)
}

// PercentileSorted is Percentile on an already sorted sample.
func PercentileSorted(s []float64, p float64) float64 {
	n := len(s)
	if n == 0 || math.IsNaN(p) {
		return math.NaN()
	}
	p = min(max(p, 0), 100)
	rank := int(math.Ceil(p / 100 * float64(n))) // 1-based
	rank = min(max(rank, 1), n)
	return s[rank-1]
}

// Mean returns the arithmetic mean of xs, or NaN for an empty sample.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// Max returns the largest value of xs, or NaN for an empty sample.
func Max(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return slices.Max(xs)
}

// Summary describes a sample.
type Summary struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// MarshalJSON encodes the summary with NaN fields (an empty sample) as null.
func (s Summary) MarshalJSON() ([]byte, error) {
	num := func(v float64) string {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "null"
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return []byte(`{"n":` + strconv.Itoa(s.N) + `,"mean":` + num(s.Mean) + `,"p50":` + num(s.P50) +
		`,"p99":` + num(s.P99) + `,"max":` + num(s.Max) + `}`), nil
}

// UnmarshalJSON decodes a summary, null fields as NaN.
func (s *Summary) UnmarshalJSON(b []byte) error {
	var v struct {
		N                   int
		Mean, P50, P99, Max *float64
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	get := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	*s = Summary{N: v.N, Mean: get(v.Mean), P50: get(v.P50), P99: get(v.P99), Max: get(v.Max)}
	return nil
}

// Summarize returns the summary of xs (NaN fields for an empty sample).
func Summarize(xs []float64) Summary {
	s := sorted(xs)
	sm := Summary{N: len(s), Mean: Mean(s), P50: PercentileSorted(s, 50), P99: PercentileSorted(s, 99), Max: math.NaN()}
	if len(s) > 0 {
		sm.Max = s[len(s)-1]
	}
	return sm
}

// Ratio returns a/b, or NaN when b is zero or either is NaN.
func Ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

func sorted(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}
