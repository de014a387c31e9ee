package cycle

import (
	"context"
	"runtime"
	"time"
)

// Run runs the scheduler until ctx ends, then returns ctx's error after the running tick
// has finished (abandoned modules are not waited for). Ticks start on the grid
// start + k·period; the overrun policy decides what happens after a tick that ran past one
// or more grid points. In step mode (period 0) Run only waits for ctx: ticks run through
// Tick. Configuration changes apply at tick boundaries; a reload that changes the period
// restarts the grid at the next tick.
func (e *Engine) Run(ctx context.Context) error {
	if e.closed.Load() {
		return ErrClosed
	}
	if e.running.Swap(true) {
		return ErrRunning
	}
	defer e.running.Store(false)

	var (
		origin time.Time // grid origin
		period time.Duration
		k      int64 // index of the next grid point
		next   time.Time
	)
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.cfgMu.Lock()
		cfg := e.desired.cfg
		e.cfgMu.Unlock()
		if cfg.Period <= 0 {
			// Step mode: wait for the context, or for a reload that sets a period.
			if err := e.sleepUntil(ctx, cfg, e.clock.Now().Add(50*time.Millisecond)); err != nil {
				return err
			}
			period = 0
			continue
		}
		if cfg.Period != period {
			period = cfg.Period
			origin = e.clock.Now()
			k = 0
			next = origin
		}
		if err := e.sleepUntil(ctx, cfg, next); err != nil {
			return err
		}
		e.tickMu.Lock()
		if e.closed.Load() {
			e.tickMu.Unlock()
			return ErrClosed
		}
		e.tickLocked(context.WithoutCancel(ctx), next)
		end := e.clock.Now()
		switch cfg.Overrun {
		case OverrunDelay:
			next = end.Add(period)
			origin, k = next, 0
		case OverrunCatchUp:
			k++
			behind := int64(end.Sub(origin)/period) - k + 1 // grid points already due
			if behind > int64(cfg.CatchUpMax) {
				drop := behind - int64(cfg.CatchUpMax)
				k += drop
				e.pendingGap = int(drop)
			}
			next = origin.Add(time.Duration(k) * period)
		default: // skip
			k++
			if due := origin.Add(time.Duration(k) * period); end.After(due) {
				nk := int64(end.Sub(origin)/period) + 1
				e.pendingGap = int(nk - k)
				k = nk
			}
			next = origin.Add(time.Duration(k) * period)
		}
		e.tickMu.Unlock()
	}
}

// sleepUntil waits until t on the engine's clock or until ctx ends. With precise timing on
// the real clock it sleeps until PreciseMargin before t and spins for the rest.
func (e *Engine) sleepUntil(ctx context.Context, cfg Config, t time.Time) error {
	d := t.Sub(e.clock.Now())
	precise := cfg.Timing == Precise && e.realClock
	if precise {
		d -= cfg.PreciseMargin
	}
	if d > 0 {
		tm := e.clock.NewTimer(d)
		select {
		case <-tm.C():
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
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
