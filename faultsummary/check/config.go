package check

import (
	"fmt"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/tiers"
)

// Config is what the checker knows of the engine's configuration, with every default
// resolved the way the engine resolves it. Build it with FromEngine (or ForEngine); a
// hand-built Config must be complete (no zero defaults are filled in by the checker).
type Config struct {
	// Tiers in order; the first is the safety tier.
	Tiers []Tier
	// Modules, one per module line of a summary.
	Modules []Module
	// Breakers holds the settings of every breaker by name, defaults applied: a module's
	// own breaker under the module's name, the named shared breakers under theirs.
	Breakers map[string]breaker.Settings
	// Emergency is the emergency-mode configuration.
	Emergency Emergency
}

// Tier is one tier of the configuration.
type Tier struct {
	// Name is the tier's name.
	Name string
	// Budget is the tier's wall-clock budget.
	Budget time.Duration
}

// Module is one module of the configuration.
type Module struct {
	// Name is the module's name.
	Name string
	// Tier is the index of the module's tier.
	Tier int
	// Key is the blackboard key the module writes.
	Key string
	// Breaker is the name of the module's breaker: the module's own name, or a named
	// shared breaker.
	Breaker string
	// Policy is the effective error policy (never tiers.PolicyDefault).
	Policy tiers.Policy
	// OnOpen says what a refusal by the breaker means for the error policy.
	OnOpen tiers.OnOpen
	// Every runs the module on tick ids divisible by it (≥ 1).
	Every int
	// EmergencyOnly: the module runs only in emergency mode.
	EmergencyOnly bool
	// MaxAttempts is the effective number of attempts per tick (≥ 1).
	MaxAttempts int
	// TTL is the fixed last-known-good TTL of the module's key; zero when it is automatic
	// (adaptive TTLs are not checked).
	TTL time.Duration
}

// OwnBreaker reports whether the module uses its own breaker rather than a shared one.
func (m Module) OwnBreaker() bool { return m.Breaker == m.Name }

// Emergency is the emergency-mode configuration, defaults applied.
type Emergency struct {
	// SkipTiers names the tiers skipped while emergency mode is active.
	SkipTiers []string
	// Latch keeps emergency mode until an operator reset.
	Latch bool
	// RecoverAfter is the number of consecutive healthy safety ticks that ends emergency
	// mode (≥ 1).
	RecoverAfter int
}

// Engine defaults the checker resolves like the engine does.
const (
	defaultRecoverAfter = 3
	defaultTTL          = 5 * time.Second
)

// BreakerDefaults returns s with the breaker package's defaults applied to its zero fields
// (threshold 5, cooldown 30s, 1 probe, 1 success, trip on every fault kind).
func BreakerDefaults(s breaker.Settings) breaker.Settings { return s.WithDefaults() }

// FromEngine builds the checker's Config from the engine's configuration and the plan
// that cycle.Validate returned for it (plan must not be nil). Defaults are resolved as the
// engine resolves them: nil tiers are the seed tiers, nil emergency.skip_tiers is every
// tier after the first, recover_after 0 is 3, a zero default TTL is 5s, a module's own
// breaker takes its tier's settings (tripping on every fault kind unless trip_on is set),
// a named breaker trips on transient and downstream unless trip_on is set.
func FromEngine(cfg cycle.Config, plan *tiers.Plan) Config {
	ts := plan.Tiers
	if ts == nil {
		ts = cfg.Tiers
	}
	if ts == nil {
		ts = tiers.SeedTiers()
	}
	defTTL := cfg.DefaultTTL
	if defTTL <= 0 {
		defTTL = defaultTTL
	}
	c := Config{Breakers: make(map[string]breaker.Settings)}
	for _, t := range ts {
		c.Tiers = append(c.Tiers, Tier{Name: t.Name, Budget: t.Budget})
	}
	for name, s := range cfg.Breakers {
		s.Name = name
		if s.TripOn.Empty() {
			s.TripOn = fault.SetOf(fault.KindTransient, fault.KindDownstream)
		}
		c.Breakers[name] = BreakerDefaults(s)
	}
	for _, pm := range plan.Modules {
		m := Module{
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
				m.TTL = defTTL
			}
		}
		if m.Breaker == "" {
			m.Breaker = m.Name
			s := breaker.Settings{}
			if pm.TierIndex < len(ts) {
				s = ts[pm.TierIndex].Breaker
			}
			s.Name = m.Name
			c.Breakers[m.Name] = BreakerDefaults(s)
		}
		c.Modules = append(c.Modules, m)
	}
	c.Emergency.Latch = cfg.Emergency.Latch
	c.Emergency.RecoverAfter = cfg.Emergency.RecoverAfter
	if c.Emergency.RecoverAfter <= 0 {
		c.Emergency.RecoverAfter = defaultRecoverAfter
	}
	if cfg.Emergency.SkipTiers == nil {
		for _, t := range ts[min(1, len(ts)):] {
			c.Emergency.SkipTiers = append(c.Emergency.SkipTiers, t.Name)
		}
	} else {
		c.Emergency.SkipTiers = append([]string(nil), cfg.Emergency.SkipTiers...)
	}
	return c
}

// ForEngine validates the engine's configuration and registrations with cycle.Validate,
// as cycle.New does, and returns a checker for the engine built from them.
func ForEngine(cfg cycle.Config, regs []cycle.Registration, opts ...Option) (*Checker, error) {
	plan, ps := cycle.Validate(cfg, regs)
	if err := ps.Err(); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	return New(FromEngine(cfg, plan), opts...), nil
}
