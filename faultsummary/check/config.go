package check

import (
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/tiers"
)

// Config is what the checker knows of the engine's configuration, with every default
// resolved the way the engine resolves it. The engine builds it (cycle.CheckConfig,
// cycle.NewChecker): the checker takes plain values and never imports the engine. A
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
	// RetryBudgets are the retry-amplification budgets: the tiers' by tier
	// name, the named downstreams' by theirs.
	RetryBudgets []RetryBudget

	// Shedding reports that load shedding is configured; ShedFloor is its floor, if any.
	Shedding  bool
	ShedFloor *int
	// Startup reports that the startup state is configured.
	Startup bool
	// Async names the asynchronous modules (they have no module line).
	Async []string
}

// RetryBudget is one retry-amplification budget: retries at most Ratio of first attempts
// over a window of Window ticks (or WindowTime), MinPerTick per tick always allowed.
type RetryBudget struct {
	Name       string
	Ratio      float64
	Window     int // in ticks; 0 with WindowTime set
	WindowTime time.Duration
	MinPerTick int
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

	// Bulkhead names the module's bulkhead ("" if none); OnReject says what its refusal
	// means for the error policy.
	Bulkhead string
	OnReject tiers.OnOpen
	// RetryBudget names the retry budget the module's retries count against ("" if none).
	RetryBudget string
	// Priority and Critical decide whether load shedding may shed the module.
	Priority int
	Critical bool
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

// BreakerDefaults returns s with the breaker package's defaults applied to its zero fields
// (threshold 5, cooldown 30s, 1 probe, 1 success, trip on every fault kind).
func BreakerDefaults(s breaker.Settings) breaker.Settings { return s.WithDefaults() }
