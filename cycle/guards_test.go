package cycle

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// slowWhile returns a module that takes d (virtual time) while slow is set.
func slowWhile(slow *atomic.Bool, d time.Duration) *script {
	return &script{fn: func(ctx context.Context, in *tiers.Input) (any, error) {
		if slow.Load() {
			time.Sleep(d)
		}
		return in.TickID(), nil
	}}
}

// Load shedding on virtual time: overruns shed the lowest priority class in steps, the
// shed module is served from last-known-good, critical and safety modules are never shed,
// and ticks that fit restore a step after restore_after of them.
func TestSheddingStepsAndRestores(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var slow atomic.Bool
		var events []ShedEvent
		cfg := Config{Shedding: &SheddingConfig{AfterOverruns: 2, RestoreAfter: 2, Target: 20 * time.Millisecond}}
		e := newEngine(t, cfg, []Registration{
			reg("s", "safety", ok(1)),
			reg("low", "knowledge", slowWhile(&slow, 30*time.Millisecond)),
			reg("mid", "knowledge", ok(2), func(s *tiers.ModuleSpec) { s.Priority = 5 }),
			reg("crit", "planning", ok(3), func(s *tiers.ModuleSpec) { s.Priority = -7; s.Critical = true }),
		}, WithHooks(Hooks{OnShed: func(ev ShedEvent) { events = append(events, ev) }}))
		tick(t, e) // low has a last-known-good value
		slow.Store(true)
		for range 2 {
			if s := tick(t, e); s.Shed != nil || mod(t, s, "low").Status != faultsummary.StatusOK {
				t.Fatalf("tick %d: shed %+v before after_overruns overruns", s.TickID, s.Shed)
			}
		}
		if len(events) != 1 || !events[0].Shed || events[0].Level != 1 || !slices.Equal(events[0].Modules, []string{"low"}) {
			t.Fatalf("events after two overruns = %+v, want one step shedding low", events)
		}
		s := tick(t, e)
		low := mod(t, s, "low")
		if low.Status != faultsummary.StatusShed || low.Served.Source != blackboard.LastGood || !low.Served.Stale {
			t.Fatalf("shed module line = %+v, want shed and served stale from last-known-good", low)
		}
		if s.Shed == nil || s.Shed.Level != 1 || !slices.Equal(s.Shed.Modules, []string{"low"}) || s.Shed.SinceTick != 3 || s.Shed.Reason == "" {
			t.Fatalf("summary shed = %+v", s.Shed)
		}
		for _, n := range []string{"s", "mid", "crit"} {
			if st := mod(t, s, n).Status; st != faultsummary.StatusOK {
				t.Errorf("%s: %s, want ok", n, st)
			}
		}
		if tierOf(t, s, "knowledge").Status != faultsummary.TierDegraded || s.OverallSeverity != faultsummary.Degraded {
			t.Errorf("a shed module degrades its tier and the tick: %+v %s", tierOf(t, s, "knowledge"), s.OverallSeverity)
		}
		if s = tick(t, e); mod(t, s, "low").Status != faultsummary.StatusShed || len(events) != 2 || events[1].Shed || events[1].Level != 0 {
			t.Fatalf("two fitting ticks restore the step: status %s, events %+v", mod(t, s, "low").Status, events)
		}
		if s = tick(t, e); s.Shed != nil || mod(t, s, "low").Status != faultsummary.StatusOK {
			t.Fatalf("restored: shed %+v, low %s", s.Shed, mod(t, s, "low").Status)
		}
	})
}

// With nothing sheddable left, overruns shed nothing: safety and critical modules run on.
func TestSheddingNeverShedsSafetyOrCritical(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var slow atomic.Bool
		slow.Store(true)
		floor := 10
		cfg := Config{Shedding: &SheddingConfig{AfterOverruns: 1, RestoreAfter: 1, Target: 5 * time.Millisecond, Floor: &floor}}
		e := newEngine(t, cfg, []Registration{
			reg("s", "safety", slowWhile(&slow, 10*time.Millisecond)),
			reg("crit", "knowledge", slowWhile(&slow, 10*time.Millisecond), func(s *tiers.ModuleSpec) { s.Critical = true }),
			reg("floor", "planning", slowWhile(&slow, 10*time.Millisecond), func(s *tiers.ModuleSpec) { s.Priority = 10 }),
		})
		for range 5 {
			s := tick(t, e)
			if s.Shed != nil {
				t.Fatalf("tick %d: shed %+v", s.TickID, s.Shed)
			}
		}
	})
}

