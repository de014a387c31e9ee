package main

import (
	"testing"
	"time"
)

// The steady state is the one described: every module has a line, none fails in the
// clean case, and in the open case every tenth is refused by its open breaker (never the
// safety tier's modules), with no other module degraded.
func TestSteadyState(t *testing.T) {
	for _, c := range []struct {
		kase string
		open int
	}{{"clean", 0}, {"open", 5}} {
		s, err := measure(50, c.kase, 50*time.Millisecond, 0, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if s.ModuleLine != 50 || s.Open != c.open || s.NotOK != c.open || s.Ticks < 1 {
			t.Errorf("%s: %+v; want 50 lines, %d open and nothing else not ok", c.kase, s, c.open)
		}
	}
}

// The table's medians are of per-repetition ratios, repetition by repetition.
func TestRatiosAndMedian(t *testing.T) {
	a := []sample{{MeanUs: 100}, {MeanUs: 200}, {MeanUs: 100}}
	b := []sample{{MeanUs: 90}, {MeanUs: 100}, {MeanUs: 120}}
	r := ratios(b, a)
	if len(r) != 3 || r[0] != 0.9 || r[1] != 0.5 || r[2] != 1.2 {
		t.Fatalf("ratios %v", r)
	}
	if m := median(r); m != 0.9 {
		t.Fatalf("median %v, want 0.9", m)
	}
	if m := median([]float64{1, 3}); m != 2 {
		t.Fatalf("median of two %v, want 2", m)
	}
}
