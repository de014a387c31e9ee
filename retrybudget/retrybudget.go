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
	"errors"
	"math"
	"math/rand/v2"
	"sync"
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
	// Gate, if set, is asked before every retry that the rules above allow, once the
	// backoff is known to fit in the time left and before it is waited: a refusal ends the
	// run with the last attempt's fault (RetryRefused). A retry-amplification budget
	// (the engine's per tier or per downstream) is one.
	Gate RetryGate
}

// RetryGate allows or refuses retries; an allowed retry is counted by the gate.
type RetryGate interface {
	TryRetry() bool
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
	// RetryRefused reports that the Budget's Gate refused a retry.
	RetryRefused bool
}

// Option configures a Runner.
type Option interface{ apply(*Runner) }

type optionFunc func(*Runner)

func (f optionFunc) apply(r *Runner) { f(r) }

// WithClock sets the clock used for deadlines and backoff sleeps. Default: clock.Real().
func WithClock(c clock.Clock) Option { return optionFunc(func(r *Runner) { r.clock = clock.Or(c) }) }

// WithRand sets the source of jitter: a function returning a uniform float in [0, 1).
// Default: math/rand/v2's Float64. A Runner calls f under its own lock, so f need not be
// safe for concurrent use.
func WithRand(f func() float64) Option { return optionFunc(func(r *Runner) { r.rand = f }) }

// Runner runs attempts under budgets. It is safe for concurrent use.
type Runner struct {
	clock clock.Clock
	rand  func() float64 // nil means math/rand/v2's Float64
	mu    sync.Mutex     // serialises calls to a custom rand
}

// New returns a Runner.
func New(opts ...Option) *Runner {
	r := &Runner{}
	for _, o := range opts {
		if o != nil {
			o.apply(r)
		}
	}
	r.clock = clock.Or(r.clock)
	return r
}

// Run calls attempt (with n = 1, 2, …) until it succeeds, fails with a kind that is not
// retryable, the attempts are used up, or the time is. It never returns before the last
// started attempt has returned; it allocates nothing when the first attempt succeeds and
// ctx already carries the effective deadline.
//
// When the next backoff, clamped to the time left, would leave no time for another
// attempt, Run returns at once (BudgetExhausted) rather than sleeping to the deadline. A
// panic in attempt is not recovered: it propagates to the caller of Run.
func (r *Runner) Run(ctx context.Context, b Budget, attempt func(ctx context.Context, n int) error) Result {
	return r.RunFrom(ctx, clock.Or(r.clock).Now(), b, attempt)
}

// RunFrom is Run for a caller that already read the clock: now is taken as the start of
// the run (saving a clock read on the hot path).
func (r *Runner) RunFrom(ctx context.Context, now time.Time, b Budget, attempt func(ctx context.Context, n int) error) Result {
	c := clock.Or(r.clock)
	deadline, hasDeadline := ctx.Deadline()
	if b.Budget > 0 {
		if bd := now.Add(b.Budget); !hasDeadline || bd.Before(deadline) {
			return r.runUntil(ctx, c, bd, b, attempt)
		}
	}
	return r.run(ctx, now, deadline, hasDeadline, b, attempt)
}

// RunAfter goes on with a run whose first attempt the caller made itself, for callers
// whose successful first attempt must cost no more than the call. The caller makes
// attempt 1 only where RunFrom would have: b.Budget zero (RunAfter panics otherwise: such
// a run derives its context before the first attempt), ctx not done and its deadline, if
// any, not passed. first is the error attempt 1 returned (nil: it succeeded). The result is
// RunFrom's when attempt returns first at n = 1.
func (r *Runner) RunAfter(ctx context.Context, b Budget, attempt func(ctx context.Context, n int) error, first error) Result {
	return r.RunAfterAt(ctx, b, attempt, first, time.Time{})
}

// RunAfterAt is RunAfter for a caller that read the clock when attempt 1 returned: at is
// that time (zero: unknown), which decides whether the budget had run out then without
// reading the clock again. A caller that times the attempt anyway saves a clock read for
// each run that ends at its first failure (most failing runs, when one attempt is allowed
// or the fault is not retryable).
func (r *Runner) RunAfterAt(ctx context.Context, b Budget, attempt func(ctx context.Context, n int) error, first error, at time.Time) Result {
	if b.Budget > 0 {
		panic("retrybudget: RunAfter with a Budget of its own")
	}
	if first == nil {
		return Result{Attempts: 1}
	}
	deadline, hasDeadline := ctx.Deadline()
	return r.retry(ctx, deadline, hasDeadline, b, attempt, 1, first, at)
}

// runUntil derives the context carrying the budget's deadline and runs under it. It is a
// separate function so that the path without a derived context has no deferred call.
func (r *Runner) runUntil(ctx context.Context, c clock.Clock, deadline time.Time, b Budget, attempt func(ctx context.Context, n int) error) Result {
	ctx, cancel := c.WithDeadline(ctx, deadline)
	defer cancel()
	return r.run(ctx, c.Now(), deadline, true, b, attempt)
}

