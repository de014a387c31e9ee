package cycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cycled/cycled/cycle/decide"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/tiers"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTransientRetriedThenOK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flaky := &script{}
		flaky.fn = func(_ context.Context, in *tiers.Input) (any, error) {
			if in.Attempt() == 1 {
				return nil, fault.Transient(errBoom)
			}
			return "fine", nil
		}
		e := newEngine(t, Config{}, []Registration{reg("flaky", "knowledge", flaky)})
		s := tick(t, e)
		m := mod(t, s, "flaky")
		if m.Status != faultsummary.StatusRetried || m.Attempts != 2 {
			t.Fatalf("status %q attempts %d, want retried 2", m.Status, m.Attempts)
		}
		if s.RetryCounts["flaky"] != 1 {
			t.Fatalf("retry_counts = %v, want flaky:1", s.RetryCounts)
		}
		if m.Served.Source != blackboard.Live || m.FaultKind != "" {
			t.Fatalf("served %+v kind %q", m.Served, m.FaultKind)
		}
		// 5ms backoff between the attempts, on virtual time.
		if m.LatencyMs != 5 {
			t.Fatalf("latency %vms, want 5ms (one backoff)", m.LatencyMs)
		}
		if s.OverallSeverity != faultsummary.OK || s.Finish != faultsummary.Completed {
			t.Fatalf("severity %q finish %q", s.OverallSeverity, s.Finish)
		}
	})
}

func TestPermanentNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := failing(fault.Permanent(errBoom))
		e := newEngine(t, Config{}, []Registration{reg("bad", "knowledge", bad)})
		s := tick(t, e)
		m := mod(t, s, "bad")
		if m.Status != faultsummary.StatusFailed || m.Attempts != 1 || m.FaultKind != "contract" || m.Error != "boom" {
			t.Fatalf("got %+v", m)
		}
		if bad.runs.Load() != 1 {
			t.Fatalf("ran %d times, want 1", bad.runs.Load())
		}
		if len(s.RetryCounts) != 0 {
			t.Fatalf("retry_counts %v, want empty", s.RetryCounts)
		}
		if tierOf(t, s, "knowledge").Status != faultsummary.TierDegraded || s.OverallSeverity != faultsummary.Degraded {
			t.Fatalf("tier %+v severity %q", tierOf(t, s, "knowledge"), s.OverallSeverity)
		}
	})
}

// TestBreakerLifecycle walks one module through the whole breaker and last-known-good cycle.
func TestBreakerLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failNow atomic.Bool
		m := switchable(&failNow, fault.Permanent(errBoom), "v")
		e := newEngine(t, Config{}, []Registration{reg("lidar", "knowledge", m, func(s *tiers.ModuleSpec) {
			s.TTL = lastgood.TTL{Fixed: 2500 * time.Millisecond}
		})})
		s := tick(t, e) // tick 1: ok, stored as last good
		if mod(t, s, "lidar").Status != faultsummary.StatusOK {
			t.Fatal("tick 1 not ok")
		}
		failNow.Store(true)
		for i := 2; i <= 3; i++ {
			time.Sleep(100 * time.Millisecond)
			s = tick(t, e)
			l := mod(t, s, "lidar")
			if l.Status != faultsummary.StatusFailed || l.CircuitState != "closed" {
				t.Fatalf("tick %d: %q %q, want failed closed", i, l.Status, l.CircuitState)
			}
			if !l.Served.Stale || l.Served.Source != blackboard.LastGood || !l.UsingFallback {
				t.Fatalf("tick %d: served %+v", i, l.Served)
			}
		}
		time.Sleep(100 * time.Millisecond)
		s = tick(t, e) // tick 4: third failed tick = threshold → open
		l := mod(t, s, "lidar")
		if l.Status != faultsummary.StatusFailed || l.CircuitState != "open" || !slices.Contains(s.OpenCircuits, "lidar") {
			t.Fatalf("tick 4: %q %q open=%v", l.Status, l.CircuitState, s.OpenCircuits)
		}
		runs := m.runs.Load()
		time.Sleep(100 * time.Millisecond)
		s = tick(t, e) // tick 5: open → not run, last good served stale with its age
		l = mod(t, s, "lidar")
		if l.Status != faultsummary.StatusOpen || m.runs.Load() != runs {
			t.Fatalf("tick 5: status %q runs %d→%d", l.Status, runs, m.runs.Load())
		}
		if l.Served.Source != blackboard.LastGood || !l.Served.Stale || l.Served.AgeMs != 400 {
			t.Fatalf("tick 5: served %+v, want last_good stale age 400ms", l.Served)
		}
		if !slices.Contains(s.DegradedKeys, "lidar.result") {
			t.Fatalf("degraded_keys %v", s.DegradedKeys)
		}
		// The breaker opened at t = 0.3s with a 1s cooldown; the TTL runs out at t = 2.5s.
		time.Sleep(800 * time.Millisecond) // t = 1.2s: still within cooldown
		s = tick(t, e)
		if st := mod(t, s, "lidar").Status; st != faultsummary.StatusOpen {
			t.Fatalf("within cooldown: %q", st)
		}
		time.Sleep(100 * time.Millisecond) // t = 1.3s: cooldown over → probe, fails → reopen
		s = tick(t, e)
		l = mod(t, s, "lidar")
		if l.Status != faultsummary.StatusProbeFailed || l.CircuitState != "open" {
			t.Fatalf("probe: %q %q", l.Status, l.CircuitState)
		}
		time.Sleep(1200 * time.Millisecond) // t = 2.5s: fresh cooldown (from 1.3s) over
		failNow.Store(false)
		s = tick(t, e)
		l = mod(t, s, "lidar")
		if l.Status != faultsummary.StatusProbeOK || l.CircuitState != "half_open" || !slices.Contains(s.HalfOpenCircuits, "lidar") {
			t.Fatalf("probe 1: %q %q", l.Status, l.CircuitState)
		}
		if l.Served.Source != blackboard.Live {
			t.Fatalf("probe ok serves live, got %+v", l.Served)
		}
		s = tick(t, e)
		l = mod(t, s, "lidar")
		if l.Status != faultsummary.StatusProbeOK || l.CircuitState != "closed" {
			t.Fatalf("probe 2: %q %q", l.Status, l.CircuitState)
		}
		s = tick(t, e)
		if st := mod(t, s, "lidar").Status; st != faultsummary.StatusOK {
			t.Fatalf("closed again: %q", st)
		}
	})
}

func TestLastGoodExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failNow atomic.Bool
		m := switchable(&failNow, fault.Validation(errBoom), 42)
		e := newEngine(t, Config{}, []Registration{reg("cam", "knowledge", m, func(s *tiers.ModuleSpec) {
			s.TTL = lastgood.TTL{Fixed: time.Second}
		})})
		tick(t, e)
		failNow.Store(true)
		time.Sleep(999 * time.Millisecond)
		s := tick(t, e)
		if sv := mod(t, s, "cam").Served; sv.Source != blackboard.LastGood || !sv.Stale || sv.Expired {
			t.Fatalf("before TTL: %+v", sv)
		}
		time.Sleep(time.Millisecond)
		s = tick(t, e)
		sv := mod(t, s, "cam").Served
		if sv.Source != blackboard.None || !sv.Expired || sv.AgeMs != 1000 {
			t.Fatalf("at TTL: %+v, want none expired age 1000ms", sv)
		}
		if !slices.Contains(s.DegradedKeys, "cam.result (expired)") {
			t.Fatalf("degraded_keys %v", s.DegradedKeys)
		}
		if mod(t, s, "cam").UsingFallback {
			t.Fatal("expired value must not count as a fallback in use")
		}
	})
}

