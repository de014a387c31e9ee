package config_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/modules"
)

func TestDemoValidates(t *testing.T) {
	c, err := config.Demo()
	if err != nil {
		t.Fatal(err)
	}
	if ps := c.Validate(); len(ps) != 0 {
		t.Fatalf("the demo has findings: %v", ps)
	}
	if c.Cycle.Period != 100*time.Millisecond || len(c.Tiers) != 5 {
		t.Fatalf("demo period %v, %d tiers", c.Cycle.Period, len(c.Tiers))
	}
	perTier := map[string]int{}
	for _, m := range c.Modules {
		perTier[m.Tier]++
		if m.Tier == "safety" && m.Builtin != nil {
			f := m.Builtin.Faults
			if f.FailRate != 0 || len(f.FailTicks) != 0 || f.FailAttempts != 0 || f.Hang != 0 || f.Panic {
				t.Errorf("safety module %s fails by default", m.Name)
			}
		}
	}
	for _, tr := range c.Tiers {
		if n := perTier[tr.Name]; n < 2 || n > 4 {
			t.Errorf("tier %s has %d modules, want 2-4", tr.Name, n)
		}
	}
}

// demoEngine returns the embedded demo's engine configuration and modules.
func demoEngine(t *testing.T) (cycle.Config, []cycle.Registration) {
	t.Helper()
	c, err := config.Demo()
	if err != nil {
		t.Fatal(err)
	}
	ec, regs, ps := c.Engine()
	if len(ps) != 0 {
		t.Fatal(ps)
	}
	return ec, regs
}

// TestDemoShowsEveryLayer runs the demo on virtual time for 7 seconds and checks that a
// new user sees, within 10 seconds, a retry, the breaker opening, a stale last-good value,
// its expiry and the recovery, with the safety tier healthy throughout.
func TestDemoShowsEveryLayer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec, regs := demoEngine(t)
		var mu sync.Mutex
		var transitions []breaker.Transition
		var emergencies int
		e, err := cycle.New(ec, regs, cycle.WithHooks(cycle.Hooks{
			OnBreaker: func(tr breaker.Transition) {
				mu.Lock()
				transitions = append(transitions, tr)
				mu.Unlock()
			},
			OnEmergency: func(faultsummary.EmergencyEvent) { emergencies++ },
		}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		time.Sleep(7 * time.Second)
		cancel()
		<-done
		defer e.Close()

		first := map[string]uint64{} // what we saw → first tick
		see := func(what string, id uint64) {
			if _, ok := first[what]; !ok {
				first[what] = id
			}
		}
		plannerDerived := false
		for _, s := range slices.Backward(e.History().List(1000, 0)) {
			if m, ok := s.Module("planner"); ok && m.Served.DerivedFromStale {
				plannerDerived = true
			}
			for _, tr := range s.Tiers {
				if tr.Index == 0 && tr.Status != faultsummary.TierOK {
					t.Errorf("tick %d: safety tier %s", s.TickID, tr.Status)
				}
			}
			for _, m := range s.Modules() {
				if m.Name != "memory_recall" {
					continue
				}
				switch {
				case m.Status == faultsummary.StatusRetried && s.RetryCounts["memory_recall"] == 1:
					see("retry", s.TickID)
				case m.Status == faultsummary.StatusFailed && m.Served.Source == blackboard.LastGood && m.Served.Stale:
					see("failed stale", s.TickID)
				case m.Status == faultsummary.StatusOpen && slices.Contains(s.OpenCircuits, "memory-store") && m.Served.Stale:
					see("open stale", s.TickID)
				case m.Status == faultsummary.StatusOpen && m.Served.Expired && slices.Contains(s.DegradedKeys, "memory_recall.result (expired)"):
					see("expired", s.TickID)
				case m.Status == faultsummary.StatusProbeOK:
					see("probe", s.TickID)
				}
				if m.CircuitState == "closed" && first["probe"] != 0 {
					see("closed again", s.TickID)
				}
			}
		}
		t.Logf("first seen at tick: %v", first)
		// The demo's comments claim derived_from_stale for the planner exactly when it happens.
		if claims := strings.Contains(string(config.DemoYAML()), "output is\n# marked derived_from_stale"); claims != plannerDerived {
			t.Errorf("demo.yaml claims the planner's output derived_from_stale: %v; it was: %v", claims, plannerDerived)
		}
		order := []string{"retry", "failed stale", "open stale", "expired", "probe", "closed again"}
		for i, what := range order {
			id, ok := first[what]
			if !ok {
				t.Fatalf("never saw %q in 7 s of the demo", what)
			}
			if id > 100 {
				t.Errorf("%q first at tick %d, later than 10 s", what, id)
			}
			if i > 0 && id < first[order[i-1]] {
				t.Errorf("%q (tick %d) before %q (tick %d)", what, id, order[i-1], first[order[i-1]])
			}
		}
		mu.Lock()
		defer mu.Unlock()
		var opened bool
		for _, tr := range transitions {
			if tr.Name == "memory-store" && tr.To == breaker.Open {
				opened = true
			}
			if tr.Name != "memory-store" {
				t.Errorf("unexpected transition %+v", tr)
			}
		}
		if !opened || emergencies != 0 {
			t.Fatalf("memory-store opened: %v; emergency events: %d", opened, emergencies)
		}
	})
}