// Startup on virtual time: while a safety module has not succeeded once, only the safety
// tier runs, a failing safety module raises no emergency, and the cycle is not ready;
// once each has succeeded (over several ticks) every tier runs.
func TestStartupWaitsForEverySafetyModule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var aFail, bFail atomic.Bool
		aFail.Store(true)
		bFail.Store(true)
		var ends []StartupEvent
		e := newEngine(t, Config{Startup: &StartupConfig{Timeout: time.Hour}}, []Registration{
			reg("a", "safety", switchable(&aFail, errBoom, 1)),
			reg("b", "safety", switchable(&bFail, errBoom, 2)),
			reg("k", "knowledge", ok(3)),
		}, WithHooks(Hooks{OnStartup: func(ev StartupEvent) { ends = append(ends, ev) }}))
		for range 3 { // more failures than the safety breaker's threshold would need
			s := tick(t, e)
			if s.CycleState != faultsummary.CycleStarting || s.EmergencyMode || mod(t, s, "k").Status != faultsummary.StatusSkipped ||
				tierOf(t, s, "knowledge").Reason != "starting" || !e.Starting() {
				t.Fatalf("tick %d while starting: state %q emergency %v k %s reason %q", s.TickID, s.CycleState, s.EmergencyMode,
					mod(t, s, "k").Status, tierOf(t, s, "knowledge").Reason)
			}
			if !slices.Equal(s.Startup.Pending, []string{"a", "b"}) {
				t.Fatalf("pending = %v", s.Startup.Pending)
			}
		}
		time.Sleep(2 * time.Second) // the safety breakers' cooldown: they probe again
		aFail.Store(false)
		s := tick(t, e)
		if s.CycleState != faultsummary.CycleStarting || !slices.Equal(s.Startup.Pending, []string{"b"}) {
			t.Fatalf("a succeeded, b not yet: state %q startup %+v", s.CycleState, s.Startup)
		}
		aFail.Store(true) // a succeeded once: that is enough for a (its failure now is not waited on)
		bFail.Store(false)
		time.Sleep(2 * time.Second) // b's probe failed: its breaker's cooldown again
		s = tick(t, e)
		if s.CycleState != "" || s.Startup != nil || e.Starting() || len(ends) != 1 || ends[0].TimedOut {
			t.Fatalf("every safety module succeeded once: state %q startup %+v events %+v", s.CycleState, s.Startup, ends)
		}
		// a failed in the tick startup ended: from then on that is a safety failure like any other.
		if !s.EmergencyMode || s.Emergency.SinceTick != s.TickID || mod(t, s, "k").Status != faultsummary.StatusSkipped {
			t.Fatalf("emergency %+v, k %s: the tick startup ended judges its safety tier", s.Emergency, mod(t, s, "k").Status)
		}
	})
}

// Startup that does not end before startup.timeout enters emergency mode with the reason
// startup_timeout, in the tick the timeout passes.
func TestStartupTimeoutEntersEmergency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		fail.Store(true)
		var ends []StartupEvent
		e := newEngine(t, Config{Startup: &StartupConfig{Timeout: 300 * time.Millisecond}}, []Registration{
			reg("a", "safety", switchable(&fail, errBoom, 1)),
			reg("k", "knowledge", ok(3)),
		}, WithHooks(Hooks{OnStartup: func(ev StartupEvent) { ends = append(ends, ev) }}))
		tick(t, e)
		time.Sleep(200 * time.Millisecond)
		if s := tick(t, e); s.EmergencyMode || s.CycleState != faultsummary.CycleStarting {
			t.Fatalf("before the timeout: emergency %v state %q", s.EmergencyMode, s.CycleState)
		}
		time.Sleep(100 * time.Millisecond)
		s := tick(t, e)
		if !s.EmergencyMode || s.Emergency.Reason != "startup_timeout" || s.Emergency.SinceTick != s.TickID || s.CycleState != "" {
			t.Fatalf("at the timeout: emergency %+v state %q", s.Emergency, s.CycleState)
		}
		if len(ends) != 1 || !ends[0].TimedOut || !slices.Equal(ends[0].Pending, []string{"a"}) {
			t.Fatalf("startup events = %+v", ends)
		}
		if tierOf(t, s, "knowledge").Status != faultsummary.TierSkipped {
			t.Fatalf("emergency mode skips knowledge: %+v", tierOf(t, s, "knowledge"))
		}
	})
}

// Without a startup configuration the first tick runs every tier (the behaviour before).
func TestNoStartupByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{}, []Registration{reg("a", "safety", failing(errBoom)), reg("k", "knowledge", ok(3))})
		s := tick(t, e)
		if s.CycleState != "" || e.Starting() || !s.EmergencyMode {
			t.Fatalf("no startup: state %q starting %v emergency %v", s.CycleState, e.Starting(), s.EmergencyMode)
		}
	})
}

// A registration while modules are shed applies at a tick boundary: the shed set is made
// again for the new lines (same level), so a new module is admitted like any other.
func TestSheddingSurvivesRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var slow atomic.Bool
		slow.Store(true)
		cfg := Config{Shedding: &SheddingConfig{AfterOverruns: 1, RestoreAfter: 100, Target: 20 * time.Millisecond}}
		e := newEngine(t, cfg, []Registration{
			reg("s", "safety", ok(1)),
			reg("low", "knowledge", slowWhile(&slow, 30*time.Millisecond), func(s *tiers.ModuleSpec) { s.Priority = -1 }),
			reg("z", "planning", ok(2)),
		})
		tick(t, e) // sheds low from the next tick
		if s := tick(t, e); mod(t, s, "low").Status != faultsummary.StatusShed {
			t.Fatalf("low = %s, want shed", mod(t, s, "low").Status)
		}
		for _, n := range []string{"a1", "a2", "a3"} {
			if err := e.Register(reg(n, "planning", ok(3), func(s *tiers.ModuleSpec) { s.Priority = -1 })); err != nil {
				t.Fatal(err)
			}
		}
		s := tick(t, e)
		if s.NumModules() != 6 || mod(t, s, "low").Status != faultsummary.StatusShed || mod(t, s, "a3").Status != faultsummary.StatusShed ||
			mod(t, s, "z").Status != faultsummary.StatusOK {
			t.Fatalf("after the registration: %d lines, low %s, a3 %s, z %s", s.NumModules(), mod(t, s, "low").Status,
				mod(t, s, "a3").Status, mod(t, s, "z").Status)
		}
	})
}
