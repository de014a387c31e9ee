package peers

import (
	"context"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// Engine is cycled's engine in step mode.
type Engine struct {
	E *cycle.Engine
}

// EngineConfig converts spec to the engine's configuration and registrations.
func EngineConfig(spec Spec, timing cycle.Timing) (cycle.Config, []cycle.Registration) {
	ts := make([]tiers.Tier, len(spec.Tiers))
	for i, t := range spec.Tiers {
		ts[i] = tiers.Tier{Name: t.Name, Budget: t.Budget, MaxAttempts: t.MaxAttempts,
			Backoff: retrybudget.Backoff{Base: t.BackoffBase, Factor: t.BackoffFactor, Max: t.BackoffMax, Jitter: t.BackoffJitter},
			Breaker: breaker.Settings{FailureThreshold: max(t.FailureThreshold, 1), Cooldown: max(t.Cooldown, time.Millisecond),
				HalfOpenProbes: 1, HalfOpenSuccesses: max(t.HalfOpenSuccesses, 1)}}
	}
	regs := make([]cycle.Registration, len(spec.Modules))
	for i, m := range spec.Modules {
		fn := m.Fn
		regs[i] = cycle.Registration{Spec: tiers.ModuleSpec{Name: m.Name, Tier: spec.Tiers[m.Tier].Name},
			Module: tiers.ModuleFunc(func(ctx context.Context, _ *tiers.Input) (any, error) { return fn(ctx) })}
	}
	h := spec.History
	if h <= 0 {
		h = 16
	}
	return cycle.Config{Tiers: ts, History: h, Timing: timing, DefaultTTL: DefaultTTL}, regs
}

// NewEngine returns cycled's engine for spec, in step mode.
func NewEngine(spec Spec, timing cycle.Timing, opts ...cycle.Option) (*Engine, error) {
	cfg, regs := EngineConfig(spec, timing)
	e, err := cycle.New(cfg, regs, opts...)
	if err != nil {
		return nil, err
	}
	return &Engine{E: e}, nil
}

// Tick runs one tick.
func (e *Engine) Tick(ctx context.Context) error {
	_, err := e.E.Tick(ctx)
	return err
}

// Last returns a view of the latest summary.
func (e *Engine) Last() View {
	s := e.E.Latest()
	if s == nil {
		return View{}
	}
	v := View{TickID: s.TickID, Tiers: make([]TierLine, len(s.Tiers)), Lines: make([]Line, len(s.Modules()))}
	for i, t := range s.Tiers {
		v.Tiers[i] = TierLine{Name: t.Name, Status: string(t.Status), BudgetExhausted: t.BudgetExhausted,
			Elapsed: time.Duration(t.ElapsedMs * float64(time.Millisecond))}
	}
	for i, m := range s.Modules() {
		v.Lines[i] = Line{Name: m.Name, Tier: m.TierIndex, Status: string(m.Status), Attempts: m.Attempts,
			Latency: time.Duration(m.LatencyMs * float64(time.Millisecond)), Kind: m.FaultKind, Err: m.Error,
			Circuit: m.CircuitState, Source: m.Served.Source.String(), Stale: m.Served.Stale,
			Age: time.Duration(m.Served.AgeMs * float64(time.Millisecond))}
	}
	return v
}

// Close closes the engine.
func (e *Engine) Close() { _ = e.E.Close() }
