// Package retrybudget runs an operation under a wall-clock retry budget.
//
// A Budget bounds both the number of attempts and the time they may take. Every attempt's
// context carries the overall deadline, so attempt N only gets the time that is left, never
// a fresh slice. Only retryable kinds (by default transient) are retried; the backoff between
// attempts is base·factor^(attempt-1), capped at the maximum delay, with ± jitter, clamped to
// the time left, and abandoned as soon as the context ends. No attempt starts once the
// deadline has passed.
package retrybudget

import (
	"context"
	"time"

	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
)

// Backoff is the delay schedule between attempts. Zero fields take the documented defaults.
type Backoff struct {
	// Base is the delay before the second attempt. Zero means 10ms.
	Base time.Duration
	// Factor multiplies the delay after every attempt. Zero means 2.
	Factor float64
	// Max caps the delay. Zero means 100ms.
	Max time.Duration
	// Jitter spreads each delay uniformly by ± Jitter × delay (0 ≤ Jitter ≤ 1). Zero means none;
	// a negative value is treated as zero.
	Jitter float64
}

// Budget is the policy for one Run.
type Budget struct {
	// MaxAttempts is the number of attempts allowed. Zero or one means no retry.
	MaxAttempts int
	// Budget is the wall-clock time the whole run may take, from the start of Run. Zero means
	// no limit beyond the context's own deadline; when both exist the earlier one applies.
	Budget time.Duration
	// Backoff is the delay schedule.
	Backoff Backoff
	// Retryable is the set of kinds that are retried. The empty set means {transient}.
	Retryable fault.Set
}

// Result is the outcome of one Run.
type Result struct {
	// Attempts is the number of attempts started (≥ 1 unless the deadline had already passed).
	Attempts int
	// Err is the last attempt's error, or nil on success.
	Err error
	// Kind is fault.Classify of Err, with a cancellation of the caller's context reported as canceled.
	Kind fault.Kind
	// BudgetExhausted reports that time ran out: a retry was wanted but no time was left, or
	// the last attempt ended by the deadline.
	BudgetExhausted bool
	// AttemptsExhausted reports that a retryable failure had no attempt left.
	AttemptsExhausted bool
}

// Option configures a Runner.
type Option interface{ apply(*Runner) }

type optionFunc func(*Runner)

func (f optionFunc) apply(r *Runner) { f(r) }

// WithClock sets the clock used for deadlines and backoff sleeps. Default: clock.Real().
func WithClock(c clock.Clock) Option { return optionFunc(func(r *Runner) { r.clock = clock.Or(c) }) }

// WithRand sets the source of jitter: a function returning a uniform float in [0, 1).
// Default: math/rand/v2's Float64.
func WithRand(f func() float64) Option { return optionFunc(func(r *Runner) { r.rand = f }) }

// Runner runs attempts under budgets. It is safe for concurrent use.
type Runner struct {
	clock clock.Clock
	rand  func() float64
}

// New returns a Runner.
func New(opts ...Option) *Runner { panic("todo") }

// Run calls attempt (with n = 1, 2, …) until it succeeds, fails with a kind that is not
// retryable, the attempts are used up, or the time is. It never returns before the last
// started attempt has returned; it allocates nothing when the first attempt succeeds and
// ctx already carries the effective deadline.
func (r *Runner) Run(ctx context.Context, b Budget, attempt func(ctx context.Context, n int) error) Result {
	panic("todo")
}

// Delay returns the backoff before attempt n+1 after attempt n failed (n ≥ 1), jitter applied
// with the value u in [0, 1).
func (b Backoff) Delay(n int, u float64) time.Duration { panic("todo") }
