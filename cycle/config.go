package cycle

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/bulkhead"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/internal/didyoumean"
	"github.com/cycled/cycled/tiers"
)

// Overrun is what the scheduler does when a tick runs past one or more grid points (its
// rules are decide.Overrun's).
type Overrun = decide.Overrun

// The overrun policies.
const (
	// OverrunSkip starts the next tick at the next grid point; skipped points are counted.
	OverrunSkip = decide.OverrunSkip
	// OverrunCatchUp runs the missed ticks back to back, at most CatchUpMax of them.
	OverrunCatchUp = decide.OverrunCatchUp
	// OverrunDelay starts the next tick one period after the end of the last one.
	OverrunDelay = decide.OverrunDelay
)

// Timing selects how the scheduler waits for a grid point or a tier deadline.
type Timing uint8

// The timing modes.
const (
	// Coarse waits on plain timers, spinning never. The default. Go's timers may wake up
	// to a millisecond late, so with the real clock on Linux the last kernelMargin of a
	// wait for a tier's deadline, and the whole wait for the next grid point, are slept on
	// a kernel timer (a timerfd) instead.
	Coarse Timing = iota
	// Precise sleeps until PreciseMargin before the target, then spins with
	// runtime.Gosched until it is reached. It costs up to one core for the margin of every
	// wait. With more than one P it also spins a tick's hand-offs: the engine waits for
	// its runners for up to engineSpin by spinning when the last wait was that short, and
	// an idle runner spins up to runnerSpin for its next job when the last one came that
	// soon, so that back-to-back tiers and ticks wake no sleeping thread (a wake-up is a
	// system call on the waker's path), trading CPU for shorter ticks
	// (BENCHMARKS.md, BenchmarkTickPrecise). Only the real clock spins, and not inside a
	// testing/synctest bubble; other clocks wait on timers. GOMAXPROCS is left to the
	// caller: on a machine with few cores a lightly loaded process may keep its period
	// better with one P (docs/operations.md).
	Precise
)

// String returns "coarse" or "precise".
func (t Timing) String() string {
	if t == Precise {
		return "precise"
	}
	return "coarse"
}

// MarshalText encodes t as its name.
func (t Timing) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText parses "coarse" (or "") or "precise".
func (t *Timing) UnmarshalText(b []byte) error {
	switch string(b) {
	case "", "coarse":
		*t = Coarse
	case "precise":
		*t = Precise
	default:
		return fmt.Errorf("unknown timing %q (want coarse or precise)", b)
	}
	return nil
}

// EmergencyConfig configures emergency mode.
type EmergencyConfig struct {
	// SkipTiers names the tiers skipped in emergency mode. Nil means every tier after the first.
	SkipTiers []string
	// Latch keeps emergency mode until an operator reset (then RecoverAfter healthy ticks).
	Latch bool
	// RecoverAfter is the number of consecutive healthy safety ticks that ends emergency
	// mode. Zero means 3.
	RecoverAfter int
}

// Config configures an Engine. Zero fields take the defaults stated on each.
type Config struct {
	// Period is the scheduler's period. Zero is step mode: ticks run only through Tick.
	Period time.Duration
	// Overrun is the overrun policy (default skip).
	Overrun Overrun
	// CatchUpMax caps the ticks run back to back by OverrunCatchUp. Zero means 10.
	CatchUpMax int
	// History is the number of summaries kept. Zero means 1000.
	History int
	// Timing selects coarse (default) or precise waits.
	Timing Timing
	// PreciseMargin is how long before a target the precise mode starts spinning. Zero means 1.5ms.
	PreciseMargin time.Duration
	// Emergency configures emergency mode.
	Emergency EmergencyConfig
	// DefaultTTL is the last-known-good TTL of keys without their own. Zero means 5s.
	DefaultTTL time.Duration
	// Tiers in order; the first is the safety tier. Nil means tiers.SeedTiers().
	Tiers []tiers.Tier
	// Breakers are the named shared breakers. For each, an empty TripOn means
	// {transient, downstream}.
	Breakers map[string]breaker.Settings

	// Bulkheads are the named bulkheads modules may take permits of (Name is set from
	// the key).
	Bulkheads map[string]bulkhead.Settings
	// RetryBudgets are the retry-amplification budgets, per tier and per named downstream.
	RetryBudgets RetryBudgets

	// Shedding, if set, sheds low-priority modules on overrun (see SheddingConfig).
	Shedding *SheddingConfig
	// Startup, if set, starts the cycle in the starting state (see StartupConfig).
	Startup *StartupConfig
}