// run checks that a run may start at now and makes the first attempt. ctx carries
// deadline when hasDeadline is set.
func (r *Runner) run(ctx context.Context, now, deadline time.Time, hasDeadline bool, b Budget, attempt func(ctx context.Context, n int) error) Result {
	if hasDeadline && !now.Before(deadline) {
		return Result{Err: context.DeadlineExceeded, Kind: fault.KindTransient, BudgetExhausted: true}
	}
	if err := ctx.Err(); err != nil {
		return Result{Err: err, Kind: fault.ClassifyIn(ctx, err), BudgetExhausted: errors.Is(err, context.DeadlineExceeded)}
	}
	if err := attempt(ctx, 1); err != nil {
		return r.retry(ctx, deadline, hasDeadline, b, attempt, 1, err, time.Time{})
	}
	return Result{Attempts: 1}
}

// retry goes on after attempt n failed with err at time at (zero: read the clock): it
// retries while the kind is retryable and attempts and time are left.
func (r *Runner) retry(ctx context.Context, deadline time.Time, hasDeadline bool, b Budget, attempt func(ctx context.Context, n int) error, n int, err error, at time.Time) Result {
	maxAttempts := max(b.MaxAttempts, 1)
	retryable := b.Retryable
	if retryable.Empty() {
		retryable = fault.SetOf(fault.KindTransient)
	}
	c := clock.Or(r.clock)
	var res Result
	for ; ; n++ {
		if err == nil { // a retry: make attempt n
			if err = attempt(ctx, n); err == nil {
				return Result{Attempts: n}
			}
		}
		res.Attempts = n
		res.Err = err
		res.Kind = fault.ClassifyIn(ctx, err)
		res.BudgetExhausted = r.deadlinePassed(ctx, c, deadline, hasDeadline, at)
		at = time.Time{} // the time of attempt n only
		if res.Kind == fault.KindCanceled || !retryable.Has(res.Kind) {
			return res
		}
		if n >= maxAttempts {
			res.AttemptsExhausted = true
			return res
		}
		if res.BudgetExhausted || ctx.Err() != nil {
			return res
		}
		d := r.delay(b.Backoff, n)
		if hasDeadline && d >= deadline.Sub(c.Now()) {
			// The backoff, clamped to the time left, would leave no time for another attempt.
			res.BudgetExhausted = true
			return res
		}
		if b.Gate != nil && !b.Gate.TryRetry() {
			res.RetryRefused = true
			return res
		}
		if clock.Sleep(ctx, c, d) != nil || ctx.Err() != nil {
			res.Kind = fault.ClassifyIn(ctx, err)
			res.BudgetExhausted = r.deadlinePassed(ctx, c, deadline, hasDeadline, time.Time{})
			return res
		}
		if r.deadlinePassed(ctx, c, deadline, hasDeadline, time.Time{}) {
			res.BudgetExhausted = true
			return res
		}
		err = nil
	}
}

// deadlinePassed reports whether ctx ended by its deadline or deadline was reached: by now
// if it is set, by the clock otherwise.
func (r *Runner) deadlinePassed(ctx context.Context, c clock.Clock, deadline time.Time, hasDeadline bool, now time.Time) bool {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return true
	case !hasDeadline:
		return false
	case now.IsZero():
		return clock.Since(c, deadline) >= 0
	default:
		return !now.Before(deadline)
	}
}

// delay returns the jittered backoff after attempt n, drawing from the Runner's rand only
// when jitter applies. A custom rand is called under the Runner's lock so that a Runner
// shared between goroutines stays safe with a rand that is not.
func (r *Runner) delay(b Backoff, n int) time.Duration {
	u := 0.5
	if b.Jitter > 0 {
		if r.rand == nil {
			u = rand.Float64()
		} else {
			r.mu.Lock()
			u = r.rand()
			r.mu.Unlock()
		}
	}
	return b.Delay(n, u)
}

// Default backoff parameters, used for zero (or non-positive) Backoff fields.
const (
	defaultBase   = 10 * time.Millisecond
	defaultFactor = 2
	defaultMax    = 100 * time.Millisecond
)

// Delay returns the backoff before attempt n+1 after attempt n failed (n ≥ 1), jitter applied
// with the value u in [0, 1).
//
// Non-positive Base, Factor or Max take their defaults, n < 1 counts as 1, Jitter is clamped
// to [0, 1] and u to [0, 1]. The result is never negative.
func (b Backoff) Delay(n int, u float64) time.Duration {
	base, factor, maxDelay, jitter := b.Base, b.Factor, b.Max, b.Jitter
	if base <= 0 {
		base = defaultBase
	}
	if !(factor > 0) { // also catches NaN
		factor = defaultFactor
	}
	if maxDelay <= 0 {
		maxDelay = defaultMax
	}
	n = max(n, 1)
	d := float64(base) * math.Pow(factor, float64(n-1))
	if !(d <= float64(maxDelay)) { // also catches +Inf and NaN
		d = float64(maxDelay)
	}
	if jitter > 0 { // NaN and negative values mean no jitter
		jitter = min(jitter, 1)
		if !(u >= 0) { // also catches NaN
			u = 0
		}
		u = min(u, 1)
		d *= 1 + jitter*(2*u-1)
	}
	if d <= 0 {
		return 0
	}
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}