// TestReloadChangesDefaultTTL: a reload of lastgood.default_ttl applies to the values of
// modules without their own TTL from the next tick on, also to a value written before it.
func TestReloadChangesDefaultTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failNow atomic.Bool
		regs := []Registration{reg("m", "knowledge", switchable(&failNow, fault.Transient(errBoom), 1))}
		cfg := Config{DefaultTTL: 5 * time.Second}
		e := newEngine(t, cfg, regs)
		tick(t, e)
		cfg.DefaultTTL = time.Second
		if err := e.Reload(cfg, regs); err != nil {
			t.Fatal(err)
		}
		failNow.Store(true)
		time.Sleep(2 * time.Second)
		s := tick(t, e)
		if sv := mod(t, s, "m").Served; sv.Source != blackboard.None || !sv.Expired {
			t.Fatalf("a value 2 s old under default_ttl 1s: served %+v, want none, expired", sv)
		}
		if !slices.Contains(s.DegradedKeys, "m.result (expired)") {
			t.Fatalf("degraded_keys %v", s.DegradedKeys)
		}
	})
}

// TestBusyNamesItsTick: a module that honours its context but has not returned when the
// next tick starts (ticks back to back) is busy "still running from tick N", not accused
// of ignoring its context; only once its run has outlived its deadline by more than
// decide.IgnoreGrace does the error say so.
func TestBusyNamesItsTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cleanup := make(chan struct{})
		var runs atomic.Int32
		slow := &script{fn: func(ctx context.Context, in *tiers.Input) (any, error) {
			if runs.Add(1) == 1 {
				<-ctx.Done() // honours its context, but its cleanup takes until released
				<-cleanup
				return nil, ctx.Err()
			}
			return "ok", nil
		}}
		ts := testTiers()
		ts[2].Breaker.FailureThreshold = 10
		e := newEngine(t, Config{Tiers: ts}, []Registration{
			reg("slow", "planning", slow, func(s *tiers.ModuleSpec) { s.MaxAttempts = 1 }),
		})
		first := tick(t, e)
		if m := mod(t, first, "slow"); m.Status != faultsummary.StatusTimedOut {
			t.Fatalf("tick %d: %+v, want timed_out", first.TickID, m)
		}
		want := fmt.Sprintf("still running from tick %d", first.TickID)
		s := tick(t, e) // back to back: the cancelled run has not returned yet
		if m := mod(t, s, "slow"); m.Status != faultsummary.StatusBusy || m.Error != want {
			t.Fatalf("tick %d, back to back: status %q error %q, want busy %q", s.TickID, m.Status, m.Error, want)
		}
		time.Sleep(time.Second) // the run is now far past its deadline
		s = tick(t, e)
		if m := mod(t, s, "slow"); m.Status != faultsummary.StatusBusy || m.Error != want+" (ignored its context)" {
			t.Fatalf("tick %d, a second later: status %q error %q, want busy %q", s.TickID, m.Status, m.Error, want+" (ignored its context)")
		}
		close(cleanup)
		synctest.Wait()
		if m := mod(t, tick(t, e), "slow"); m.Status != faultsummary.StatusOK {
			t.Fatalf("after return: %+v", m)
		}
	})
}

func TestHungModuleIsAbandonedAndBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var started atomic.Int32
		hang := &script{fn: func(ctx context.Context, in *tiers.Input) (any, error) {
			started.Add(1)
			<-release // ignores ctx
			return "late", nil
		}}
		fast := ok("fast")
		ts := testTiers()
		ts[2].Breaker.FailureThreshold = 10
		e := newEngine(t, Config{Tiers: ts}, []Registration{
			reg("hang", "planning", hang, func(s *tiers.ModuleSpec) { s.MaxAttempts = 1 }),
			reg("fast", "planning", fast),
		})
		s := tick(t, e)
		pl := tierOf(t, s, "planning")
		if pl.ElapsedMs > 100+2 {
			t.Fatalf("tier took %vms, budget 100ms", pl.ElapsedMs)
		}
		if !pl.BudgetExhausted || !slices.Contains(s.BudgetViolations, "planning") {
			t.Fatalf("budget not reported exhausted: %+v %v", pl, s.BudgetViolations)
		}
		h := mod(t, s, "hang")
		if h.Status != faultsummary.StatusTimedOut || h.FaultKind != "transient" || h.Attempts != 1 {
			t.Fatalf("hang: %+v", h)
		}
		if mod(t, s, "fast").Status != faultsummary.StatusOK {
			t.Fatal("fast module not ok")
		}
		for i := 0; i < 3; i++ {
			s = tick(t, e)
			if st := mod(t, s, "hang").Status; st != faultsummary.StatusBusy {
				t.Fatalf("tick %d: hang %q, want busy", s.TickID, st)
			}
			if n := goroutinesIn("TestHungModuleIsAbandonedAndBusy.func1.1"); n != 1 {
				t.Fatalf("%d goroutines run the hung module, want exactly 1", n)
			}
		}
		if started.Load() != 1 {
			t.Fatalf("started %d times, want exactly one outstanding run", started.Load())
		}
		close(release)
		synctest.Wait()
		s = tick(t, e)
		if h := mod(t, s, "hang"); h.Status != faultsummary.StatusOK {
			t.Fatalf("after return: %+v", h)
		}
		if v, _ := json.Marshal(mod(t, s, "hang").Served); len(v) == 0 {
			t.Fatal("no served")
		}
	})
}

// goroutinesIn counts the goroutines whose stack contains fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

func TestPanicRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &script{fn: func(context.Context, *tiers.Input) (any, error) { panic("kaboom") }}
		e := newEngine(t, Config{}, []Registration{reg("p", "knowledge", p)})
		s := tick(t, e)
		m := mod(t, s, "p")
		if m.Status != faultsummary.StatusFailed || m.FaultKind != "internal" || m.Error != "panic: kaboom" || m.Attempts != 1 {
			t.Fatalf("got %+v", m)
		}
		s = tick(t, e) // the worker survived
		if mod(t, s, "p").Attempts != 1 {
			t.Fatal("worker did not survive the panic")
		}
	})
}

func TestSafetyFailureEntersEmergencyAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failNow atomic.Bool
		guard := switchable(&failNow, fault.Validation(errBoom), "clear")
		planner := ok("plan")
		safeStop := ok("stopped")
		cfg := Config{Emergency: EmergencyConfig{SkipTiers: []string{"knowledge"}, RecoverAfter: 2}}
		e := newEngine(t, cfg, []Registration{
			reg("guard", "safety", guard),
			reg("world", "knowledge", ok("w")),
			reg("planner", "planning", planner),
			reg("safe_stop", "planning", safeStop, func(s *tiers.ModuleSpec) { s.Emergency = true }),
		})
		var events []faultsummary.EmergencyEvent
		sub := e.Events().Subscribe(64)
		defer sub.Close()
		s := tick(t, e)
		if s.EmergencyMode || mod(t, s, "safe_stop").Status != faultsummary.StatusSkipped || safeStop.runs.Load() != 0 {
			t.Fatal("emergency-only module ran outside emergency")
		}
		if s.OverallSeverity != faultsummary.OK {
			t.Fatalf("severity %q: an idle emergency-only module is not a degradation", s.OverallSeverity)
		}
		failNow.Store(true)
		s = tick(t, e) // tick 2: the safety failure enters emergency on this same tick
		if !s.EmergencyMode || !s.Emergency.Active || s.Emergency.SinceTick != 2 || s.OverallSeverity != faultsummary.Critical {
			t.Fatalf("tick 2: %+v", s.Emergency)
		}
		if s.Emergency.Reason == "" {
			t.Fatal("no reason")
		}
		if tierOf(t, s, "knowledge").Status != faultsummary.TierSkipped || mod(t, s, "world").Status != faultsummary.StatusSkipped {
			t.Fatal("knowledge not skipped")
		}
		if mod(t, s, "guard").Served.Source != blackboard.None || mod(t, s, "guard").UsingFallback {
			t.Fatalf("safety served %+v: must fail closed", mod(t, s, "guard").Served)
		}
		if mod(t, s, "safe_stop").Status != faultsummary.StatusOK || safeStop.runs.Load() != 1 {
			t.Fatal("safe_stop did not run in emergency")
		}
		if mod(t, s, "planner").Status != faultsummary.StatusOK {
			t.Fatal("planning is not in skip_tiers and must run")
		}
		failNow.Store(false)
		s = tick(t, e) // healthy 1
		if !s.EmergencyMode || s.Emergency.HealthyTicks != 1 {
			t.Fatalf("tick 3: %+v", s.Emergency)
		}
		s = tick(t, e) // healthy 2 → leave
		if s.EmergencyMode || s.Emergency.Active || s.Emergency.Reason == "" || s.Emergency.EndedTick != 4 {
			t.Fatalf("tick 4: %+v", s.Emergency)
		}
		if mod(t, s, "world").Status != faultsummary.StatusOK {
			t.Fatal("knowledge did not run after recovery")
		}
		for len(sub.C()) > 0 {
			ev := <-sub.C()
			if ev.Type == faultsummary.EventEmergency {
				events = append(events, *ev.Emergency)
			}
		}
		if len(events) != 2 || !events[0].Entered || events[0].TickID != 2 || events[1].Entered || events[1].TickID != 4 {
			t.Fatalf("events %+v", events)
		}
	})
}

func TestEmergencyLatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failNow atomic.Bool
		guard := switchable(&failNow, fault.Transient(errBoom), "clear")
		world := ok("w")
		e := newEngine(t, Config{Emergency: EmergencyConfig{Latch: true, RecoverAfter: 1}}, []Registration{
			reg("guard", "safety", guard),
			reg("world", "knowledge", world),
		})
		failNow.Store(true)
		s := tick(t, e)
		if !s.Emergency.Active || !s.Emergency.Latched {
			t.Fatalf("%+v", s.Emergency)
		}
		failNow.Store(false)
		for i := 0; i < 5; i++ {
			s = tick(t, e)
			if !s.EmergencyMode {
				t.Fatalf("tick %d: latched emergency left without a reset", s.TickID)
			}
		}
		if world.runs.Load() != 0 {
			t.Fatal("a skipped tier's module ran")
		}
		e.ResetEmergency()
		s = tick(t, e) // reset, then one healthy tick (recover_after 1)
		if s.EmergencyMode {
			t.Fatalf("after reset: %+v", s.Emergency)
		}
	})
}

// TestEmergencyResetWhileFailingLatchesAgain: with latch on, an operator reset made while
// the safety tier still fails does not let the emergency end on its own once it clears: the
// next failure latches it again, and only a reset after the fault cleared ends it.
func TestEmergencyResetWhileFailingLatchesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failNow atomic.Bool
		guard := switchable(&failNow, fault.Validation(errBoom), "clear")
		e := newEngine(t, Config{Emergency: EmergencyConfig{Latch: true, RecoverAfter: 1}}, []Registration{reg("guard", "safety", guard)})
		failNow.Store(true)
		tick(t, e)
		e.ResetEmergency()
		if s := tick(t, e); !s.Emergency.Active || !s.Emergency.Latched {
			t.Fatalf("a failure after the reset: %+v, want active and latched", s.Emergency)
		}
		failNow.Store(false)
		time.Sleep(2 * time.Second) // the safety breaker, open after two failed ticks, cools down
		for range 3 {
			if s := tick(t, e); !s.EmergencyMode || mod(t, s, "guard").Status == faultsummary.StatusOpen {
				t.Fatalf("tick %d: emergency %v, guard %q: want the guard run and the emergency kept without a reset",
					s.TickID, s.EmergencyMode, mod(t, s, "guard").Status)
			}
		}
		e.ResetEmergency()
		if s := tick(t, e); s.EmergencyMode {
			t.Fatalf("after a reset with the fault cleared: %+v", s.Emergency)
		}
	})
}

func TestOpenSafetyBreakerIsStandingFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		guard := failing(fault.Transient(errBoom))
		e := newEngine(t, Config{Emergency: EmergencyConfig{RecoverAfter: 1}}, []Registration{reg("guard", "safety", guard)})
		tick(t, e)
		s := tick(t, e) // threshold 2 → open
		if mod(t, s, "guard").CircuitState != "open" {
			t.Fatal("safety breaker not open")
		}
		s = tick(t, e)
		if mod(t, s, "guard").Status != faultsummary.StatusOpen || !s.EmergencyMode || s.Emergency.HealthyTicks != 0 {
			t.Fatalf("open safety breaker must keep emergency: %+v", s.Emergency)
		}
	})
}

func TestAbortShortCircuits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		later := ok("x")
		e := newEngine(t, Config{}, []Registration{
			reg("gate", "knowledge", failing(fault.Validation(errBoom)), func(s *tiers.ModuleSpec) { s.Policy = tiers.Abort }),
			reg("later", "planning", later),
		})
		for i := 0; i < 5; i++ {
			s := tick(t, e)
			if s.Finish != faultsummary.ShortCircuited || s.EmergencyMode {
				t.Fatalf("finish %q emergency %v", s.Finish, s.EmergencyMode)
			}
			if tierOf(t, s, "planning").Status != faultsummary.TierSkipped || mod(t, s, "later").Status != faultsummary.StatusSkipped {
				t.Fatal("planning not skipped")
			}
			if mod(t, s, "gate").CircuitState != "closed" {
				t.Fatal("abort must not count as a breaker failure")
			}
		}
		if later.runs.Load() != 0 {
			t.Fatal("later ran")
		}
	})
}

// TestAbortRecordsNoBreakerFailure: a module under the abort policy that is abandoned at
// the deadline (timed_out) or still running from an earlier tick (busy) short-circuits the
// tick, and, as for any failure of an abort module, records nothing on its breaker.
func TestAbortRecordsNoBreakerFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := &script{fn: func(context.Context, *tiers.Input) (any, error) {
			time.Sleep(300 * time.Millisecond) // ignores its context; the knowledge budget is 200 ms
			return 1, nil
		}}
		e := newEngine(t, Config{}, []Registration{reg("gate", "knowledge", hang, func(s *tiers.ModuleSpec) { s.Policy = tiers.Abort })})
		want := []faultsummary.Status{faultsummary.StatusTimedOut, faultsummary.StatusBusy, faultsummary.StatusBusy, faultsummary.StatusTimedOut, faultsummary.StatusBusy}
		for i, w := range want { // five failures; the knowledge tier's breaker opens after 3
			if w == faultsummary.StatusTimedOut && i > 0 {
				time.Sleep(200 * time.Millisecond) // the abandoned run returns
			}
			s := tick(t, e)
			m := mod(t, s, "gate")
			if m.Status != w || s.Finish != faultsummary.ShortCircuited || s.EmergencyMode || m.CircuitState != "closed" {
				t.Errorf("tick %d: status %q (want %q), finish %q, emergency %v, circuit %q (an abort failure must not count)",
					s.TickID, m.Status, w, s.Finish, s.EmergencyMode, m.CircuitState)
				break
			}
		}
		time.Sleep(300 * time.Millisecond) // the last run returns before the bubble ends
	})
}

func TestFailFastInLaterTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		later := ok("x")
		e := newEngine(t, Config{}, []Registration{
			reg("strict", "knowledge", failing(fault.Validation(errBoom)), func(s *tiers.ModuleSpec) { s.Policy = tiers.FailFast }),
			reg("sibling", "knowledge", ok("s")),
			reg("later", "planning", later),
		})
		s := tick(t, e)
		if s.Finish != faultsummary.Failed || s.EmergencyMode || s.OverallSeverity != faultsummary.Critical {
			t.Fatalf("finish %q emergency %v severity %q", s.Finish, s.EmergencyMode, s.OverallSeverity)
		}
		if tierOf(t, s, "knowledge").Status != faultsummary.TierFailed || tierOf(t, s, "planning").Status != faultsummary.TierSkipped {
			t.Fatal("tier statuses wrong")
		}
		if mod(t, s, "sibling").Status != faultsummary.StatusOK || later.runs.Load() != 0 {
			t.Fatal("sibling must finish; later must not run")
		}
	})
}

func TestSharedBreakerOnOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failNow atomic.Bool
		a := switchable(&failNow, fault.Transient(errBoom), "a")
		b, c := ok("b"), ok("c")
		cfg := Config{Breakers: map[string]breaker.Settings{"llm": {FailureThreshold: 1, Cooldown: time.Minute}}}
		e := newEngine(t, cfg, []Registration{
			reg("a", "knowledge", a, func(s *tiers.ModuleSpec) { s.Breaker = "llm" }),
			reg("b", "planning", b, func(s *tiers.ModuleSpec) { s.Breaker = "llm"; s.OnOpen = tiers.Bypass }),
			reg("c", "planning", c, func(s *tiers.ModuleSpec) {
				s.Breaker = "llm"
				s.OnOpen = tiers.Fail
				s.Policy = tiers.FailFast
			}),
		})
		tick(t, e) // everything ok: b has a last-good value
		failNow.Store(true)
		s := tick(t, e) // a fails → llm opens (threshold 1)
		if mod(t, s, "a").Status != faultsummary.StatusFailed || !slices.Contains(s.OpenCircuits, "llm") {
			t.Fatalf("a %+v open %v", mod(t, s, "a"), s.OpenCircuits)
		}
		// a ran before b and c: its failure opened the breaker they share in the same tick.
		mb, mc := mod(t, s, "b"), mod(t, s, "c")
		if mb.Status != faultsummary.StatusOpen || mb.Served.Source != blackboard.LastGood || !mb.UsingFallback {
			t.Fatalf("b (bypass): %+v", mb)
		}
		if mc.Status != faultsummary.StatusOpen || tierOf(t, s, "planning").Status != faultsummary.TierFailed || s.Finish != faultsummary.Failed {
			t.Fatalf("c (fail): %+v tier %+v finish %q", mc, tierOf(t, s, "planning"), s.Finish)
		}
		if b.runs.Load() != 1 || c.runs.Load() != 1 {
			t.Fatal("b and c must not run while llm is open")
		}
		if len(s.OpenCircuits) != 1 {
			t.Fatalf("open_circuits lists a shared breaker once: %v", s.OpenCircuits)
		}
	})
}

func TestEveryThirdTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := ok("s")
		e := newEngine(t, Config{}, []Registration{reg("slow", "knowledge", slow, func(s *tiers.ModuleSpec) { s.Every = 3 })})
		var got []faultsummary.Status
		for i := 0; i < 7; i++ {
			got = append(got, mod(t, tick(t, e), "slow").Status)
		}
		want := []faultsummary.Status{"not_due", "not_due", "ok", "not_due", "not_due", "ok", "not_due"}
		if !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
		if slow.runs.Load() != 2 {
			t.Fatalf("runs %d", slow.runs.Load())
		}
	})
}

// TestIdleModulesWithExpiredValuesAreNotDegraded: a module with nothing to do this tick
// (not due, or emergency-only outside emergency mode) is not a degradation, also once its
// last value has outlived its TTL: the entry is served expired, but neither degraded_keys
// nor the severity count it, so a healthy tick stays ok.
// TestModuleOwnCanceledIsAFailure: a safety module that returns a context.Canceled of its
// own (a sub-operation it cancelled), while the tick goes on, fails: its breaker counts it
// and the cycle enters emergency mode. Only the tick's cancellation is not a fault.
func TestModuleOwnCanceledIsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		guard := &script{fn: func(ctx context.Context, _ *tiers.Input) (any, error) {
			sub, cancel := context.WithCancel(ctx)
			cancel()
			return nil, fmt.Errorf("sensor read: %w", sub.Err())
		}}
		e := newEngine(t, Config{}, []Registration{reg("guard", "safety", guard)})
		s := tick(t, e)
		g := mod(t, s, "guard")
		if g.Status != faultsummary.StatusFailed || g.FaultKind != "internal" || !s.EmergencyMode {
			t.Fatalf("guard %q kind %q; emergency %v", g.Status, g.FaultKind, s.EmergencyMode)
		}
	})
}

// TestCancelledTickIsNotAFault: a tick whose context the caller cancelled runs none of its
// modules; each fails as canceled, unrun, with nothing recorded on its breaker, and the
// safety tier's failing so does not enter emergency mode. The next tick runs normally.
func TestCancelledTickIsNotAFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		guard, work := ok("clear"), ok("w")
		e := newEngine(t, Config{}, []Registration{reg("guard", "safety", guard), reg("work", "knowledge", work)})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for range 3 { // the safety breaker's threshold is 2
			s, err := e.Tick(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"guard", "work"} {
				m := mod(t, s, name)
				if m.Status != faultsummary.StatusFailed || m.FaultKind != "canceled" || m.Attempts != 0 || m.CircuitState != "closed" {
					t.Fatalf("tick %d, %s: status %q kind %q attempts %d circuit %q", s.TickID, name, m.Status, m.FaultKind, m.Attempts, m.CircuitState)
				}
			}
			if s.EmergencyMode {
				t.Fatalf("tick %d: a cancelled tick entered emergency mode: %+v", s.TickID, s.Emergency)
			}
		}
		if guard.runs.Load() != 0 || work.runs.Load() != 0 {
			t.Fatalf("modules ran in cancelled ticks: guard %d, work %d", guard.runs.Load(), work.runs.Load())
		}
		s := tick(t, e)
		if mod(t, s, "guard").Status != faultsummary.StatusOK || s.OverallSeverity != faultsummary.OK {
			t.Fatalf("the next tick: guard %q, severity %q", mod(t, s, "guard").Status, s.OverallSeverity)
		}
	})
}

func TestIdleModulesWithExpiredValuesAreNotDegraded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failNow atomic.Bool
		failNow.Store(true)
		guard := switchable(&failNow, fault.Validation(errBoom), "clear")
		e := newEngine(t, Config{Emergency: EmergencyConfig{SkipTiers: []string{"knowledge"}, RecoverAfter: 1}}, []Registration{
			reg("guard", "safety", guard),
			reg("rare", "knowledge", ok("r"), func(s *tiers.ModuleSpec) { s.Every = 4; s.TTL = lastgood.TTL{Fixed: time.Second} }),
			reg("safe_stop", "planning", ok("stopped"), func(s *tiers.ModuleSpec) { s.Emergency = true }),
		})
		if s := tick(t, e); !s.EmergencyMode || mod(t, s, "safe_stop").Status != faultsummary.StatusOK {
			t.Fatalf("tick 1: emergency %v, safe_stop %q", s.EmergencyMode, mod(t, s, "safe_stop").Status)
		}
		failNow.Store(false)
		for range 3 { // tick 2 recovers; tick 4 runs rare (every 4th tick)
			tick(t, e)
		}
		time.Sleep(10 * time.Second) // past both values' TTLs (1 s, and the default 5 s)
		s := tick(t, e)              // tick 5: rare not due, safe_stop idle
		for _, name := range []string{"rare", "safe_stop"} {
			if sv := mod(t, s, name).Served; sv.Source != blackboard.None || !sv.Expired {
				t.Errorf("%s served %+v, want none, expired", name, sv)
			}
		}
		if s.EmergencyMode || len(s.DegradedKeys) > 0 || s.OverallSeverity != faultsummary.OK {
			t.Fatalf("healthy tick: emergency %v, degraded_keys %v, severity %q", s.EmergencyMode, s.DegradedKeys, s.OverallSeverity)
		}
	})
}

// TestSameTierReaderSeesLastGoodOnly: a module reading a key written by a module of its own
// tier gets the value from before this tick, tagged stale (nothing in the first tick),
// never this tick's, whichever of the two finishes first.
func TestSameTierReaderSeesLastGoodOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []blackboard.Entry
		writer := &script{fn: func(_ context.Context, in *tiers.Input) (any, error) { return in.TickID(), nil }}
		reader := &script{fn: func(_ context.Context, in *tiers.Input) (any, error) {
			time.Sleep(5 * time.Millisecond) // the writer, run first, has returned
			e, _ := in.Get("w.result")
			seen = append(seen, e)
			return "r", nil
		}}
		e := newEngine(t, Config{}, []Registration{
			reg("w", "knowledge", writer, func(s *tiers.ModuleSpec) { s.Priority = 10 }),
			reg("r", "knowledge", reader, func(s *tiers.ModuleSpec) { s.Reads = []string{"w.result"} }),
		})
		for range 3 {
			tick(t, e)
		}
		if seen[0].Source != blackboard.None {
			t.Errorf("tick 1: read %+v, want nothing (no value before the tick)", seen[0])
		}
		for i, en := range seen[1:] {
			if id := uint64(i + 2); en.Source != blackboard.LastGood || !en.Stale || en.TickID != id-1 || en.Value != id-1 {
				t.Errorf("tick %d: read %+v, want tick %d's value, stale", id, en, id-1)
			}
		}
	})
}

