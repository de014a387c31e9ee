package cycle

import (
	"slices"
	"testing"
	"time"

	"github.com/cycled/cycled/retrybudget"
)

// ticks feeds b n ticks starting step apart from at, each with firsts first attempts and
// retries asked for; it returns the retries granted per tick.
func feed(b *ratioBudget, at time.Time, step time.Duration, n, firsts, retries int) []int {
	var got []int
	for i := range n {
		b.Begin(at.Add(time.Duration(i) * step))
		for range firsts {
			b.First()
		}
		k := 0
		for range retries {
			if b.TryRetry() {
				k++
			}
		}
		got = append(got, k)
	}
	return got
}

func TestRatioBudgetTickWindow(t *testing.T) {
	b := newRatioBudget(retrybudget.RatioSettings{Ratio: 0.5, Window: 2})
	// Tick 1: 4 firsts, 2 retries fit. Tick 2: window 8 firsts, 2 retries in it: 2 more.
	// Tick 3: tick 1 left the window: 8 firsts, 2 retries of tick 2: 2 more.
	got := feed(b, time.Unix(0, 0), time.Millisecond, 3, 4, 5)
	if want := []int{2, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("granted %v, want %v", got, want)
	}
	if !b.Exhausted() {
		t.Fatal("refusals in the tick, not exhausted")
	}
	b.Begin(time.Unix(1, 0))
	if b.Exhausted() {
		t.Fatal("a new tick starts not exhausted")
	}
	if s := b.Snapshot(); s.Firsts != 12 || s.Retries != 6 || s.Refused != 9 || s.WindowFirsts != 4 || s.WindowRetries != 2 {
		t.Fatalf("snapshot %+v", s)
	}
}

func TestRatioBudgetTimeWindow(t *testing.T) {
	b := newRatioBudget(retrybudget.RatioSettings{Ratio: 1, WindowTime: 25 * time.Millisecond})
	t0 := time.Unix(0, 0)
	feed(b, t0, 10*time.Millisecond, 3, 2, 0) // ticks at 0, 10, 20ms: 6 firsts in the window
	b.Begin(t0.Add(30 * time.Millisecond))    // the tick at 0 leaves (30 − 0 ≥ 25): 4 firsts
	if s := b.Snapshot(); s.WindowFirsts != 4 {
		t.Fatalf("window firsts %d, want 4 (ticks at 10 and 20ms)", s.WindowFirsts)
	}
}
