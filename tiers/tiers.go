package tiers

import (
	"context"
	"fmt"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/retrybudget"
)

// Policy is a module's error policy.
type Policy uint8

// The error policies.
const (
	// PolicyDefault takes the tier's policy (and the tier's default: fail_fast for the first
	// tier, degrade for the others).
	PolicyDefault Policy = iota
	// Degrade records the failure and continues.
	Degrade
	// FailFast fails the tier.
	FailFast
	// Abort stops the remaining tiers of this tick cleanly: no emergency, no breaker failure.
	Abort
)

var policyNames = [...]string{"", "degrade", "fail_fast", "abort"}

// String returns the policy's configuration name ("" for PolicyDefault).
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// MarshalText encodes p as its configuration name.
func (p Policy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText parses "degrade", "fail_fast" or "abort" ("" is PolicyDefault).
func (p *Policy) UnmarshalText(b []byte) error {
	v, err := ParsePolicy(string(b))
	*p = v
	return err
}

// ParsePolicy parses a policy name.
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if n == s {
			return Policy(i), nil
		}
	}
	return PolicyDefault, fmt.Errorf("unknown policy %q (want degrade, fail_fast or abort)", s)
}

// OnOpen says what a call site does when its breaker refuses the call.
type OnOpen uint8

// The on_open behaviours.
const (
	// Bypass serves last-known-good and continues (the default).
	Bypass OnOpen = iota
	// Fail counts the refusal as the module's failure for its error policy.
	Fail
)

// String returns "bypass" or "fail".
func (o OnOpen) String() string {
	if o == Fail {
		return "fail"
	}
	return "bypass"
}

// MarshalText encodes o as its name.
func (o OnOpen) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText parses "bypass" (or "") or "fail".
func (o *OnOpen) UnmarshalText(b []byte) error {
	v, err := ParseOnOpen(string(b))
	*o = v
	return err
}

// ParseOnOpen parses an on_open name; "" is bypass.
func ParseOnOpen(s string) (OnOpen, error) {
	switch s {
	case "", "bypass":
		return Bypass, nil
	case "fail":
		return Fail, nil
	}
	return Bypass, fmt.Errorf("unknown on_open %q (want bypass or fail)", s)
}

// Tier is one tier of the cycle. The first tier of a configuration is the safety tier.
type Tier struct {
	// Name identifies the tier ("safety", "knowledge", …).
	Name string
	// Budget is the tier's wall-clock budget, retries included. Must be > 0.
	Budget time.Duration
	// MaxAttempts is the number of attempts per module per tick. Zero means 1.
	MaxAttempts int
	// Backoff is the delay schedule between attempts.
	Backoff retrybudget.Backoff
	// Retryable is the set of retried kinds. Empty means {transient}.
	Retryable fault.Set
	// Policy is the default error policy of the tier's modules. PolicyDefault means
	// fail_fast for the first tier and degrade for the others.
	Policy Policy
	// Breaker is the settings of each module's own breaker (Name is ignored).
	Breaker breaker.Settings
}

// SeedTiers returns the five seed tiers with their documented default budgets, attempts,
// breakers and backoff (base 10ms, factor 2, max 100ms, jitter 0.2).
func SeedTiers() []Tier {
	bo := DefaultBackoff()
	mk := func(name string, budget time.Duration, attempts, thr int, cool time.Duration, succ int) Tier {
		return Tier{Name: name, Budget: budget, MaxAttempts: attempts, Backoff: bo,
			Breaker: breaker.Settings{FailureThreshold: thr, Cooldown: cool, HalfOpenProbes: 1, HalfOpenSuccesses: succ}}
	}
	return []Tier{
		mk("safety", 50*time.Millisecond, 1, 2, 60*time.Second, 3),
		mk("knowledge", 200*time.Millisecond, 3, 5, 30*time.Second, 2),
		mk("perception", 150*time.Millisecond, 2, 7, 20*time.Second, 2),
		mk("planning", 100*time.Millisecond, 2, 10, 15*time.Second, 1),
		mk("execution", 100*time.Millisecond, 2, 10, 10*time.Second, 1),
	}
}

// DefaultBackoff returns the seed backoff: base 10ms, factor 2, max 100ms, jitter 0.2.
func DefaultBackoff() retrybudget.Backoff {
	return retrybudget.Backoff{Base: 10 * time.Millisecond, Factor: 2, Max: 100 * time.Millisecond, Jitter: 0.2}
}

// Module is a unit of work run once per tick (if due).
//
// Run must honour ctx: it carries the tier deadline. A module that ignores it is abandoned
// at the deadline, reported timed_out, and not started again until it has returned. in is
// valid only until Run returns.
type Module interface {
	Run(ctx context.Context, in *Input) (any, error)
}

// ModuleFunc adapts a function to Module.
type ModuleFunc func(ctx context.Context, in *Input) (any, error)

// Run calls f.
func (f ModuleFunc) Run(ctx context.Context, in *Input) (any, error) { return f(ctx, in) }