func TestDerivedFromStalePropagates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failNow atomic.Bool
		src := switchable(&failNow, fault.Permanent(errBoom), 1)
		mid := &script{fn: func(_ context.Context, in *tiers.Input) (any, error) { return in.Value("src.result"), nil }}
		top := &script{fn: func(_ context.Context, in *tiers.Input) (any, error) { return in.Value("mid.result"), nil }}
		cfg := Config{Tiers: append(testTiers(), tiers.Tier{Name: "execution", Budget: 50 * time.Millisecond})}
		e := newEngine(t, cfg, []Registration{
			reg("src", "knowledge", src),
			reg("mid", "planning", mid, func(s *tiers.ModuleSpec) { s.Reads = []string{"src.result"} }),
			reg("top", "execution", top, func(s *tiers.ModuleSpec) { s.Reads = []string{"mid.result"} }),
		})
		s := tick(t, e)
		if mod(t, s, "mid").Served.DerivedFromStale || mod(t, s, "top").Served.DerivedFromStale {
			t.Fatal("fresh inputs tagged stale")
		}
		failNow.Store(true)
		s = tick(t, e)
		if !mod(t, s, "src").Served.Stale {
			t.Fatal("src not stale")
		}
		m, tp := mod(t, s, "mid"), mod(t, s, "top")
		if m.Served.Source != blackboard.Live || !m.Served.DerivedFromStale || !tp.Served.DerivedFromStale {
			t.Fatalf("mid %+v top %+v", m.Served, tp.Served)
		}
		// The value itself flowed through the last-known-good store.
		if tp.Served.Value != 1 {
			t.Fatalf("top value %v", tp.Served.Value)
		}
	})
}

func TestRegisterAppliesAtTickBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{}, []Registration{reg("a", "knowledge", ok("a"))})
		tick(t, e)
		late := ok("late")
		if err := e.Register(reg("late", "planning", late)); err != nil {
			t.Fatal(err)
		}
		if err := e.Register(reg("late", "planning", late)); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("duplicate: %v", err)
		}
		var ve *tiers.ValidationError
		if err := e.Register(reg("bad", "nowhere", ok(1))); !errors.As(err, &ve) || ve.Problems[0].Path != "modules[2].tier" {
			t.Fatalf("invalid: %v", err)
		}
		if mi, ok := e.Module("late"); !ok || !mi.Pending {
			t.Fatal("pending registration not visible")
		}
		s := tick(t, e)
		if mod(t, s, "late").Status != faultsummary.StatusOK {
			t.Fatal("registered module did not run on the next tick")
		}
		if err := e.Deregister("a"); !errors.Is(err, ErrNotRuntime) {
			t.Fatalf("deregister config module: %v", err)
		}
		if err := e.Deregister("late"); err != nil {
			t.Fatal(err)
		}
		s = tick(t, e)
		if _, ok := s.Module("late"); ok {
			t.Fatal("deregistered module still runs")
		}
	})
}

func TestReloadRejectedWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{}, []Registration{reg("a", "knowledge", ok("a"))})
		bad := testTiers()
		bad[1].Budget = 0
		err := e.Reload(Config{Tiers: bad}, []Registration{reg("a", "knowledge", ok("a"))})
		var ve *tiers.ValidationError
		if !errors.As(err, &ve) || ve.Problems[0].Path != "tiers[1].budget" {
			t.Fatalf("got %v", err)
		}
		s := tick(t, e)
		if tierOf(t, s, "knowledge").BudgetMs != 200 {
			t.Fatal("running config changed by a rejected reload")
		}
	})
}

// TestReloadReplacesOpenBreaker: a reload that changes an open breaker's settings replaces
// it with a closed one (docs/architecture.md), and the summaries say so from the next
// tick on: the module runs, its circuit is closed, no circuit is listed open.
func TestReloadReplacesOpenBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failNow atomic.Bool
		failNow.Store(true)
		m := switchable(&failNow, fault.Validation(errBoom), "v")
		regs := []Registration{reg("m", "knowledge", m)}
		e := newEngine(t, Config{}, regs)
		var s *faultsummary.Summary
		for range 3 { // the knowledge tier's threshold
			s = tick(t, e)
		}
		if !slices.Equal(s.OpenCircuits, []string{"m"}) {
			t.Fatalf("before the reload: open circuits %v, want [m]", s.OpenCircuits)
		}
		ts := testTiers()
		ts[1].Breaker.FailureThreshold = 4
		if err := e.Reload(Config{Tiers: ts}, regs); err != nil {
			t.Fatal(err)
		}
		failNow.Store(false)
		s = tick(t, e)
		if mm := mod(t, s, "m"); mm.Status != "ok" || mm.CircuitState != "closed" || len(s.OpenCircuits) > 0 || s.OverallSeverity != "ok" {
			t.Fatalf("after the reload: status %q, circuit %q, open circuits %v, severity %q",
				mm.Status, mm.CircuitState, s.OpenCircuits, s.OverallSeverity)
		}
	})
}

func TestTickIDsAndHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{History: 3}, []Registration{reg("a", "knowledge", ok("a"))})
		for i := 1; i <= 5; i++ {
			if s := tick(t, e); s.TickID != uint64(i) {
				t.Fatalf("tick id %d, want %d", s.TickID, i)
			}
		}
		if _, ok := e.History().Get(2); ok {
			t.Fatal("tick 2 should have left a history of 3")
		}
		if s, ok := e.History().Get(4); !ok || s.TickID != 4 {
			t.Fatal("tick 4 missing")
		}
		b, _ := json.Marshal(e.Latest())
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		for _, k := range []string{"schema", "tick_id", "scheduled_at", "started_at", "finished_at", "start_lag_ms", "wall_ms",
			"overrun", "finish", "emergency_mode", "emergency", "overall_severity", "tiers", "modules", "retry_counts",
			"open_circuits", "half_open_circuits", "degraded_keys", "budget_violations"} {
			if _, ok := m[k]; !ok {
				t.Errorf("summary JSON lacks %q", k)
			}
		}
		if m["schema"] != faultsummary.Schema {
			t.Errorf("schema %v", m["schema"])
		}
	})
}

// tickWithBlockers ticks, in a synctest bubble, an engine of n modules (m000, m001, …) in
// one tier, all proven fast, on a tick in which the modules that blocks picks sleep 20 ms
// ignoring their context. It checks every module's status and value and the tier's
// length, and hands check when, after the tick started, each module started.
func tickWithBlockers(t *testing.T, n int, blocks func(i int) bool, check func(t *testing.T, started []time.Duration)) {
	synctest.Test(t, func(t *testing.T) {
		var blockOn atomic.Uint64
		ranAt := make([]atomic.Int64, n)
		var regs []Registration
		for i := 0; i < n; i++ {
			m := &script{fn: func(_ context.Context, in *tiers.Input) (any, error) {
				ranAt[i].Store(int64(time.Now().UnixNano()))
				if blocks(i) && in.TickID() == blockOn.Load() {
					time.Sleep(20 * time.Millisecond) // ignores its context
				}
				return i, nil
			}}
			regs = append(regs, reg(fmt.Sprintf("m%03d", i), "planning", m))
		}
		e := newEngine(t, Config{}, regs)
		for i := 0; i <= fastStreak; i++ {
			tick(t, e) // every module proves fast
		}
		blockOn.Store(uint64(fastStreak + 2))
		start := time.Now()
		s := tick(t, e)
		started := make([]time.Duration, n)
		for i := range started {
			started[i] = time.Duration(ranAt[i].Load() - start.UnixNano())
			if m := mod(t, s, fmt.Sprintf("m%03d", i)); m.Status != faultsummary.StatusOK || m.Served.Value != i {
				t.Fatalf("%s: %s, value %v", m.Name, m.Status, m.Served.Value)
			}
		}
		// Blocking modules claimed by a stuck runner start when the stall is seen (1ms).
		if el := tierOf(t, s, "planning").ElapsedMs; el < 20 || el > 20+2*float64(stallCheck/time.Millisecond) {
			t.Fatalf("tier took %vms, want 20ms plus at most two stall checks", el)
		}
		check(t, started)
	})
}

