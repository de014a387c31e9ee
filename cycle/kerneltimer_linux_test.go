package cycle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// deadlineCase is an engine whose "work" tier (budget 5 ms) holds a module that ignores
// its context until release is closed, and a trivial one.
func deadlineCase(t *testing.T) (*Engine, chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	hung := &script{fn: func(context.Context, *tiers.Input) (any, error) {
		<-release
		return "late", nil
	}}
	ts := []tiers.Tier{
		{Name: "safety", Budget: 50 * time.Millisecond, MaxAttempts: 1},
		{Name: "work", Budget: 5 * time.Millisecond, MaxAttempts: 1},
	}
	// fine before hung: behind a module that blocks in its chunk it would depend on the
	// stall check, which a loaded machine can hold up past a 5 ms budget.
	e := newEngine(t, Config{Tiers: ts}, []Registration{
		reg("guard", "safety", ok(1)), reg("fine", "work", ok(2)), reg("hung", "work", hung),
	})
	return e, release
}

// On the wall clock a coarse wait that runs into its tier's deadline is finished on the
// kernel's timer (package ktimer): the engine makes one on first need, the tier is taken
// no earlier than its budget with the module that ignored its context abandoned, and
// Close releases the timer (its goroutine is gone: TestMain's goleak check). The kernel's
// timer finishes only the last kernelMargin of a wait: a Go timer that wakes later than
// that (a loaded machine: seen under the race detector with three test processes on two
// cores) leaves nothing for it, so the test gives up only after five engines in a row
// found none.
func TestCoarseDeadlineOnKernelTimer(t *testing.T) {
	for attempt := 1; ; attempt++ {
		e, release := deadlineCase(t)
		free := sync.OnceFunc(func() { close(release) })
		t.Cleanup(free) // a failed check below must not leave the module blocked (goleak)
		s := tick(t, e)
		if got := mod(t, s, "hung").Status; got != faultsummary.StatusTimedOut {
			t.Errorf("hung: status %q, want timed_out", got)
		}
		if got := mod(t, s, "fine").Status; got != faultsummary.StatusOK {
			t.Errorf("fine: status %q, want ok", got)
		}
		if w := tierOf(t, s, "work"); w.ElapsedMs < 5 || !w.BudgetExhausted {
			t.Errorf("work tier: elapsed %.3f ms, budget exhausted %v; want ≥ 5 ms and exhausted", w.ElapsedMs, w.BudgetExhausted)
		}
		used := e.kt != nil
		free()
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if e.kt != nil {
			t.Error("Close left the kernel timer open")
		}
		if used {
			return
		}
		if attempt == 5 {
			t.Fatal("the coarse deadline wait was not finished on a kernel timer (five engines)")
		}
	}
}

// Inside a synctest bubble time is virtual: the engine must not wait on the kernel's
// timer (a goroutine waiting in the poller would keep the bubble's time from moving, and
// this test would never end). The deadline is kept on the virtual clock to the nanosecond.
func TestNoKernelTimerOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, release := deadlineCase(t)
		defer close(release)
		s := tick(t, e)
		if e.kt != nil || !e.ktNone {
			t.Fatalf("kernel timer made on virtual time (kt %v, none %v)", e.kt != nil, e.ktNone)
		}
		if got := mod(t, s, "hung").Status; got != faultsummary.StatusTimedOut {
			t.Errorf("hung: status %q, want timed_out", got)
		}
		if w := tierOf(t, s, "work"); w.ElapsedMs != 5 {
			t.Errorf("work tier: elapsed %v ms, want exactly 5 on virtual time", w.ElapsedMs)
		}
	})
}

// runTicks runs e's scheduler until it has published n summaries (waiting at most
// limit), stops it, and returns them.
func runTicks(t *testing.T, e *Engine, n int, limit time.Duration) []*faultsummary.Summary {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, limit)
	defer wcancel()
	var ss []*faultsummary.Summary
	for id := uint64(0); len(ss) < n; {
		s, err := e.History().Wait(wctx, id)
		if err != nil {
			cancel()
			<-done
			t.Fatalf("after %d ticks: %v", len(ss), err)
		}
		ss, id = append(ss, s), s.TickID
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	return ss
}

// On the wall clock, Run finishes its coarse waits for grid points on a kernel timer of
// its own: no tick starts before its grid point, the waits end on the kernel's timer
// (all of them unless a Go timer woke more than kernelMargin late), and the timer is
// released when Run returns (its goroutine is gone: TestMain's goleak check).
func TestGridWaitOnKernelTimer(t *testing.T) {
	const ticks = 10
	e := newEngine(t, Config{Period: 10 * time.Millisecond}, []Registration{reg("a", "safety", ok(1))})
	ss := runTicks(t, e, ticks, 10*time.Second)
	for _, s := range ss {
		if s.StartedAt.Before(s.ScheduledAt) {
			t.Errorf("tick %d started %v before its grid point", s.TickID, s.ScheduledAt.Sub(s.StartedAt))
		}
	}
	if e.grid.waits < ticks/2 {
		t.Errorf("%d of the %d waits for a grid point ended on the kernel's timer, want at least %d", e.grid.waits, ticks-1, ticks/2)
	}
	if e.grid.ks != nil {
		t.Error("Run left its kernel timer open")
	}
}

// Inside a synctest bubble, Run keeps the grid on Go timers (virtual time) and starts
// every tick exactly on its grid point.
func TestNoGridKernelTimerOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{Period: 10 * time.Millisecond}, []Registration{reg("a", "safety", ok(1))})
		for _, s := range runTicks(t, e, 5, time.Minute) {
			if !s.StartedAt.Equal(s.ScheduledAt) {
				t.Errorf("tick %d started %v after its grid point", s.TickID, s.StartedAt.Sub(s.ScheduledAt))
			}
		}
		if e.grid.ks != nil || !e.grid.none || e.grid.waits != 0 {
			t.Fatalf("kernel timer on virtual time (open %v, none %v, waits %d)", e.grid.ks != nil, e.grid.none, e.grid.waits)
		}
	})
}