// TestDemoSafetyFaultRecovery pins what the README's quick start says about failing
// collision_guard: emergency mode at once, the safety breaker open on the second failed
// tick, and after the fault is reset emergency mode lasts until the breaker's 60 s
// cooldown has passed and its 3 probes succeed — not 3 ticks after the reset.
func TestDemoSafetyFaultRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec, regs := demoEngine(t)
		var mu sync.Mutex
		var opened, closed time.Time
		var entered, left []faultsummary.EmergencyEvent
		e, err := cycle.New(ec, regs, cycle.WithHooks(cycle.Hooks{
			OnBreaker: func(tr breaker.Transition) {
				mu.Lock()
				defer mu.Unlock()
				if tr.Name == "collision_guard" && tr.To == breaker.Open && opened.IsZero() {
					opened = tr.At
				}
				if tr.Name == "collision_guard" && tr.To == breaker.Closed {
					closed = tr.At
				}
			},
			OnEmergency: func(ev faultsummary.EmergencyEvent) {
				mu.Lock()
				defer mu.Unlock()
				if ev.Entered {
					entered = append(entered, ev)
				} else {
					left = append(left, ev)
				}
			},
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		guard, ok := e.Module("collision_guard")
		if !ok {
			t.Fatal("no collision_guard in the demo")
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		defer func() { cancel(); <-done }()

		time.Sleep(time.Second)
		if _, err := modules.ApplyFaultsJSON(guard.Module, []byte(`{"fail_rate": 1}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if _, err := modules.ApplyFaultsJSON(guard.Module, []byte(`{"reset": true}`)); err != nil {
			t.Fatal(err)
		}
		reset := time.Now()
		time.Sleep(5 * time.Second) // far more than 3 ticks
		mu.Lock()
		if len(entered) != 1 || len(left) != 0 || opened.IsZero() {
			t.Fatalf("5 s after the reset: entered %v, left %v, breaker opened at %v; want in emergency with the breaker open", entered, left, opened)
		}
		mu.Unlock()
		time.Sleep(60 * time.Second)
		mu.Lock()
		defer mu.Unlock()
		if len(left) != 1 || closed.IsZero() {
			t.Fatalf("65 s after the reset: left %v, breaker closed at %v", left, closed)
		}
		if left[0].At.Before(closed) {
			t.Errorf("emergency mode ended at %v, before the breaker closed at %v", left[0].At, closed)
		}
		cooldown := 60 * time.Second
		if d := left[0].At.Sub(opened); d < cooldown || d > cooldown+time.Second {
			t.Errorf("emergency mode ended %v after the breaker opened, want just after its %v cooldown", d, cooldown)
		}
		t.Logf("reset at %v; breaker opened %v, closed %v; emergency left at tick %d (%v after the reset)",
			reset.Format(time.TimeOnly), opened.Format(time.TimeOnly), closed.Format(time.TimeOnly), left[0].TickID, left[0].At.Sub(reset))
	})
}