// TestFastModuleThatBlocksDoesNotHoldOthers: modules proven fast run inline on the runner
// pool; when some of them block unexpectedly, the others still run at once.
func TestFastModuleThatBlocksDoesNotHoldOthers(t *testing.T) {
	tickWithBlockers(t, 32, func(i int) bool { return i%claimChunk == 0 }, func(t *testing.T, started []time.Duration) {
		for i, d := range started {
			if i%claimChunk != 0 && d > 5*time.Millisecond {
				t.Errorf("m%03d ran %v after the tier started, held up by a blocked neighbour", i, d)
			}
		}
	})
}

// A fast module that blocks in the middle of a large claim (the runner claims maxChunk
// modules at a time once it knows they take no time) holds up the modules claimed with
// it only until the stall check hands them to another runner.
func TestFastModuleThatBlocksInALargeChunk(t *testing.T) {
	const n, blocker = 200, claimChunk + maxChunk + 5 // inside the third claim
	tickWithBlockers(t, n, func(i int) bool { return i == blocker }, func(t *testing.T, started []time.Duration) {
		late := 0
		for i, d := range started {
			switch {
			case i != blocker && d > 2*stallCheck:
				t.Errorf("m%03d ran %v after the tier started, held up by a blocked neighbour", i, d)
			case d >= stallCheck:
				late++
				if i < blocker {
					t.Errorf("m%03d, before the blocker, ran %v after the tier started", i, d)
				}
			}
		}
		// The tier has one runner (no time passes in the bubble: the first chunk's pace is
		// zero, not worth a second runner), stuck in the blocker: the modules it claimed
		// with the blocker, and those after, ran once the stall check saw it.
		if want := n - blocker - 1; late != want {
			t.Errorf("%d modules started after the stall check, want the %d behind the blocker", late, want)
		}
	})
}

// ModuleFunc values are not comparable; reloads and registrations must still work.
func TestModuleFuncSurvivesReloadAndRegister(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return 1, nil })
		g := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return 2, nil })
		e := newEngine(t, Config{}, []Registration{{Spec: tiers.ModuleSpec{Name: "f", Tier: "knowledge"}, Module: f}})
		tick(t, e)
		if err := e.Register(Registration{Spec: tiers.ModuleSpec{Name: "g", Tier: "planning"}, Module: g}); err != nil {
			t.Fatal(err)
		}
		s := tick(t, e)
		if mod(t, s, "g").Served.Value != 2 {
			t.Fatal("registered ModuleFunc did not run")
		}
		if err := e.Reload(Config{Tiers: testTiers()}, []Registration{{Spec: tiers.ModuleSpec{Name: "f", Tier: "knowledge"}, Module: f}}); err != nil {
			t.Fatal(err)
		}
		s = tick(t, e)
		if mod(t, s, "f").Status != faultsummary.StatusOK || mod(t, s, "g").Status != faultsummary.StatusOK {
			t.Fatal("modules lost by a reload")
		}
	})
}

// Leaving emergency mode needs ticks in which every due safety module succeeded: a safety
// module failing under the abort policy does not enter emergency, but it does not count
// as healthy either.
func TestEmergencyRecoveryNeedsEverySafetyModule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var guardFails, gateFails atomic.Bool
		guard := &script{fn: func(context.Context, *tiers.Input) (any, error) {
			if guardFails.Load() {
				return nil, fault.Validation(errBoom)
			}
			return 1, nil
		}}
		gate := &script{fn: func(context.Context, *tiers.Input) (any, error) {
			if gateFails.Load() {
				return nil, fault.Validation(errBoom)
			}
			return 1, nil
		}}
		e := newEngine(t, Config{Emergency: EmergencyConfig{RecoverAfter: 2}}, []Registration{
			reg("guard", "safety", guard),
			reg("gate", "safety", gate, func(s *tiers.ModuleSpec) { s.Policy = tiers.Abort }),
		})
		gateFails.Store(true)
		if s := tick(t, e); s.EmergencyMode || s.Finish != faultsummary.ShortCircuited {
			t.Fatalf("an abort-policy safety failure must short-circuit, not enter emergency: %+v", s.Emergency)
		}
		guardFails.Store(true)
		if s := tick(t, e); !s.EmergencyMode {
			t.Fatal("guard failure did not enter emergency")
		}
		guardFails.Store(false)
		for i := 0; i < 3; i++ {
			if s := tick(t, e); !s.EmergencyMode || s.Emergency.HealthyTicks != 0 {
				t.Fatalf("gate still fails: healthy_ticks %d, emergency %v", s.Emergency.HealthyTicks, s.EmergencyMode)
			}
		}
		gateFails.Store(false)
		tick(t, e)
		if s := tick(t, e); s.EmergencyMode {
			t.Fatal("no recovery after two fully healthy ticks")
		}
	})
}

// When the runners are all stuck past the deadline, the modules they never reached are
// reported for what they are: not due and emergency-only modules keep those statuses, the
// rest timed_out as never started (no breaker event).
func TestDeadlineBeforeAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ts := []tiers.Tier{{Name: "safety", Budget: time.Second}, {Name: "work", Budget: 500 * time.Microsecond}}
		var regs []Registration
		n := claimChunk * runtime.GOMAXPROCS(0)
		for i := 0; i < n; i++ {
			m := &script{fn: func(context.Context, *tiers.Input) (any, error) {
				if i%claimChunk == 0 {
					time.Sleep(2 * time.Millisecond) // ignores its context, holds its runner
				}
				return i, nil
			}}
			regs = append(regs, reg(fmt.Sprintf("b%03d", i), "work", m, func(s *tiers.ModuleSpec) { s.Priority = 10 }))
		}
		regs = append(regs,
			reg("nd", "work", ok(1), func(s *tiers.ModuleSpec) { s.Every = 2 }),
			reg("eo", "work", ok(1), func(s *tiers.ModuleSpec) { s.Emergency = true }),
			reg("plain", "work", ok(1)),
		)
		e := newEngine(t, Config{Tiers: ts}, regs)
		s := tick(t, e)
		if st := mod(t, s, "nd").Status; st != faultsummary.StatusNotDue {
			t.Errorf("nd: %q, want not_due", st)
		}
		if st := mod(t, s, "eo").Status; st != faultsummary.StatusSkipped {
			t.Errorf("eo: %q, want skipped", st)
		}
		p := mod(t, s, "plain")
		if p.Status != faultsummary.StatusTimedOut || p.Attempts != 0 || p.Error != decide.CauseUnstarted.Err().Error() {
			t.Errorf("plain: %+v, want timed_out, 0 attempts, never started", p)
		}
		if b := mod(t, s, "b000"); b.Status != faultsummary.StatusTimedOut || b.Attempts != 1 {
			t.Errorf("b000: %+v, want timed_out after 1 attempt", b)
		}
		synctest.Wait()
		time.Sleep(5 * time.Millisecond) // let the blocked modules return before the bubble ends
	})
}

