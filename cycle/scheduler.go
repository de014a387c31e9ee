package cycle

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/internal/ktimer"
)

// Run runs the scheduler until ctx ends, then returns ctx's error after the running tick
// has finished (abandoned modules are not waited for). Ticks start on the grid
// start + k·period; the overrun policy decides what happens after a tick that ran past one
// or more grid points. In step mode (period 0) Run only waits for ctx: ticks run through
// Tick. Configuration changes apply at tick boundaries; a reload that changes the period
// restarts the grid at the grid point of the last tick, so that the next tick comes one new
// period after it, and a reload to step mode is applied by Run itself, at once if no tick
// is running.
func (e *Engine) Run(ctx context.Context) error {
	if e.closed.Load() {
		return ErrClosed
	}
	if e.running.Swap(true) {
		return ErrRunning
	}
	defer e.running.Store(false)
	e.grid = gridTimer{}
	defer e.grid.release()

	var (
		g    decide.Grid // the grid; g.At() is the next tick's grid point
		last time.Time   // the grid point of the last tick run on a period
	)
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		cfg := e.pending.Load().cfg // without cfgMu: a reload being built must not hold the grid
		if cfg.Period <= 0 {
			if err := e.stepModeWait(ctx, cfg); err != nil {
				return err
			}
			g.Period, last = 0, time.Time{}
			continue
		}
		if cfg.Period != g.Period {
			g = e.regrid(g, cfg.Period, last)
		}
		var err error
		if g, cfg, err = e.sleepToGrid(ctx, g, cfg, last); err != nil {
			return err
		}
		if cfg.Period <= 0 {
			continue // a reload to step mode while waiting: stepModeWait applies it
		}
		e.tickMu.Lock()
		if e.closed.Load() {
			e.tickMu.Unlock()
			return ErrClosed
		}
		last = g.At()
		e.tickLocked(context.WithoutCancel(ctx), last)
		g, e.pendingGap = cfg.Overrun.Next(g, e.clock.Now(), cfg.CatchUpMax)
		e.tickMu.Unlock()
	}
}

// stepModeWait waits in step mode for ctx, or for a reload that sets a period. A reload to
// step mode that came during the last tick is applied here, at a tick boundary: no tick
// applies it, and Tick refuses to run until it is in force.
func (e *Engine) stepModeWait(ctx context.Context, cfg Config) error {
	if e.closed.Load() {
		return ErrClosed // as a scheduler on a period does at its next tick
	}
	if e.activeView.Load().cfg.Period > 0 {
		e.tickMu.Lock()
		if !e.closed.Load() {
			e.applyPending()
		}
		e.tickMu.Unlock()
	}
	return e.sleepUntil(ctx, cfg, e.clock.Now().Add(50*time.Millisecond), nil)
}

// errWoken is returned by sleepUntil when a reload, a registration or Close woke the
// scheduler before its time.
var errWoken = errors.New("scheduler woken")

// wakeSlice is how much of a wait on a period the scheduler sleeps on the kernel timer,
// which nothing but the scheduler's context can interrupt: a longer wait is slept on a Go
// timer that a configuration change or Close ends at once (see Engine.wakeup), and only its
// last wakeSlice on the kernel timer. So a configuration change reaches the scheduler
// within wakeSlice however long the period, and periods up to wakeSlice cost no second
// wake-up per tick.
const wakeSlice = 100 * time.Millisecond

// sleepToGrid sleeps until g's next grid point. Woken by a configuration change (see
// wakeup), it puts the change in force at once, between two ticks, and goes on to the grid
// point rewake gives: a module removed, or a safety module added, does not wait for the
// next grid point of a long period. Woken by Close, it returns ErrClosed at once. It
// returns at once after a change to step mode.
func (e *Engine) sleepToGrid(ctx context.Context, g decide.Grid, cfg Config, last time.Time) (decide.Grid, Config, error) {
	for {
		err := e.sleepUntil(ctx, cfg, g.At(), &e.grid)
		if !errors.Is(err, errWoken) {
			return g, cfg, err
		}
		if !e.applyBetweenTicks() {
			return g, cfg, ErrClosed
		}
		cfg = e.pending.Load().cfg
		if cfg.Period <= 0 {
			return g, cfg, nil
		}
		g = e.rewake(g, last)
	}
}

// applyBetweenTicks puts the pending configuration in force between two ticks, a tick
// boundary like any other; false if the engine is closed.
func (e *Engine) applyBetweenTicks() bool {
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	if e.closed.Load() {
		return false
	}
	e.applyPending()
	return true
}

// rewake returns the grid after the scheduler was woken between ticks on grid g (last: the
// grid point of the last tick). A pending configuration with a shorter period must not wait
// for the old period's next grid point: its first tick comes one new period after the last
// tick, or at once if that time has passed. One with the same or a longer period is applied
// at the old grid point, which comes no later. Close is seen at the top of Run's loop.
func (e *Engine) rewake(g decide.Grid, last time.Time) decide.Grid {
	p := e.pending.Load().cfg.Period
	if p >= g.Period {
		return g
	}
	if last.IsZero() || !last.Add(p).After(e.clock.Now()) {
		return decide.Grid{Origin: e.clock.Now(), Period: p}
	}
	return decide.Grid{Origin: last, Period: p, K: 1}
}

