package cycle

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// slowOn returns a module that takes d on the given tick ids and no time otherwise.
func slowOn(d time.Duration, ticks ...uint64) *script {
	return &script{fn: func(ctx context.Context, in *tiers.Input) (any, error) {
		for _, id := range ticks {
			if in.TickID() == id {
				time.Sleep(d)
			}
		}
		return in.TickID(), nil
	}}
}

type recorder struct {
	mu sync.Mutex
	ss []*faultsummary.Summary
}

func (r *recorder) hooks() Hooks {
	return Hooks{OnTick: func(s *faultsummary.Summary) { r.mu.Lock(); r.ss = append(r.ss, s); r.mu.Unlock() }}
}

func (r *recorder) get() []*faultsummary.Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*faultsummary.Summary(nil), r.ss...)
}

// runFor runs the scheduler for d of virtual time and returns the summaries.
func runFor(t *testing.T, cfg Config, regs []Registration, d time.Duration) []*faultsummary.Summary {
	t.Helper()
	var rec recorder
	cfg.Tiers = []tiers.Tier{{Name: "safety", Budget: 400 * time.Millisecond}}
	e := newEngine(t, cfg, regs, WithHooks(rec.hooks()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	time.Sleep(d)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	return rec.get()
}

type gridPoint struct {
	scheduled, started time.Duration // since the first tick's start
	overrun            bool
	skipped            int
}

func grid(ss []*faultsummary.Summary) []gridPoint {
	var out []gridPoint
	t0 := ss[0].StartedAt
	for _, s := range ss {
		out = append(out, gridPoint{s.ScheduledAt.Sub(t0), s.StartedAt.Sub(t0), s.Overrun, s.SkippedGridPoints})
	}
	return out
}

func TestSchedulerOverrunPolicies(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name    string
		overrun Overrun
		want    []gridPoint
	}{
		{"skip", OverrunSkip, []gridPoint{
			{0, 0, false, 0}, {100 * ms, 100 * ms, true, 0}, {400 * ms, 400 * ms, false, 2}, {500 * ms, 500 * ms, false, 0},
		}},
		{"catch_up", OverrunCatchUp, []gridPoint{
			{0, 0, false, 0}, {100 * ms, 100 * ms, true, 0}, {200 * ms, 350 * ms, true, 0}, {300 * ms, 350 * ms, false, 0},
			{400 * ms, 400 * ms, false, 0}, {500 * ms, 500 * ms, false, 0},
		}},
		{"delay", OverrunDelay, []gridPoint{
			{0, 0, false, 0}, {100 * ms, 100 * ms, true, 0}, {450 * ms, 450 * ms, false, 0},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ss := runFor(t, Config{Period: 100 * ms, Overrun: tc.overrun},
					[]Registration{reg("m", "safety", slowOn(250*ms, 2))}, 525*ms)
				got := grid(ss)
				if len(got) != len(tc.want) {
					t.Fatalf("got %d ticks %+v, want %+v", len(got), got, tc.want)
				}
				for i := range got {
					if got[i] != tc.want[i] {
						t.Errorf("tick %d: got %+v, want %+v", i+1, got[i], tc.want[i])
					}
				}
				for _, s := range ss {
					wantLag := float64(s.StartedAt.Sub(s.ScheduledAt)) / float64(ms)
					if s.StartLagMs != wantLag {
						t.Errorf("tick %d: start_lag_ms %v, want %v", s.TickID, s.StartLagMs, wantLag)
					}
				}
			})
		})
	}
}

func TestSchedulerCatchUpIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		// Tick 2 overruns by 9 grid points; at most 2 are caught up, the rest skipped.
		ss := runFor(t, Config{Period: 10 * ms, Overrun: OverrunCatchUp, CatchUpMax: 2},
			[]Registration{reg("m", "safety", slowOn(95*ms, 2))}, 125*ms)
		got := grid(ss)
		// tick 2 starts at 10ms, ends at 105ms: points 20..100 (9) are due; 2 are run.
		want := []gridPoint{{0, 0, false, 0}, {10 * ms, 10 * ms, true, 0}, {90 * ms, 105 * ms, true, 7}, {100 * ms, 105 * ms, false, 0}, {110 * ms, 110 * ms, false, 0}, {120 * ms, 120 * ms, false, 0}}
		if len(got) != len(want) {
			t.Fatalf("got %+v", got)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("tick %d: got %+v, want %+v", i+1, got[i], want[i])
			}
		}
	})
}

func TestStepModeAndTickRefusedOnPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{Period: 100 * time.Millisecond}, []Registration{reg("m", "safety", ok(1))})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		synctest.Wait()
		if _, err := e.Tick(context.Background()); !errors.Is(err, ErrNotStepMode) {
			t.Fatalf("Tick while running on a period: %v", err)
		}
		if err := e.Run(ctx); !errors.Is(err, ErrRunning) {
			t.Fatalf("second Run: %v", err)
		}
		cancel()
		<-done
	})
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{}, []Registration{reg("m", "safety", ok(1))})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		time.Sleep(time.Second)
		if e.Latest() != nil {
			t.Fatal("step mode ticked by itself")
		}
		if s, err := e.Tick(context.Background()); err != nil || s.TickID != 1 {
			t.Fatalf("step tick: %v", err)
		}
		cancel()
		<-done
	})
}

func TestStopWaitsForRunningTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		e := newEngine(t, Config{Period: 100 * time.Millisecond, Tiers: []tiers.Tier{{Name: "safety", Budget: time.Second}}},
			[]Registration{reg("m", "safety", slowOn(300*time.Millisecond, 1))}, WithHooks(rec.hooks()))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		time.Sleep(50 * time.Millisecond) // mid-tick
		cancel()
		<-done
		ss := rec.get()
		if len(ss) != 1 || ss[0].Modules()[0].Status != faultsummary.StatusOK {
			t.Fatalf("the running tick must finish normally on stop: %+v", ss)
		}
		if got := time.Since(ss[0].StartedAt); got != 300*time.Millisecond {
			t.Fatalf("Run returned %v after the tick started, want when it finished (300ms)", got)
		}
	})
}

// TestReloadToStepModeDuringTick: a reload to step mode that comes while a tick runs is put
// in force by the scheduler, though no tick on the period follows to apply it: Tick (POST
// /ticks) then runs, where it refused for good before.
func TestReloadToStepModeDuringTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		cfg := Config{Period: 100 * ms, Tiers: []tiers.Tier{{Name: "safety", Budget: 50 * ms}}}
		e := newEngine(t, cfg, []Registration{reg("m", "safety", slowOn(20*ms, 1, 2, 3, 4, 5))})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		time.Sleep(210 * ms) // the tick of 200 ms runs until 220 ms
		step := cfg
		step.Period = 0
		if err := e.Reload(step, e.Registrations()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		last := e.Latest().TickID
		if s, err := e.Tick(context.Background()); err != nil || s.TickID != last+1 || !e.StepMode() {
			t.Errorf("Tick after a reload to step mode: %v (ticks stopped at %d, step mode %v)", err, last, e.StepMode())
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	})
}

// TestReloadedPeriodStartsAfterLastTick: a reload that lengthens the period restarts the
// grid at the grid point of the tick that applied it: the next tick comes one new period
// later, not at once after it.
func TestReloadedPeriodStartsAfterLastTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		var rec recorder
		cfg := Config{Period: 100 * ms, Tiers: []tiers.Tier{{Name: "safety", Budget: 50 * ms}}}
		e := newEngine(t, cfg, []Registration{reg("m", "safety", slowOn(5*ms, 1, 2, 3, 4, 5, 6, 7, 8))}, WithHooks(rec.hooks()))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		time.Sleep(250 * ms) // ticks at 0, 100 and 200 ms; the reload applies at 300 ms
		slow := cfg
		slow.Period = time.Second
		if err := e.Reload(slow, e.Registrations()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2100 * ms)
		cancel()
		<-done
		ss := rec.get()
		t0 := ss[0].ScheduledAt
		var got []time.Duration
		for _, s := range ss {
			got = append(got, s.ScheduledAt.Sub(t0))
		}
		want := []time.Duration{0, 100 * ms, 200 * ms, 300 * ms, 1300 * ms, 2300 * ms}
		if !slices.Equal(got, want) {
			t.Fatalf("ticks scheduled at %v, want %v", got, want)
		}
	})
}

// TestRunWithoutModules: an engine with no modules (a file without any, or after the last
// runtime module was deregistered) ticks on its period like any other. Its lines for the
// next tick, prepared after each scheduled tick, divided by the module count.
func TestRunWithoutModules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{Period: 10 * time.Millisecond}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 55*time.Millisecond)
		defer cancel()
		done := make(chan error)
		go func() { done <- e.Run(ctx) }() // a panic there ends the test binary at once
		if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if s := e.Latest(); s == nil || s.TickID != 6 || len(s.Modules()) != 0 {
			t.Fatalf("latest %+v, want tick 6 of no modules", s)
		}
	})
}

// TestClosedEngineRefusesEverything: after Close, every call that would tick or change the
// engine answers ErrClosed, a scheduler running in step mode returns it too (one on a
// period does at its next tick), and a second Close is a no-op.
func TestClosedEngineRefusesEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Tiers: testTiers()}
		regs := []Registration{reg("a", "knowledge", ok(1)), reg("b", "knowledge", ok(2))}
		e := newEngine(t, cfg, regs[:1])
		if err := e.Register(regs[1]); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- e.Run(context.Background()) }()
		synctest.Wait()
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("Run in step mode after Close: %v, want ErrClosed", err)
			}
		case <-time.After(time.Second):
			t.Fatal("Run in step mode still running a second after Close")
		}
		_, tickErr := e.Tick(context.Background())
		for what, err := range map[string]error{
			"Tick":       tickErr,
			"Run":        e.Run(context.Background()),
			"Register":   e.Register(reg("c", "knowledge", ok(3))),
			"Deregister": e.Deregister("b"),
			"Reload":     e.Reload(cfg, regs),
		} {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close: %v, want ErrClosed", what, err)
			}
		}
		if err := e.Close(); err != nil {
			t.Errorf("a second Close: %v", err)
		}
	})
}

