package cycle

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// script is a test module whose behaviour per tick and attempt is a function.
type script struct {
	runs atomic.Int64
	fn   func(ctx context.Context, in *tiers.Input) (any, error)
}

func (s *script) Run(ctx context.Context, in *tiers.Input) (any, error) {
	s.runs.Add(1)
	if s.fn == nil {
		return in.TickID(), nil
	}
	return s.fn(ctx, in)
}

func ok(v any) *script {
	return &script{fn: func(context.Context, *tiers.Input) (any, error) { return v, nil }}
}

func failing(err error) *script {
	return &script{fn: func(context.Context, *tiers.Input) (any, error) { return nil, err }}
}

// switchable returns v, or fails with err while fail is set.
func switchable(fail *atomic.Bool, err error, v any) *script {
	return &script{fn: func(context.Context, *tiers.Input) (any, error) {
		if fail.Load() {
			return nil, err
		}
		return v, nil
	}}
}

// testTiers are small tiers with deterministic backoff (no jitter).
func testTiers() []tiers.Tier {
	bo := retrybudget.Backoff{Base: 5 * time.Millisecond, Factor: 2, Max: 20 * time.Millisecond}
	return []tiers.Tier{
		{Name: "safety", Budget: 50 * time.Millisecond, MaxAttempts: 1, Backoff: bo,
			Breaker: breaker.Settings{FailureThreshold: 2, Cooldown: time.Second, HalfOpenSuccesses: 1}},
		{Name: "knowledge", Budget: 200 * time.Millisecond, MaxAttempts: 3, Backoff: bo,
			Breaker: breaker.Settings{FailureThreshold: 3, Cooldown: time.Second, HalfOpenSuccesses: 2}},
		{Name: "planning", Budget: 100 * time.Millisecond, MaxAttempts: 2, Backoff: bo,
			Breaker: breaker.Settings{FailureThreshold: 3, Cooldown: time.Second, HalfOpenSuccesses: 1}},
	}
}

func reg(name, tier string, m tiers.Module, mut ...func(*tiers.ModuleSpec)) Registration {
	s := tiers.ModuleSpec{Name: name, Tier: tier}
	for _, f := range mut {
		f(&s)
	}
	return Registration{Spec: s, Module: m}
}

func newEngine(t *testing.T, cfg Config, regs []Registration, opts ...Option) *Engine {
	t.Helper()
	if cfg.Tiers == nil {
		cfg.Tiers = testTiers()
	}
	e, err := New(cfg, regs, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func tick(t *testing.T, e *Engine) *faultsummary.Summary {
	t.Helper()
	s, err := e.Tick(context.Background())
	if err != nil {
		t.Fatalf("Tick: %v", err)
	}
	return s
}

func mod(t *testing.T, s *faultsummary.Summary, name string) faultsummary.Module {
	t.Helper()
	m, ok := s.Module(name)
	if !ok {
		t.Fatalf("tick %d: no module %q in summary", s.TickID, name)
	}
	return m
}

func tierOf(t *testing.T, s *faultsummary.Summary, name string) faultsummary.Tier {
	t.Helper()
	x, ok := s.Tier(name)
	if !ok {
		t.Fatalf("tick %d: no tier %q in summary", s.TickID, name)
	}
	return x
}

var errBoom = errors.New("boom")

var _ = fault.Transient

// unstarted stands, in tests of the mechanism, for a line whose module the deadline caught
// before it started: the verdict reports it timed_out (see observed).
const unstarted decide.Status = 255

// observed returns the status the verdict gives the facts a line holds so far, before its
// tier is settled, with unstarted for a module never started before the deadline.
func observed(ln *lineRec) decide.Status {
	if ln.late == decide.Unstarted && ln.kind != fault.KindCanceled {
		return unstarted
	}
	return decide.StatusOf(ln.outcome())
}
