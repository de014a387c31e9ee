package cycle

import (
	"errors"
	"time"

	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/lastgood"
)

// ErrNotAdmitted is returned by Tick when the engine's Gate refused the tick (a standby
// daemon of an active/standby group).
var ErrNotAdmitted = errors.New("tick not admitted: this engine is not the active one")

// Gate admits or refuses every tick at its start. It is how a group of daemons of which
// only one may tick (active/standby) fences the others: the engine asks it with the
// tick's own start time, after the start is stamped and before any module runs, so a tick
// that the gate admitted started while the gate held its grant.
type Gate interface {
	// Admit is called under the engine's tick lock with the start time of the tick about
	// to start and the id it would get (one past the last). ok false: the tick does not
	// start (a periodic scheduler waits for the next grid point; Tick answers
	// ErrNotAdmitted). Otherwise id is the tick's id, at least next (a larger id skips
	// the ids between, so that ids continue a group's), and epoch is stamped on the
	// summary. It must not block.
	Admit(start time.Time, next uint64) (id, epoch uint64, ok bool)
}

// WithGate makes every tick ask g first (see Gate). Without a gate every tick starts.
// Given more than once, the gates are asked in order, each with the id the ones before it
// gave: every one must admit the tick, which takes the last id given and the last
// non-zero epoch.
func WithGate(g Gate) Option {
	return optionFunc(func(o *engineOptions) {
		if o.gate != nil {
			g = gateChain{o.gate, g}
		}
		o.gate = g
	})
}

// gateChain is two gates that must both admit a tick (see WithGate).
type gateChain [2]Gate

// Admit asks c[0], then c[1] with the id c[0] gave.
func (c gateChain) Admit(start time.Time, next uint64) (id, epoch uint64, ok bool) {
	id, epoch, ok = c[0].Admit(start, next)
	if !ok {
		return 0, 0, false
	}
	id2, epoch2, ok := c[1].Admit(start, max(id, next))
	if !ok {
		return 0, 0, false
	}
	if epoch2 != 0 {
		epoch = epoch2
	}
	return max(id, id2, next), epoch, true
}

// admit asks the gate, if any, for the tick starting at start; the caller holds tickMu.
func (e *Engine) admit(start time.Time) (id, epoch uint64, ok bool) {
	next := e.nextID + 1
	if e.gate == nil {
		return next, 0, true
	}
	id, epoch, ok = e.gate.Admit(start, next)
	return max(id, next), epoch, ok
}

// Handover is the state a daemon taking over from another starts with, so that it does
// not start blind (see Engine.TakeOver).
type Handover struct {
	// Emergency is the emergency state of the last tick of the previous active daemon;
	// a latched emergency stays latched.
	Emergency *faultsummary.Emergency
	// LastGood are the previous active daemon's last-known-good values, with their
	// write times: a module that fails in the first ticks serves them, tagged stale with
	// their true age, until their TTL passes (a value already stored that is as recent or
	// more is kept).
	LastGood []lastgood.Entry
	// OpenBreakers are the previous active daemon's open breakers, by name, with when
	// they opened: the same breakers here open as of that time (see breaker.OpenSince).
	OpenBreakers map[string]time.Time
}

// TakeOver sets the state that the next tick continues from: the emergency state, the
// last-known-good values and the open breakers of h. It is applied between two ticks.
func (e *Engine) TakeOver(h Handover) {
	e.takeOverLocked(h)
	// Breakers move outside the tick lock: their listeners are the engine's own.
	for name, at := range h.OpenBreakers {
		if b, ok := e.breakers.Get(name); ok {
			b.OpenSince(at)
		}
	}
}

// takeOverLocked applies the emergency state and the last-known-good values of h under
// the tick lock.
func (e *Engine) takeOverLocked(h Handover) {
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	if em := h.Emergency; em != nil {
		e.em = decide.Emergency{Active: em.Active, Since: em.SinceTick, Reason: em.Reason,
			Latched: em.Latched, Healthy: em.HealthyTicks, EndedTick: em.EndedTick}
		e.emPrev = nil // the previous active's history is not handed over
		e.emView.Store(&faultsummary.EmergencyStatus{Emergency: *em})
	}
	for _, lg := range h.LastGood {
		if lg.Key == "" || lg.Written.IsZero() {
			continue
		}
		if cur := e.lg.Get(lg.Key, lg.Written); cur.Quality != lastgood.Missing && !cur.Written.Before(lg.Written) {
			continue // this engine's own value is as recent
		}
		e.lg.Put(lg)
	}
}