// A module that returns after its tier's deadline is timed_out and its value discarded,
// even when the engine only gets to look after it returned (here: a simulated clock that
// the module itself moves past the deadline).
func TestLateResultDiscardedOnFakeClock(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	late := &script{fn: func(context.Context, *tiers.Input) (any, error) {
		clk.Advance(200 * time.Millisecond) // "takes" 200ms of a 100ms budget
		return "late", nil
	}}
	e := newEngine(t, Config{}, []Registration{reg("late", "planning", late, func(s *tiers.ModuleSpec) { s.MaxAttempts = 1 })},
		WithClock(clk))
	var w *worker
	for _, rt := range e.activeView.Load().lines {
		if rt.name == "late" {
			w = rt.w
		}
	}
	for i := 0; i < 3; i++ { // the third timed-out tick opens its breaker (threshold 3)
		s := tick(t, e)
		m := mod(t, s, "late")
		if m.Status != faultsummary.StatusTimedOut || m.Served.Source == blackboard.Live {
			t.Fatalf("tick %d: %+v, want timed_out with the value discarded", s.TickID, m)
		}
		if !tierOf(t, s, "planning").BudgetExhausted {
			t.Fatal("budget not reported exhausted")
		}
		// The abandoned run may still be returning when the tick ends (the engine does not
		// wait for it): until it has, the next tick rightly reports the module busy.
		for w.busy() {
			runtime.Gosched()
		}
	}
}

// A module that returns at the very instant of its tier's deadline is late, whichever of
// it and the engine gets there first: on a clock that stands still while goroutines run
// (a synctest bubble, a simulation) both come due at once, and the module's own commit
// used to find its end "not after" the deadline and report a success or a failure where
// the engine, had it run first, abandoned the run. The deadline is reached at its instant,
// as for the retry budget and the engine's wait.
func TestResultAtTheDeadlineIsLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const budget = 10 * time.Millisecond
		ts := []tiers.Tier{{Name: "safety", Budget: time.Second}, {Name: "work", Budget: budget, MaxAttempts: 1,
			Breaker: breaker.Settings{FailureThreshold: 1 << 30, Cooldown: time.Second}}}
		exact := func(err error) *script {
			return &script{fn: func(context.Context, *tiers.Input) (any, error) {
				time.Sleep(budget) // ignores its context, returns at the deadline
				return "v", err
			}}
		}
		e := newEngine(t, Config{Tiers: ts}, []Registration{
			reg("succeeds", "work", exact(nil)), reg("fails", "work", exact(fault.Transient(errors.New("x")))),
		})
		t.Cleanup(func() { time.Sleep(2 * budget) }) // a failed check leaves no module asleep in the bubble
		for range 40 {
			s := tick(t, e)
			for _, name := range []string{"succeeds", "fails"} {
				if m := mod(t, s, name); m.Status != faultsummary.StatusTimedOut || m.Served.Source == blackboard.Live {
					t.Fatalf("tick %d: %s %+v, want timed_out with nothing served live", s.TickID, name, m)
				}
			}
			time.Sleep(2 * budget) // the abandoned runs return before the next tick
		}
	})
}

func TestWorthHelp(t *testing.T) {
	for _, c := range []struct {
		left      int64
		perModule time.Duration
		want      bool
	}{
		{0, time.Millisecond, false},
		{-8, time.Millisecond, false}, // over-claimed: nothing left
		{10, time.Microsecond, false},
		{49, time.Microsecond, false},
		{50, time.Microsecond, true}, // exactly helpWork
		{1, time.Millisecond, true},
		{1000, 0, false},                      // no module ran inline: nothing to go by
		{99, 500 * time.Nanosecond, false},    // trivial modules, under helpWork in all
		{100000, 500 * time.Nanosecond, true}, // trivial modules of a long tier: two cores still gain
	} {
		if got := worthHelp(c.left, c.perModule); got != c.want {
			t.Errorf("worthHelp(%d, %v) = %v, want %v", c.left, c.perModule, got, c.want)
		}
	}
}

func TestChunkFor(t *testing.T) {
	for _, c := range []struct {
		perModule time.Duration
		want      int64
	}{
		{0, maxChunk}, // no time measured (virtual time): the largest
		{-time.Microsecond, maxChunk},
		{time.Nanosecond, maxChunk},
		{chunkWork / maxChunk, maxChunk},
		{chunkWork / 20, 20},
		{chunkWork / claimChunk, claimChunk},
		{time.Millisecond, claimChunk}, // never below the first chunk
	} {
		if got := chunkFor(c.perModule); got != c.want {
			t.Errorf("chunkFor(%v) = %d, want %d", c.perModule, got, c.want)
		}
	}
}

// The first claim of a tier takes claimChunk modules; once a runner has scaled the tier
// from its pace, claims take chunkFor of it, and the last one what is left.
func TestClaimSizes(t *testing.T) {
	tr := &tierRun{mods: make([]*modRT, 100)}
	var got [][2]int
	for i, k, ok := tr.claim(); ok; i, k, ok = tr.claim() {
		got = append(got, [2]int{i, k})
		if len(got) == 1 {
			tr.scale(chunkWork / 40) // too little work left to wake a runner: no pool needed
		}
	}
	want := [][2]int{{0, claimChunk}, {claimChunk, claimChunk + 40}, {claimChunk + 40, claimChunk + 80}, {claimChunk + 80, 100}}
	if !slices.Equal(got, want) {
		t.Fatalf("claims %v, want %v", got, want)
	}
}

// A tier starts on one runner and takes a second only when what is left is worth waking
// it for: a short tier never runs two modules at once, a long one does.
func TestRunnersScaleWithTheTier(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS ≥ 2")
	}
	for _, c := range []struct {
		name string
		n    int
		cost time.Duration // virtual time each module takes (under fastLatency: inline)
		want int32         // modules running at once, at most
	}{
		{"short tier", 16, time.Microsecond, 1},
		{"long tier", 64, 20 * time.Microsecond, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var running, peak atomic.Int32
				var measure atomic.Bool
				var regs []Registration
				for i := range c.n {
					regs = append(regs, reg(fmt.Sprintf("m%02d", i), "planning", &script{fn: func(context.Context, *tiers.Input) (any, error) {
						r := running.Add(1)
						if measure.Load() && r > peak.Load() {
							peak.Store(r)
						}
						time.Sleep(c.cost)
						running.Add(-1)
						return i, nil
					}}))
				}
				e := newEngine(t, Config{}, regs)
				for i := 0; i <= fastStreak; i++ {
					tick(t, e) // every module proves fast
				}
				measure.Store(true)
				s := tick(t, e)
				if got := peak.Load(); got != c.want {
					t.Fatalf("%d modules ran at once, want %d (tier took %vms)", got, c.want, tierOf(t, s, "planning").ElapsedMs)
				}
			})
		})
	}
}

// The engine keeps each spec once (in its plan) and gives registrations back as they were
// registered: a module placed by depends_on comes back without the tier the plan gave it,
// so that a reload places it again.
func TestRegistrationsAsRegistered(t *testing.T) {
	in := []Registration{
		reg("b", "", ok(1), func(s *tiers.ModuleSpec) { s.DependsOn = []string{"a"}; s.Reads = []string{"a.result"} }),
		reg("a", "safety", ok(2), func(s *tiers.ModuleSpec) { s.Priority = 3; s.TTL = lastgood.TTL{Fixed: time.Second} }),
	}
	e := newEngine(t, Config{}, slices.Clone(in))
	if err := e.Register(reg("c", "planning", ok(3), func(s *tiers.ModuleSpec) { s.Every = 2 })); err != nil {
		t.Fatal(err)
	}
	got := e.Registrations()
	want := append(slices.Clone(in), reg("c", "planning", ok(3), func(s *tiers.ModuleSpec) { s.Every = 2 }))
	want[0].Origin, want[1].Origin, want[2].Origin = FromConfig, FromConfig, FromRuntime
	if len(got) != len(want) {
		t.Fatalf("got %d registrations, want %d", len(got), len(want))
	}
	for i := range want {
		if g, w := fmt.Sprintf("%+v %s", got[i].Spec, got[i].Origin), fmt.Sprintf("%+v %s", want[i].Spec, want[i].Origin); g != w {
			t.Errorf("registration %d:\n got %s\nwant %s", i, g, w)
		}
	}
	if mi, ok := e.Module("b"); !ok || mi.Spec.Tier != "knowledge" {
		t.Errorf("planned tier of b = %q, want knowledge (after a's safety tier)", mi.Spec.Tier)
	}
	tick(t, e) // the pending registration applies; the registrations stay as registered
	if g := e.Registrations(); g[0].Spec.Tier != "" || len(g) != 3 {
		t.Errorf("after a tick: %+v", g)
	}
}