func (c Config) withDefaults() Config {
	if c.CatchUpMax <= 0 {
		c.CatchUpMax = 10
	}
	if c.History <= 0 {
		c.History = 1000
	}
	if c.PreciseMargin <= 0 {
		c.PreciseMargin = 1500 * time.Microsecond
	}
	if c.Emergency.RecoverAfter <= 0 {
		c.Emergency.RecoverAfter = 3
	}
	if c.DefaultTTL <= 0 {
		c.DefaultTTL = 5 * time.Second
	}
	if c.Tiers == nil {
		c.Tiers = tiers.SeedTiers()
	}
	if c.Shedding != nil {
		sh := *c.Shedding
		if sh.AfterOverruns <= 0 {
			sh.AfterOverruns = 3
		}
		if sh.RestoreAfter <= 0 {
			sh.RestoreAfter = 10
		}
		c.Shedding = &sh
	}
	return c
}

// Origin says where a module registration came from.
type Origin string

// The origins.
const (
	// FromConfig: the module is declared in the configuration; a reload may replace it.
	FromConfig Origin = "config"
	// FromRuntime: the module was registered at runtime; only Deregister removes it.
	FromRuntime Origin = "runtime"
)

// Registration is a module spec with its implementation.
type Registration struct {
	// Spec describes the module.
	Spec tiers.ModuleSpec
	// Module runs it.
	Module tiers.Module
	// Origin says where it came from (default FromConfig for New and Reload, FromRuntime for Register).
	Origin Origin

	// id is the registration's identity, assigned by the engine that took it (0: none
	// yet). A registration the engine hands back (a runtime module kept by Reload,
	// Register and Deregister) carries it, and keeps its module's worker.
	id uint64
}

// Validate checks cfg and mods together, as New and Reload do, and returns every finding
// with its path.
func Validate(cfg Config, mods []Registration) (*tiers.Plan, tiers.Problems) {
	c := cfg.withDefaults()
	var ps tiers.Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, tiers.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if cfg.Period < 0 {
		add("cycle.period", "must be >= 0 (0 is step mode)")
	}
	if !cfg.Overrun.Valid() {
		add("cycle.overrun", "unknown overrun policy")
	}
	if cfg.History < 0 {
		add("cycle.history", "must be >= 0 (0 means 1000)")
	}
	if cfg.Emergency.RecoverAfter < 0 {
		add("emergency.recover_after", "must be >= 0 (0 means 3)")
	}
	if cfg.DefaultTTL < 0 {
		add("lastgood.default_ttl", "must be > 0")
	}
	ps = append(ps, validateGuards(cfg)...)
	ps = append(ps, validateAsync(c, mods)...)
	names := make(map[string]int, len(c.Tiers))
	for i, t := range c.Tiers {
		names[t.Name] = i
	}
	for i, n := range cfg.Emergency.SkipTiers {
		j, ok := names[n]
		switch {
		case !ok:
			add(fmt.Sprintf("emergency.skip_tiers[%d]", i), "unknown tier %q%s", n, didyoumean.Hint(n, slices.Sorted(maps.Keys(names))))
		case j == 0:
			add(fmt.Sprintf("emergency.skip_tiers[%d]", i), "the safety tier %q cannot be skipped", n)
		}
	}
	tc := tiers.Config{Tiers: c.Tiers, Breakers: c.Breakers}
	for i, m := range mods {
		tc.Modules = append(tc.Modules, m.Spec)
		if m.Module == nil {
			add(fmt.Sprintf("modules[%d]", i), "no implementation for module %q", m.Spec.Name)
		}
	}
	plan, tps := tiers.Validate(tc)
	ps = append(ps, tps...)
	ps = append(ps, unreachableEmergencyOnly(cfg, c.Tiers, mods)...)
	ps = append(ps, validateResilience(cfg, c.Tiers, mods)...)
	if len(ps.Errors()) > 0 {
		return nil, ps
	}
	return plan, ps
}

// unreachableEmergencyOnly warns of every emergency-only module in a tier that emergency
// mode skips: it can never run.
func unreachableEmergencyOnly(cfg Config, ts []tiers.Tier, mods []Registration) tiers.Problems {
	var ps tiers.Problems
	skipped := make(map[string]bool)
	if cfg.Emergency.SkipTiers == nil {
		for i, t := range ts {
			skipped[t.Name] = i > 0
		}
	} else {
		for _, n := range cfg.Emergency.SkipTiers {
			skipped[n] = true
		}
	}
	for i, m := range mods {
		if m.Spec.Emergency && skipped[m.Spec.Tier] {
			ps = append(ps, tiers.Problem{Path: fmt.Sprintf("modules[%d].emergency", i), Warning: true,
				Message: fmt.Sprintf("emergency-only module in tier %q, which emergency mode skips: it never runs", m.Spec.Tier)})
		}
	}
	return ps
}
