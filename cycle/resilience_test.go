package cycle

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/faultsummary/check"
	"github.com/cycled/cycled/tiers"
)

// checked runs n ticks of e and checks every summary with a checker made from cfg and
// regs; it returns the summaries.
func checked(t *testing.T, e *Engine, chk *check.Checker, n int) []*faultsummary.Summary {
	t.Helper()
	out := make([]*faultsummary.Summary, 0, n)
	for range n {
		s := tick(t, e)
		if vs := chk.Check(s); len(vs) > 0 {
			t.Fatalf("tick %d: invariant violations: %v", s.TickID, vs)
		}
		out = append(out, s)
	}
	return out
}

func newChecker(t *testing.T, cfg Config, regs []Registration) *check.Checker {
	t.Helper()
	if cfg.Tiers == nil {
		cfg.Tiers = testTiers()
	}
	chk, err := NewChecker(cfg, regs)
	if err != nil {
		t.Fatal(err)
	}
	return chk
}

// TestRateBreakerOnEngine: a downstream failing every other tick never fails two ticks in
// a row, so a consecutive breaker of threshold 2 stays closed, while a rate breaker at
// 0.5 over 4 ticks opens on the tick that makes it 2 of the last 4, and the module is
// refused (open) after it.
func TestRateBreakerOnEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		alternate := &script{fn: func(_ context.Context, in *tiers.Input) (any, error) {
			if in.TickID()%2 == 1 {
				return nil, fault.Downstream(errBoom)
			}
			return "ok", nil
		}}
		cfg := Config{Breakers: map[string]breaker.Settings{
			"rate": {Kind: breaker.Rate, Window: 4, MinTicks: 4, FailureRate: 0.5, Cooldown: time.Hour},
			"cons": {FailureThreshold: 2, Cooldown: time.Hour},
		}}
		regs := []Registration{
			reg("viaRate", "planning", alternate, func(s *tiers.ModuleSpec) { s.Breaker = "rate" }),
			reg("viaCons", "planning", alternate, func(s *tiers.ModuleSpec) { s.Breaker = "cons" }),
		}
		e := newEngine(t, cfg, regs)
		ss := checked(t, e, newChecker(t, cfg, regs), 6)
		for i, s := range ss[:4] {
			if got := mod(t, s, "viaRate").CircuitState; got != "closed" {
				t.Fatalf("tick %d: rate breaker %s before 2 of 4 failed", i+1, got)
			}
		}
		if got := mod(t, ss[4], "viaRate").CircuitState; got != "open" {
			t.Fatalf("tick 5: rate breaker %s, want open (ticks 2-5: ok, fail, ok, fail)", got)
		}
		if got := mod(t, ss[5], "viaRate").Status; got != faultsummary.StatusOpen {
			t.Fatalf("tick 6: status %s, want open", got)
		}
		for _, s := range ss {
			if got := mod(t, s, "viaCons").CircuitState; got != "closed" {
				t.Fatalf("tick %d: consecutive breaker %s without two failures in a row", s.TickID, got)
			}
		}
	})
}

// breakerConfigLog collects the engine's breaker configuration events.
type breakerConfigLog struct {
	mu  sync.Mutex
	evs []BreakerConfigEvent
}

func (l *breakerConfigLog) hooks() Hooks {
	return Hooks{OnBreakerConfig: func(ev BreakerConfigEvent) {
		l.mu.Lock()
		l.evs = append(l.evs, ev)
		l.mu.Unlock()
	}}
}

func (l *breakerConfigLog) take() []BreakerConfigEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.evs
	l.evs = nil
	return out
}

// TestNamedBreakerRegistration: a runtime registration with other settings keeps the
// first and is published as a conflict; the same settings again are a no-op; a reload
// that changes a named breaker's settings replaces it (closed again) and says so.
func TestNamedBreakerRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log breakerConfigLog
		cfg := Config{Breakers: map[string]breaker.Settings{"ds": {FailureThreshold: 1, Cooldown: time.Hour}}}
		regs := []Registration{reg("m", "planning", failing(fault.Transient(errBoom)), func(s *tiers.ModuleSpec) { s.Breaker = "ds" })}
		e := newEngine(t, cfg, regs, WithHooks(log.hooks()))
		if got := mod(t, tick(t, e), "m").CircuitState; got != "open" {
			t.Fatalf("breaker %s after one failure at threshold 1", got)
		}
		err := e.RegisterBreaker(breaker.Settings{Name: "ds", FailureThreshold: 9, Cooldown: time.Hour})
		if !errors.Is(err, breaker.ErrConflict) || !strings.Contains(err.Error(), "failure_threshold: registered 1, requested 9") {
			t.Fatalf("conflicting registration: %v", err)
		}
		if evs := log.take(); len(evs) != 1 || !evs[0].Conflict || evs[0].Name != "ds" {
			t.Fatalf("events %+v, want one conflict on ds", evs)
		}
		if err := e.RegisterBreaker(breaker.Settings{Name: "ds", FailureThreshold: 1, Cooldown: time.Hour}); err != nil {
			t.Fatalf("the same settings again: %v", err)
		}
		if got := mod(t, tick(t, e), "m").Status; got != faultsummary.StatusOpen {
			t.Fatalf("the first registration did not stay in force: %s", got)
		}
		// A runtime registration of a new name is usable and survives a reload that does
		// not declare it.
		if err := e.RegisterBreaker(breaker.Settings{Name: "extra", Kind: breaker.Rate}); err != nil {
			t.Fatal(err)
		}
		cfg2 := Config{Breakers: map[string]breaker.Settings{"ds": {FailureThreshold: 3, Cooldown: time.Hour}}}
		if err := e.Reload(cfg2, regs); err != nil {
			t.Fatal(err)
		}
		if evs := log.take(); len(evs) != 0 {
			t.Fatalf("events before the boundary: %+v", evs)
		}
		s := tick(t, e)
		evs := log.take()
		if len(evs) != 1 || !evs[0].Replaced || evs[0].Name != "ds" || !strings.Contains(evs[0].Diff, "failure_threshold: registered 1, requested 3") {
			t.Fatalf("events %+v, want ds replaced", evs)
		}
		if m := mod(t, s, "m"); m.Status != faultsummary.StatusFailed || m.CircuitState != "closed" {
			t.Fatalf("after the replacement: %s %s, want a failure on a closed breaker", m.Status, m.CircuitState)
		}
		names := map[string]bool{}
		for _, b := range e.Breakers() {
			names[b.Name] = true
		}
		if !names["extra"] || !names["ds"] {
			t.Fatalf("breakers %v, want ds and extra", names)
		}
	})
}
