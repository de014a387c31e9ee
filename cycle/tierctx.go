package cycle

import (
	"context"
	"sync/atomic"
	"time"
)

// tierCtx is the context a tier's modules run under. It carries the tier's deadline but
// no timer of its own: the engine, which waits for that deadline anyway, cancels it with
// DeadlineExceeded when it takes the tier (expire), and the tier's end cancels it
// otherwise (stop). Under a context.WithDeadline two timers fell due at the same instant,
// the context's and the engine's, and the modules that honour their context were
// cancelled by the context's, up to a millisecond late, even when the engine kept the
// deadline to the microsecond (precise timing); the engine's own timer, in another
// thread's timer heap, often ran only after those modules had ended the tier. Now the
// modules' contexts are cancelled when the engine takes the tier: at the deadline with
// precise timing, as late as a Go timer with coarse timing. One timer per tier also
// allocates less.
//
// It reads as a context.WithDeadline's would: Err is DeadlineExceeded once the deadline
// has cancelled it (and for contexts derived from it, which it cancels through its
// AfterFunc, as the context package does for contexts of its own kind), Canceled or the
// tick's error otherwise; Deadline is the earlier of the tier's and the tick's.
type tierCtx struct {
	tick     context.Context // the tick's context: values, cause and cancellation come from it
	inner    context.Context // context.WithCancelCause(tick): the Done channel
	cancel   context.CancelCauseFunc
	deadline time.Time
	// solo: the tick's context is never cancelled (its Done is nil), so only expire and
	// stop cancel this one, and they set ended first; Err is then answered without the
	// context package while ended is not set (the runners ask it for every module).
	solo  bool
	ended atomic.Bool
}

// newTierCtx returns the context of a tier due at deadline, under the tick's context.
func newTierCtx(tick context.Context, deadline time.Time) *tierCtx {
	c := &tierCtx{tick: tick, deadline: deadline, solo: tick.Done() == nil}
	if d, ok := tick.Deadline(); ok && d.Before(deadline) {
		c.deadline = d
	}
	c.inner, c.cancel = context.WithCancelCause(tick)
	return c
}

// expire cancels the context because its deadline has passed.
func (c *tierCtx) expire() {
	c.ended.Store(true)
	c.cancel(context.DeadlineExceeded)
}

// stop cancels the context at the end of the tier (no-op once cancelled).
func (c *tierCtx) stop() {
	c.ended.Store(true)
	c.cancel(context.Canceled)
}

// Deadline returns the tier's deadline (the tick's, if that is earlier).
func (c *tierCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Done is closed when the context is cancelled.
func (c *tierCtx) Done() <-chan struct{} { return c.inner.Done() }

// Err returns DeadlineExceeded once a deadline cancelled the context (the tier's, or the
// tick's own if it came first), the cancellation otherwise, or nil.
func (c *tierCtx) Err() error {
	if c.solo && !c.ended.Load() {
		return nil
	}
	return c.err()
}

// err is Err from the context package.
func (c *tierCtx) err() error {
	err := c.inner.Err()
	if err != nil && context.Cause(c.inner) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// Value returns the tick context's value for key. Reading through to the tick's context
// (not to inner) keeps a derived context from attaching to inner's cancellation, whose
// error is Canceled: it attaches through AfterFunc and takes Err from here.
func (c *tierCtx) Value(key any) any { return c.tick.Value(key) }

// AfterFunc arranges for f to run in its own goroutine once the context is cancelled
// (see context.AfterFunc); the context package uses it for contexts derived from this one.
func (c *tierCtx) AfterFunc(f func()) (stop func() bool) { return context.AfterFunc(c.inner, f) }