// TestReloadWakesLongPeriod: a scheduler asleep on a long period is woken by a reload to a
// shorter one, which is in force and ticking at once rather than at the old grid point an
// hour later; a registration, a reload to step mode and Close reach it as fast. Pending
// tells what waits.
func TestReloadWakesLongPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		cfg := Config{Period: time.Hour, Tiers: []tiers.Tier{{Name: "safety", Budget: 50 * ms}}}
		e := newEngine(t, cfg, []Registration{reg("m", "safety", ok(1))})
		done := make(chan error)
		go func() { done <- e.Run(context.Background()) }()
		time.Sleep(time.Second) // tick 1 at 0, the next one due in an hour
		if s := e.Latest(); s == nil || s.TickID != 1 {
			t.Fatalf("latest %+v, want tick 1", s)
		}
		fast := cfg
		fast.Period = 10 * ms
		if err := e.Reload(fast, e.Registrations()); err != nil {
			t.Fatal(err)
		}
		if _, waited, ok := e.Pending(); !ok || waited != 0 {
			t.Errorf("Pending after the reload: waited %v, pending %v; want 0, true", waited, ok)
		}
		time.Sleep(105 * ms)
		if got := e.Config().Period; got != 10*ms {
			t.Errorf("period in force 105 ms after the reload: %v, want 10ms", got)
		}
		if s := e.Latest(); s.TickID < 10 {
			t.Errorf("latest tick 105 ms after a reload to 10 ms: %d, want ≥ 10", s.TickID)
		}
		if _, _, ok := e.Pending(); ok {
			t.Error("a configuration still pending after it was applied")
		}
		slow := cfg // back to an hour: the next tick comes at the 10 ms grid point, then an hour later
		if err := e.Reload(slow, e.Registrations()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * ms)
		if got := e.Config().Period; got != time.Hour {
			t.Errorf("period in force: %v, want 1h", got)
		}
		if err := e.Register(reg("late", "safety", ok(2))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ms)
		if m, found := e.Module("late"); !found || m.Pending {
			t.Error("a registration on an hour's period not in force a millisecond later")
		}
		if err := e.Deregister("late", AllowSafetyRemoval(nil)); err != nil {
			t.Fatal(err)
		}
		at := e.Latest().TickID
		step := cfg
		step.Period = 0
		if err := e.Reload(step, e.Registrations()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ms)
		if !e.StepMode() {
			t.Error("a reload to step mode not in force a millisecond later on an hour's period")
		}
		if s, err := e.Tick(context.Background()); err != nil || s.TickID != at+1 {
			t.Errorf("Tick in step mode: %v, %+v", err, s)
		}
		if err := e.Reload(cfg, e.Registrations()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * ms)
		start := time.Now()
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Run after Close: %v, want ErrClosed", err)
		}
		if d := time.Since(start); d > 100*ms {
			t.Errorf("Run returned %v after Close on an hour's period", d)
		}
	})
}

// TestReloadsApplyOnRealClock: on the real clock (the kernel timer for waits up to
// wakeSlice, a Go timer beyond), a run of reloads that switch the period between 10 ms and
// an hour and replace a module is each in force within a second: none waits for a grid
// point an hour away, none is lost between the scheduler's wake-ups.
func TestReloadsApplyOnRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	ms := time.Millisecond
	periods := []time.Duration{10 * ms, 20 * ms, 40 * ms, time.Hour}
	cfg := Config{Period: 10 * ms, Tiers: []tiers.Tier{{Name: "safety", Budget: 5 * ms}, {Name: "knowledge", Budget: 5 * ms}}}
	e := newEngine(t, cfg, []Registration{reg("guard", "safety", ok(1)), reg("m0", "knowledge", ok(1))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for i := 1; i < 120; i++ {
		c := cfg
		c.Period = periods[i%len(periods)]
		name := "m" + string(rune('a'+i%26))
		if err := e.Reload(c, []Registration{reg("guard", "safety", ok(1)), reg(name, "knowledge", ok(1))}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Second)
		for {
			if m, found := e.Module(name); found && !m.Pending && e.Config().Period == c.Period {
				break
			}
			if time.Now().After(deadline) {
				_, waited, pend := e.Pending()
				t.Fatalf("reload %d (period %v) not applied after 1s; in force %v, pending %v for %v", i, c.Period, e.Config().Period, pend, waited)
			}
			time.Sleep(ms)
		}
		time.Sleep(time.Duration(i%7) * 3 * ms)
	}
}