func TestNextFast(t *testing.T) {
	const hiccup = fastStreak + 1
	quick, slowish, blocking := time.Microsecond, 2*fastLatency, stallCheck
	for _, c := range []struct {
		name     string
		f        int32
		d        time.Duration
		attempts int
		want     int32
	}{
		{"fast stays fast", fastStreak, quick, 1, fastStreak},
		{"one hiccup is forgiven", fastStreak, slowish, 1, hiccup},
		{"a second hiccup in a row makes it slow", hiccup, slowish, 1, 0},
		{"a fast run clears the hiccup", hiccup, quick, 1, fastStreak},
		{"blocking makes it slow at once", fastStreak, blocking, 1, 0},
		{"blocking after a hiccup", hiccup, blocking, 1, 0},
		{"a retried run makes it slow", fastStreak, quick, 2, 0},
		{"slow and slow again", 0, slowish, 1, 0},
		{"slow, then a fast run", 0, quick, 1, 1},
		{"one fast run short of the streak", fastStreak - 1, quick, 1, fastStreak},
		{"a hiccup while proving fast starts over", fastStreak - 1, slowish, 1, 0},
		{"an attempt that never ran counts as fast", fastStreak, quick, 0, fastStreak},
	} {
		if got := nextFast(c.f, c.d, c.attempts); got != c.want {
			t.Errorf("%s: nextFast(%d, %v, %d) = %d, want %d", c.name, c.f, c.d, c.attempts, got, c.want)
		}
	}
}

// armCounter is a fake clock that counts how often a timer is armed (AfterFunc, Reset):
// arming a runtime timer that falls due first wakes another thread.
type armCounter struct {
	*clock.Fake
	arms int
}

func (c *armCounter) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.arms++
	return countedTimer{c.Fake.AfterFunc(d, f), c}
}

type countedTimer struct {
	clock.Timer
	c *armCounter
}

func (t countedTimer) Reset(d time.Duration) bool { t.c.arms++; return t.Timer.Reset(d) }

// TestStallCheckLifecycle: the stall check is one timer, armed while some modules of a tier
// await admission. Tiers that follow one another while it is armed take it over without
// arming it again; one whose modules are all admitted leaves it to run out, unless it waits
// for modules on their own goroutines, which stops it, so that the engine's wait is one
// timer to the deadline. Unadmitted modules and no progress wake sweepers and re-arm the
// check, until the deadline is within one check.
func TestStallCheckLifecycle(t *testing.T) {
	clk := &armCounter{Fake: clock.NewFake(time.Unix(1000, 0))}
	e := newEngine(t, Config{}, nil, WithClock(clk))
	mods := make([]*modRT, 3)
	newTier := func(budget time.Duration) *tierRun {
		return &tierRun{e: e, tick: 1, mods: mods, deadline: clk.Now().Add(budget)}
	}
	check := func(step string, timers, arms int) {
		t.Helper()
		if clk.Timers() != timers || clk.arms != arms {
			t.Fatalf("%s: armed timers %d, times armed %d; want %d, %d", step, clk.Timers(), clk.arms, timers, arms)
		}
	}

	// Back-to-back tiers of fast modules: armed once, run out with nothing to watch.
	a := newTier(time.Second)
	a.watchStall(clk.Now(), 0)
	check("first watch", 1, 1)
	a.admit(2)
	check("a module left to admit", 1, 1)
	a.admit(1)
	check("all admitted", 1, 1)
	b := newTier(time.Second)
	b.watchStall(clk.Now(), 0)
	check("the next tier's watch", 1, 1)
	b.admit(3)
	clk.Advance(stallCheck)
	check("ran out with no watch", 0, 1)

	// Every module admitted already: nothing to watch.
	a = newTier(time.Second)
	a.admit(3)
	a.watchStall(clk.Now(), 0)
	check("an admitted tier", 0, 1)

	// A watch that takes over the armed timer gets its own check, stallCheck after it began.
	a = newTier(time.Second)
	a.watchStall(clk.Now(), 0)
	a.admit(3)
	clk.Advance(stallCheck / 2)
	b = newTier(time.Second)
	b.watchStall(clk.Now(), 0)
	b.progress.Add(1)
	clk.Advance(stallCheck / 2)
	if b.lastProgress.Load() != 0 {
		t.Fatal("the check of the later watch came with the earlier watch's")
	}
	check("fired for the earlier watch, re-armed for the later", 1, 3)
	clk.Advance(stallCheck / 2)
	if b.lastProgress.Load() != 1 {
		t.Fatal("no check stallCheck after the later watch began")
	}
	check("checked, modules left: re-armed", 1, 4)

	// A tier left waiting for modules on their own goroutines stops the timer.
	b.dispatched.Store(true)
	b.admit(3)
	check("admitted, waiting for dispatched modules", 0, 4)

	// Modules left to admit while the tier progresses: the check re-arms until the
	// deadline less the margin is within one check (sweepers for a tier that makes no
	// progress: TestFastModuleThatBlocksDoesNotHoldOthers).
	a = newTier(3*stallCheck + stallCheck/2)
	a.watchStall(clk.Now(), stallCheck)
	for i, want := range []int{1, 0} {
		a.progress.Add(1)
		clk.Advance(stallCheck)
		check(fmt.Sprintf("check %d", i+1), want, 6)
	}
	a.stopStall() // harmless when no longer armed
	check("stopStall after the last check", 0, 6)

	// Closing the engine stops a timer left to run out.
	a = newTier(time.Second)
	a.watchStall(clk.Now(), 0)
	a.admit(3)
	check("left to run out", 1, 7)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	check("closed", 0, 7)
}

// TestSafetyRetention: a reload or a removal that takes a module out of the safety tier
// (the first) is refused unless allowed; allowed, it names what it removed. Moving a module
// out of the safety tier is removing it from there.
func TestSafetyRetention(t *testing.T) {
	cfg := Config{Tiers: testTiers()}
	base := []Registration{reg("guard", "safety", ok(1)), reg("recall", "knowledge", ok(2))}
	for _, tc := range []struct {
		name  string
		mods  []Registration
		allow bool
		lost  []string // nil: accepted without removing any
	}{
		{"same modules", base, false, nil},
		{"another module dropped", base[:1], false, nil},
		{"safety module dropped", base[1:], false, []string{"guard"}},
		{"safety module moved", []Registration{reg("guard", "knowledge", ok(1)), base[1]}, false, []string{"guard"}},
		{"no module at all", nil, false, []string{"guard"}},
		{"dropped, allowed", base[1:], true, []string{"guard"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, cfg, base)
			var removed []string
			var opts []ChangeOption
			if tc.allow {
				opts = append(opts, AllowSafetyRemoval(&removed))
			}
			err := e.Reload(cfg, tc.mods, opts...)
			var se *SafetyRemovalError
			switch {
			case tc.lost == nil && err != nil:
				t.Fatalf("Reload: %v", err)
			case tc.lost != nil && tc.allow:
				if err != nil || !slices.Equal(removed, tc.lost) {
					t.Fatalf("Reload allowed: %v, removed %v, want %v", err, removed, tc.lost)
				}
			case tc.lost != nil && (!errors.As(err, &se) || !slices.Equal(se.Modules, tc.lost)):
				t.Fatalf("Reload: %v, want ErrSafetyRemoval of %v", err, tc.lost)
			}
		})
	}
	e := newEngine(t, cfg, base)
	if err := e.Register(reg("rt", "safety", ok(3))); err != nil {
		t.Fatal(err)
	}
	if err := e.Deregister("rt"); !errors.Is(err, ErrSafetyRemoval) {
		t.Fatalf("Deregister of a runtime safety module: %v, want ErrSafetyRemoval", err)
	}
	if err := e.Deregister("rt", AllowSafetyRemoval(nil)); err != nil {
		t.Fatalf("Deregister allowed: %v", err)
	}
}
