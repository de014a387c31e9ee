package stats

import (
	"encoding/json"
	"math"
	"testing"
)

func TestMedian(t *testing.T) {
	cases := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, 5, 1, 9, 7}, 5},
		{[]float64{-1, -3}, -2},
	}
	for _, c := range cases {
		in := append([]float64(nil), c.in...)
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Fatalf("Median modified its input: %v became %v", in, c.in)
			}
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

func TestPercentileNearestRank(t *testing.T) {
	// 1..100: the p-th percentile by nearest rank is p itself.
	xs := make([]float64, 100)
	for i := range xs {
		xs[len(xs)-1-i] = float64(i + 1) // reversed: Percentile must sort
	}
	for _, p := range []float64{1, 10, 50, 99, 100} {
		if got := Percentile(xs, p); got != p {
			t.Errorf("Percentile(1..100, %v) = %v, want %v", p, got, p)
		}
	}
	if got := Percentile(xs, 0); got != 1 {
		t.Errorf("p0 = %v, want the minimum 1", got)
	}
	if got := Percentile(xs, 99.5); got != 100 {
		t.Errorf("p99.5 = %v, want 100 (rank rounds up)", got)
	}
	// Small samples: p99 of fewer than 100 values is the maximum.
	if got := Percentile([]float64{1, 2, 3, 4, 5}, 99); got != 5 {
		t.Errorf("p99 of 5 values = %v, want 5", got)
	}
	// p50 by nearest rank is the lower middle value for an even count.
	if got := Percentile([]float64{1, 2, 3, 4}, 50); got != 2 {
		t.Errorf("p50 of 1..4 = %v, want 2", got)
	}
	if got := Percentile([]float64{7}, 99); got != 7 {
		t.Errorf("p99 of one value = %v", got)
	}
	// Out-of-range p is clamped.
	if got := Percentile([]float64{1, 2, 3}, 150); got != 3 {
		t.Errorf("p150 = %v, want 3", got)
	}
	if got := Percentile([]float64{1, 2, 3}, -5); got != 1 {
		t.Errorf("p-5 = %v, want 1", got)
	}
	if !math.IsNaN(Percentile(nil, 50)) || !math.IsNaN(Percentile([]float64{1}, math.NaN())) {
		t.Error("empty sample or NaN p: want NaN")
	}
}

func TestPercentileDoesNotModifyInput(t *testing.T) {
	xs := []float64{3, 1, 2}
	_ = Percentile(xs, 50)
	if xs[0] != 3 || xs[1] != 1 || xs[2] != 2 {
		t.Fatalf("input modified: %v", xs)
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{4, 1, 3, 2})
	if s.N != 4 || s.Mean != 2.5 || s.P50 != 2 || s.P99 != 4 || s.Max != 4 {
		t.Fatalf("Summarize = %+v", s)
	}
	e := Summarize(nil)
	if e.N != 0 || !math.IsNaN(e.Mean) || !math.IsNaN(e.P99) || !math.IsNaN(e.Max) {
		t.Fatalf("Summarize(nil) = %+v", e)
	}
}

func TestMeanMaxRatio(t *testing.T) {
	if got := Mean([]float64{1, 2, 3, 6}); got != 3 {
		t.Errorf("Mean = %v", got)
	}
	if got := Max([]float64{1, 9, 3}); got != 9 {
		t.Errorf("Max = %v", got)
	}
	if !math.IsNaN(Mean(nil)) || !math.IsNaN(Max(nil)) {
		t.Error("empty: want NaN")
	}
	if got := Ratio(1, 4); got != 0.25 {
		t.Errorf("Ratio = %v", got)
	}
	if !math.IsNaN(Ratio(1, 0)) || !math.IsNaN(Ratio(math.NaN(), 1)) {
		t.Error("Ratio by zero or of NaN: want NaN")
	}
}

func TestSummaryJSONRoundTrip(t *testing.T) {
	for _, in := range []Summary{Summarize([]float64{1, 2, 3}), Summarize(nil)} {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("marshal %+v: %v", in, err)
		}
		var out Summary
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		same := func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
		if out.N != in.N || !same(out.Mean, in.Mean) || !same(out.P50, in.P50) || !same(out.P99, in.P99) || !same(out.Max, in.Max) {
			t.Errorf("round trip of %+v gave %+v (%s)", in, out, b)
		}
	}
}