// wakeup ends the scheduler's wait on a period longer than wakeSlice (see wakeSlice).
// It never blocks: one wake-up pending is enough.
func (e *Engine) wakeup() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// regrid returns the grid for a new period: the first period (or one after step mode)
// starts now; a reload that changed the period starts the new grid at the last tick's grid
// point, so that the next tick comes one new period after it, not at once.
func (e *Engine) regrid(g decide.Grid, period time.Duration, last time.Time) decide.Grid {
	if g.Period > 0 {
		return decide.Grid{Origin: last, Period: period, K: 1}
	}
	return decide.Grid{Origin: e.clock.Now(), Period: period}
}

// sleepUntil waits until t on the engine's clock or until ctx ends. With precise timing on
// the real clock (outside a testing/synctest bubble, see maySpin) it sleeps until
// PreciseMargin before t and spins for the rest. With coarse timing on the real clock and
// a kernel timer to be had in g (nil: none wanted) it sleeps on that timer (see
// gridTimer); otherwise on a Go timer.
func (e *Engine) sleepUntil(ctx context.Context, cfg Config, t time.Time, g *gridTimer) error {
	grid := g != nil // a wait for a grid point, which a configuration change ends (errWoken)
	precise := cfg.Timing == Precise && e.maySpin(e.clock.Now())
	if precise || !e.realClock {
		g = nil
	}
	for {
		d := t.Sub(e.clock.Now())
		if precise {
			d -= cfg.PreciseMargin
		}
		if d <= 0 {
			break
		}
		if d <= wakeSlice || !grid {
			if ks := g.sleeper(ctx, e); ks != nil {
				g.sleep(ks, t)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				continue // the kernel never ends a sleep early: d is now ≤ 0, unless the timer failed
			}
		} else if g != nil && !g.none {
			d -= wakeSlice // the rest on the kernel timer
		}
		tm := e.clock.NewTimer(d)
		select {
		case <-tm.C():
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		case <-e.wake:
			tm.Stop()
			if !grid {
				return nil // step mode: Run reads the configuration again
			}
			return errWoken
		}
	}
	if precise {
		for e.clock.Now().Before(t) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			runtime.Gosched()
		}
	}
	return ctx.Err()
}

// gridTimer is the kernel timer (a ktimer.Sleeper) on which Run sleeps, with coarse timing,
// until the next grid point. Go's timers wake up to a millisecond late (see
// Engine.kernelTimer), which delays the start of a coarse tick past its grid point; the
// kernel's timer wakes Run's goroutine, parked in the runtime's poller, within the kernel's
// own latency. The whole wait is slept on it, not only its last milliseconds as a tier's
// deadline is: a Go timer's wake-up before the kernel's would make two wake-ups from idle a
// period, doubling the idle process's CPU time; one costs no more CPU than a Go timer alone (see package ktimer for why its system calls are raw). A system call
// arms it, and Run's context ending interrupts it (context.AfterFunc). It is Run's own (the
// tick's kernel timer is used under tickMu, which Run does not hold while it waits): made on
// first need, released when Run returns; only Run's goroutine uses it.
type gridTimer struct {
	ks    *ktimer.Sleeper
	stop  func() bool // stops the interruption of ks when Run's context ends
	none  bool        // no kernel timer to be had (not Linux, a virtual clock, or it failed)
	waits int         // the waits finished on the kernel timer (for tests)
}

// sleeper returns g's kernel timer, made on first need and interrupted when ctx ends; nil
// if there is none to be had (or g is nil).
func (g *gridTimer) sleeper(ctx context.Context, e *Engine) *ktimer.Sleeper {
	if g == nil {
		return nil
	}
	if g.ks != nil || g.none {
		return g.ks
	}
	ks, err := ktimer.NewSleeper(e.clock.Now)
	if err != nil {
		g.none = true // not Linux, or a virtual clock: the Go timers keep the grid
		return nil
	}
	g.ks, g.stop = ks, context.AfterFunc(ctx, ks.Interrupt)
	return ks
}

// sleep sleeps on ks until t. A timer that fails is released (the caller goes on on Go
// timers); an interrupted sleep returns early (ctx has ended).
func (g *gridTimer) sleep(ks *ktimer.Sleeper, t time.Time) {
	switch err := ks.SleepUntil(t); {
	case err == nil:
		g.waits++
	case !errors.Is(err, ktimer.ErrInterrupted):
		g.release()
		g.none = true
	}
}

// release closes g's kernel timer, if any.
func (g *gridTimer) release() {
	if g.ks != nil {
		g.stop()
		g.ks.Close()
		g.ks, g.stop = nil, nil
	}
}