// ModuleSpec describes a module: where it runs and how its failures are absorbed.
type ModuleSpec struct {
	// Name is unique among modules: letters, digits, '.', '_' and '-'.
	Name string `json:"name"`
	// Tier is the tier's name. Empty with DependsOn set: the tier after the latest
	// dependency's tier.
	Tier string `json:"tier,omitempty"`
	// DependsOn lists modules whose output this module needs; they must run in earlier tiers.
	DependsOn []string `json:"depends_on,omitempty"`
	// Reads lists the blackboard keys the module reads (a remote module receives exactly these).
	Reads []string `json:"reads,omitempty"`
	// Writes is the key the module writes. Empty means "<name>.result".
	Writes string `json:"writes,omitempty"`
	// TTL is the last-known-good policy of the written key. Zero means the engine default.
	TTL lastgood.TTL `json:"-"`
	// Policy is the error policy. PolicyDefault means the tier's.
	Policy Policy `json:"policy,omitempty"`
	// Breaker names a shared breaker to use instead of the module's own.
	Breaker string `json:"breaker,omitempty"`
	// OnOpen says what happens when the breaker refuses the call.
	OnOpen OnOpen `json:"on_open"`
	// Idempotent says whether the module may be retried. Nil means true. A module marked
	// non-idempotent in a tier (or with MaxAttempts) allowing more than one attempt is refused.
	Idempotent *bool `json:"idempotent,omitempty"`
	// MaxAttempts overrides the tier's attempts for this module. Zero means the tier's.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Every runs the module on every k-th tick only (tick ids divisible by k). Zero means 1.
	Every int `json:"every,omitempty"`
	// Emergency: the module runs only in emergency mode (a safe-stop action).
	Emergency bool `json:"emergency,omitempty"`
	// Priority orders modules within a tier in the summary and at dispatch (higher first).
	Priority int `json:"priority,omitempty"`

	// Bulkhead names a bulkhead (a named downstream's cap on calls in flight) every run of
	// the module takes a permit of, from admission until it returns.
	Bulkhead string `json:"bulkhead,omitempty"`
	// OnReject says what happens when the bulkhead refuses the call: bypass (serve
	// last-known-good and continue) or fail (the module's failure for its error policy).
	OnReject OnOpen `json:"on_reject,omitempty"`
	// RetryBudget names a downstream's retry budget the module's retries count against
	// instead of its tier's.
	RetryBudget string `json:"retry_budget,omitempty"`

	// Critical: the module is never shed on overrun (priority: critical in the configuration).
	Critical bool `json:"critical,omitempty"`
	// Async: the module runs after each tick, outside the tiers, under Timeout; its value
	// is written at the next tick boundary.
	Async bool `json:"async,omitempty"`
	// Timeout caps an asynchronous module's run. Zero means 1s.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Key returns the key the module writes.
func (s ModuleSpec) Key() string {
	if s.Writes != "" {
		return s.Writes
	}
	return s.Name + ".result"
}

// IsIdempotent reports whether the module may be retried (nil Idempotent means true).
func (s ModuleSpec) IsIdempotent() bool { return s.Idempotent == nil || *s.Idempotent }

// EveryN returns the module's period in ticks (at least 1).
func (s ModuleSpec) EveryN() int {
	if s.Every < 1 {
		return 1
	}
	return s.Every
}

// Input is what a module reads during one attempt: the blackboard as of its tier's start,
// and the tick's identity. The engine owns it; a module must not keep it after Run returns.
type Input struct {
	board     *blackboard.Board
	module    string
	tier      int
	tick      uint64
	deadline  time.Time
	reads     []string
	attempt   int32 // with readStale, one word: an Input per module
	readStale bool
}

// NewInput returns an input bound to board for the named module. The engine calls it.
func NewInput(board *blackboard.Board, spec ModuleSpec, tier int) *Input {
	in := new(Input)
	in.Init(board, spec, tier)
	return in
}

// Init makes in an input bound to board for the named module, as NewInput does, for an
// Input kept inside another value. The engine calls it.
func (in *Input) Init(board *blackboard.Board, spec ModuleSpec, tier int) {
	*in = Input{board: board, module: spec.Name, tier: tier, reads: spec.Reads}
}

// Begin prepares the input for a tick. The engine calls it.
func (in *Input) Begin(tick uint64, deadline time.Time) {
	in.tick = tick
	in.deadline = deadline
	in.attempt = 0
	in.readStale = false
}

// SetAttempt sets the attempt number (1-based). The engine calls it.
func (in *Input) SetAttempt(n int) { in.attempt = int32(n) }

// Get returns the entry of key as seen by this module, recording whether it was degraded
// (stale, expired or derived from stale data) for derived_from_stale propagation.
func (in *Input) Get(key string) (blackboard.Entry, bool) {
	if in.board == nil {
		return blackboard.Entry{}, false
	}
	e, ok := in.board.GetFor(key, in.tier)
	if ok && (e.Stale || e.Expired || e.DerivedFromStale) {
		in.readStale = true
	}
	return e, ok
}

// Value returns the value of key, or nil when nothing is served.
func (in *Input) Value(key string) any {
	e, _ := in.Get(key)
	return e.Value
}

// ReadStale reports whether the module read a degraded entry during this tick.
func (in *Input) ReadStale() bool { return in.readStale }

// Module returns the module's name.
func (in *Input) Module() string { return in.module }

// Tier returns the module's tier index.
func (in *Input) Tier() int { return in.tier }

// TickID returns the tick in progress.
func (in *Input) TickID() uint64 { return in.tick }

// Attempt returns the attempt number, starting at 1.
func (in *Input) Attempt() int { return int(in.attempt) }

// Deadline returns the tier's deadline.
func (in *Input) Deadline() time.Time { return in.deadline }

// Reads returns the keys the module declared it reads.
func (in *Input) Reads() []string { return in.reads }
