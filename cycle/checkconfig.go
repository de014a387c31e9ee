package cycle

import (
	"fmt"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary/check"
	"github.com/cycled/cycled/tiers"
)

// CheckConfig returns what the invariant checker (package check) needs to know of an
// engine configured with cfg, whose plan Validate returned (plan must not be nil). The
// defaults are resolved as the engine resolves them: nil tiers are the seed tiers, nil
// emergency.skip_tiers is every tier after the first, a module's own breaker takes its
// tier's settings, a named breaker trips on transient and downstream unless trip_on is set.
// The checker takes these plain values so that it does not depend on the engine.
func CheckConfig(cfg Config, plan *tiers.Plan) check.Config {
	c := cfg.withDefaults()
	ts := plan.Tiers
	if ts == nil {
		ts = c.Tiers
	}
	out := check.Config{Breakers: make(map[string]breaker.Settings)}
	for _, t := range ts {
		out.Tiers = append(out.Tiers, check.Tier{Name: t.Name, Budget: t.Budget})
	}
	for name, s := range c.Breakers {
		s.Name = name
		if s.TripOn.Empty() {
			s.TripOn = fault.SetOf(fault.KindTransient, fault.KindDownstream)
		}
		out.Breakers[name] = s.WithDefaults()
	}
	for _, pm := range plan.Modules {
		if pm.Spec.Async {
			out.Async = append(out.Async, pm.Spec.Name) // no line, no breaker (see async.go)
			continue
		}
		m := checkModule(pm, ts, c, out.Breakers)
		moduleResilience(&m, pm.Spec, ts, c)
		m.Priority, m.Critical = pm.Spec.Priority, pm.Spec.Critical
		out.Modules = append(out.Modules, m)
	}
	addBudgetChecks(&out, c)
	checkGuards(cfg, &out)
	out.Emergency.Latch = c.Emergency.Latch
	out.Emergency.RecoverAfter = c.Emergency.RecoverAfter
	if cfg.Emergency.SkipTiers == nil {
		for _, t := range ts[min(1, len(ts)):] {
			out.Emergency.SkipTiers = append(out.Emergency.SkipTiers, t.Name)
		}
	} else {
		out.Emergency.SkipTiers = append([]string(nil), cfg.Emergency.SkipTiers...)
	}
	return out
}

// checkModule returns the checker's view of planned module pm, and adds its own breaker
// to breakers if it has one.
func checkModule(pm tiers.PlannedModule, ts []tiers.Tier, c Config, breakers map[string]breaker.Settings) check.Module {
	m := check.Module{
		Name:          pm.Spec.Name,
		Tier:          pm.TierIndex,
		Key:           pm.Spec.Key(),
		Breaker:       pm.Spec.Breaker,
		Policy:        pm.Policy,
		OnOpen:        pm.Spec.OnOpen,
		Every:         pm.Spec.EveryN(),
		EmergencyOnly: pm.Spec.Emergency,
		MaxAttempts:   max(pm.Attempts, 1),
	}
	if m.Policy == tiers.PolicyDefault && pm.TierIndex < len(ts) {
		m.Policy = tiers.TierPolicy(ts[pm.TierIndex], pm.TierIndex)
	}
	if !pm.Spec.TTL.Auto {
		m.TTL = pm.Spec.TTL.Fixed
		if m.TTL <= 0 {
			m.TTL = c.DefaultTTL
		}
	}
	if m.Breaker == "" {
		m.Breaker = m.Name
		s := breaker.Settings{}
		if pm.TierIndex < len(ts) {
			s = ts[pm.TierIndex].Breaker
		}
		s.Name = m.Name
		breakers[m.Name] = s.WithDefaults()
	}
	return m
}

// NewChecker validates cfg and regs as New does and returns an invariant checker for an
// engine made from them.
func NewChecker(cfg Config, regs []Registration, opts ...check.Option) (*check.Checker, error) {
	plan, ps := Validate(cfg, regs)
	if err := ps.Err(); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	return check.New(CheckConfig(cfg, plan), opts...), nil
}
