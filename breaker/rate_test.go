package breaker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
)

func TestRateTrips(t *testing.T) {
	for _, c := range []struct {
		name                      string
		failures, ticks, minTicks int
		rate                      float64
		want                      bool
	}{
		{"empty window never trips", 0, 0, 0, 0.5, false},
		{"below min_ticks", 9, 9, 10, 0.5, false},
		{"at min_ticks and at the rate", 5, 10, 10, 0.5, true},
		{"at min_ticks, below the rate", 4, 10, 10, 0.5, false},
		{"full window above the rate", 15, 20, 10, 0.5, true},
		{"rate 1 needs every tick failed", 19, 20, 10, 1, false},
		{"rate 1, all failed", 20, 20, 10, 1, true},
		{"one failure in one tick, min 1", 1, 1, 1, 0.5, true},
	} {
		if got := breaker.RateTrips(c.failures, c.ticks, c.minTicks, c.rate); got != c.want {
			t.Errorf("%s: RateTrips(%d, %d, %d, %v) = %v, want %v", c.name, c.failures, c.ticks, c.minTicks, c.rate, got, c.want)
		}
	}
}

func TestRateDefaults(t *testing.T) {
	s := breaker.Settings{Kind: breaker.Rate}.WithDefaults()
	if s.Window != 20 || s.MinTicks != 20 || s.FailureRate != 0.5 {
		t.Fatalf("rate defaults = window %d, min_ticks %d, failure_rate %v; want 20, 20, 0.5", s.Window, s.MinTicks, s.FailureRate)
	}
	if c := (breaker.Settings{}).WithDefaults(); c.Window != 0 || c.MinTicks != 0 || c.FailureRate != 0 {
		t.Fatalf("a consecutive breaker got rate defaults: %+v", c)
	}
}

func TestKindParse(t *testing.T) {
	for in, want := range map[string]breaker.Kind{"": breaker.Consecutive, "consecutive": breaker.Consecutive, "rate": breaker.Rate} {
		var k breaker.Kind
		if err := k.UnmarshalText([]byte(in)); err != nil || k != want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", in, k, err, want)
		}
	}
	var k breaker.Kind
	if err := k.UnmarshalText([]byte("ewma")); err == nil {
		t.Error("UnmarshalText(ewma) accepted an unknown kind")
	}
	if b, _ := breaker.Rate.MarshalText(); string(b) != "rate" {
		t.Errorf("Rate.MarshalText() = %q", b)
	}
}

// tick records one tick's outcome under a fresh permit and returns the state after it.
func tick(b *breaker.Breaker, fail bool, k fault.Kind) breaker.State {
	p := b.Acquire()
	if fail {
		b.Failure(p, k)
	} else {
		b.Success(p)
	}
	return b.State()
}

// TestRateBreakerOpens: interleaved failures that never run FailureThreshold in a row open
// a rate breaker once the window's share reaches the rate; successes interleaved keep a
// consecutive breaker of the same threshold closed.
func TestRateBreakerOpens(t *testing.T) {
	clk := clock.NewFake(epoch)
	b := breaker.New(breaker.Settings{Name: "d", Kind: breaker.Rate, Window: 4, MinTicks: 4, FailureRate: 0.5,
		Cooldown: time.Second, HalfOpenSuccesses: 1}, breaker.WithClock(clk))
	c := breaker.New(breaker.Settings{Name: "c", FailureThreshold: 2}, breaker.WithClock(clk))
	outcomes := []bool{true, false, true} // three counted ticks: below min_ticks
	for i, f := range outcomes {
		if st := tick(b, f, fault.KindTransient); st != breaker.Closed {
			t.Fatalf("tick %d: rate breaker %v before min_ticks", i+1, st)
		}
		tick(c, f, fault.KindTransient)
	}
	// Kinds outside TripOn neither count nor fill the window.
	b2 := breaker.New(breaker.Settings{Name: "d2", Kind: breaker.Rate, Window: 2, MinTicks: 1,
		TripOn: fault.SetOf(fault.KindTransient)}, breaker.WithClock(clk))
	if st := tick(b2, true, fault.KindInternal); st != breaker.Closed || b2.Snapshot().WindowTicks != 0 {
		t.Fatalf("an uncounted kind moved the window: %v, %+v", st, b2.Snapshot())
	}
	tick(c, false, fault.KindTransient)
	if st := tick(b, false, fault.KindTransient); st != breaker.Closed {
		t.Fatalf("2 of 4 failed is the rate only with the 4th a failure; got %v after a success", st)
	}
	if s := b.Snapshot(); s.WindowTicks != 4 || s.WindowFailures != 2 {
		t.Fatalf("window = %d ticks, %d failures; want 4, 2", s.WindowTicks, s.WindowFailures)
	}
	// The ring drops the oldest (a failure): 1 of 4, then a failure makes 2 of 4.
	if st := tick(b, true, fault.KindTransient); st != breaker.Open {
		t.Fatalf("2 failures of the last 4 at rate 0.5: state %v, want open", st)
	}
	if st := tick(c, true, fault.KindTransient); st != breaker.Closed {
		t.Fatalf("the consecutive breaker opened without 2 failures in a row: %v", st)
	}
	// Same probes as the consecutive kind, and closing starts from an empty window.
	clk.Advance(time.Second)
	if st := tick(b, false, fault.KindTransient); st != breaker.Closed {
		t.Fatalf("a successful probe did not close it: %v", st)
	}
	if s := b.Snapshot(); s.WindowTicks != 0 || s.Transitions != 3 {
		t.Fatalf("after closing: %+v; want an empty window and 3 transitions", s)
	}
}

func TestRateConflictNamesFields(t *testing.T) {
	r := breaker.NewRegistry()
	if _, err := r.GetOrCreate(breaker.Settings{Name: "d", Kind: breaker.Rate}); err != nil {
		t.Fatal(err)
	}
	_, err := r.GetOrCreate(breaker.Settings{Name: "d", Kind: breaker.Rate, Window: 10, FailureRate: 0.3})
	if err == nil {
		t.Fatal("a different window was not a conflict")
	}
	for _, f := range []string{"window: registered 20, requested 10", "min_ticks", "failure_rate"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("conflict %q does not name %q", err, f)
		}
	}
}
