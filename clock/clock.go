// Package clock is the injected source of time used by every timing decision in cycled:
// budgets, backoff, breaker cooldowns, last-known-good ages and the scheduler grid.
//
// Real returns the wall clock. Inside a testing/synctest bubble the wall clock is virtual,
// which is how most tests run. Fake is a manually advanced clock for simulations and for
// tests that want to step time explicitly.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine (Real) or synchronously from Advance (Fake) after d.
	AfterFunc(d time.Duration, f func()) Timer
	// WithDeadline returns a copy of parent that is cancelled with context.DeadlineExceeded
	// once this clock reaches deadline.
	WithDeadline(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc)
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C returns the channel on which the timer delivers its time; nil for AfterFunc timers.
	C() <-chan time.Time
	// Stop prevents the timer from firing and reports whether it was active.
	Stop() bool
	// Reset re-arms the timer to fire after d and reports whether it was active.
	Reset(d time.Duration) bool
}

// Real returns the wall clock (virtual inside a testing/synctest bubble).
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Since returns the time elapsed on c since t. On the real clock it reads only the
// monotonic clock (time.Since, for a t that carries a monotonic reading), where c.Now()
// also reads the wall clock, which hot paths that only need a duration can skip.
func Since(c Clock, t time.Time) time.Duration {
	if IsReal(c) {
		return time.Since(t)
	}
	return c.Now().Sub(t)
}

// IsReal reports whether c is the wall clock returned by Real.
func IsReal(c Clock) bool { _, ok := c.(realClock); return ok }

// RealTime reports whether t, read from c, is time that passes on its own: c is the real
// clock, and t carries a monotonic reading, which time.Now inside a testing/synctest
// bubble does not (there time stands still until every goroutine of the bubble blocks,
// so a goroutine that spins or times itself by the processor would wait for ever).
func RealTime(c Clock, t time.Time) bool { return IsReal(c) && t != t.Round(0) }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

func (realClock) WithDeadline(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(parent, deadline)
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Sleep waits for d on c, or until ctx ends, and returns ctx's error in that case.
// A non-positive d returns at once with ctx.Err().
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// Or returns c, or the real clock when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real()
	}
	return c
}
