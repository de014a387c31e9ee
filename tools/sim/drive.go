package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/fault"
)

// plan is the scenario's events in the order they apply: by tick (applied at the end of
// the tick before, on the tick's goroutine) and by virtual time (applied by the driver
// when the clock reaches them). An outage's end is an event of its own.
type plan struct {
	byTick []step
	byTime []step
}

type step struct {
	tick uint64
	at   time.Time
	ev   Event
	end  bool // the end of ev's outage
}

func newPlan(sc *Scenario, start time.Time) *plan {
	p := &plan{}
	for _, ev := range sc.Events {
		if ev.At != nil {
			at := start.Add(*ev.At)
			p.byTime = append(p.byTime, step{at: at, ev: ev})
			if o := ev.Outage; o != nil && o.For > 0 {
				p.byTime = append(p.byTime, step{at: at.Add(o.For), ev: ev, end: true})
			}
			continue
		}
		p.byTick = append(p.byTick, step{tick: ev.Tick, ev: ev})
		if o := ev.Outage; o != nil && o.Ticks > 0 {
			p.byTick = append(p.byTick, step{tick: ev.Tick + o.Ticks, ev: ev, end: true})
		}
	}
	slices.SortStableFunc(p.byTick, func(a, b step) int { return cmp.Compare(a.tick, b.tick) })
	slices.SortStableFunc(p.byTime, func(a, b step) int { return a.at.Compare(b.at) })
	return p
}

// applyTickEvents applies the events due before tick next starts.
func (r *runner) applyTickEvents(next uint64) {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	for len(r.plan.byTick) > 0 && r.plan.byTick[0].tick <= next {
		st := r.plan.byTick[0]
		r.plan.byTick = r.plan.byTick[1:]
		if err := r.apply(st); err != nil {
			r.fail(err)
		}
	}
}

// applyTimeEvents applies the events due at or before now and returns the time of the
// next one (ok false: none left).
func (r *runner) applyTimeEvents(now time.Time) (next time.Time, ok bool) {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	for len(r.plan.byTime) > 0 && !r.plan.byTime[0].at.After(now) {
		st := r.plan.byTime[0]
		r.plan.byTime = r.plan.byTime[1:]
		if err := r.apply(st); err != nil {
			r.fail(err)
		}
	}
	if len(r.plan.byTime) == 0 {
		return time.Time{}, false
	}
	return r.plan.byTime[0].at, true
}

// apply applies one event; the caller holds evMu.
func (r *runner) apply(st step) error {
	ev := st.ev
	switch {
	case ev.Outage != nil:
		kind := fault.KindTransient
		if ev.Outage.Kind != nil {
			kind = *ev.Outage.Kind
		}
		if st.end {
			kind = fault.KindNone
		}
		r.mods.outage(ev.Outage.Breaker, kind)
	case ev.Restore:
		r.mods.restore(ev.Module)
	case ev.Module != "":
		r.mods.setBehaviour(r.mods.state(ev.Module), ev.Behaviour, false)
	case ev.Reset != nil && ev.Reset.Emergency:
		r.eng.ResetEmergency()
	case ev.Reset != nil:
		if err := r.eng.ResetBreaker(ev.Reset.Breaker); err != nil {
			return fmt.Errorf("sim: reset: %w", err)
		}
	case ev.Reload != "":
		return r.reload(r.sc.reloads[ev.Reload])
	case ev.Period != nil:
		c := *r.cfg
		c.Cycle.Period = *ev.Period
		return r.reload(&c)
	}
	return nil
}

// reload applies cfg at the next tick boundary, as the daemon's reload does.
func (r *runner) reload(cfg *config.Config) error {
	if cfg == nil {
		return fmt.Errorf("sim: reload of a configuration the scenario did not check")
	}
	if (cfg.Cycle.Period == 0) != r.stepMode {
		return fmt.Errorf("sim: a scenario cannot switch between step mode (period 0) and a period")
	}
	ec, regs, err := r.build(cfg)
	if err != nil {
		return err
	}
	if err := r.eng.Reload(ec, regs); err != nil {
		return fmt.Errorf("sim: reload: %w", err)
	}
	r.cfg = cfg
	return nil
}

// drive runs the simulation to its end.
func (r *runner) drive(ctx context.Context) error {
	r.applyTickEvents(1)
	r.applyTimeEvents(r.fake.Now())
	var err error
	if r.stepMode {
		err = r.driveSteps(ctx)
	} else {
		err = r.driveScheduler(ctx)
	}
	if err != nil {
		return err
	}
	if err := r.idle(); err != nil {
		return err
	}
	return r.firstErr()
}

// idle calls Options.Idle.
func (r *runner) idle() error {
	if r.o.Idle == nil {
		return nil
	}
	if err := r.o.Idle(); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}

// driveScheduler runs the engine's scheduler (Engine.Run, the daemon's) on the virtual
// clock, moving the clock to the next timer or event whenever everything is blocked.
func (r *runner) driveScheduler(ctx context.Context) error {
	rctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.evMu.Lock()
	r.stop = cancel
	r.evMu.Unlock()
	done := make(chan error, 1)
	go func() { done <- r.eng.Run(rctx) }()
	return r.advanceUntil(ctx, done, cancel)
}

// driveSteps runs step mode: ticks back to back, as a client posting /ticks would.
func (r *runner) driveSteps(ctx context.Context) error {
	for {
		if r.isStopped() || (r.o.For > 0 && !r.fake.Now().Before(r.o.Start.Add(r.o.For))) {
			return nil
		}
		done := make(chan error, 1)
		go func() {
			_, err := r.eng.Tick(context.Background())
			done <- err
		}()
		if err := r.advanceUntil(ctx, done, func() {}); err != nil {
			return err
		}
	}
}

func (r *runner) isStopped() bool {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	return r.stopped
}

// advanceUntil moves virtual time until done delivers: at every point where everything
// is blocked it applies the events due, calls stop once the run's time is up, and jumps
// to the next timer or event.
func (r *runner) advanceUntil(ctx context.Context, done <-chan error, stop func()) error {
	endAt := r.o.Start.Add(r.o.For)
	for {
		r.q.settle()
		if err := r.idle(); err != nil {
			stop()
			<-done
			return err
		}
		select {
		case err := <-done:
			if err != nil && err != context.Canceled {
				return fmt.Errorf("sim: %w", err)
			}
			return nil
		default:
		}
		if err := ctx.Err(); err != nil {
			stop()
			<-done
			return err
		}
		now := r.fake.Now()
		evAt, evOK := r.applyTimeEvents(now)
		next, ok := r.fake.Next()
		if evOK && (!ok || evAt.Before(next)) {
			next, ok = evAt, true
		}
		if r.o.For > 0 && (!ok || !next.Before(endAt)) {
			stop() // the tick in progress, if any, finishes
		}
		if !ok {
			r.q.settle()
			select {
			case err := <-done:
				_ = err
				return nil
			default:
				return ErrStalled
			}
		}
		r.fake.Set(next)
	}
}
