package cycle

import "github.com/cycled/cycled/breaker"

// carry is what installing a prepared state at a tick boundary still changes in the
// engine's shared stores (the breaker registry, last-known-good, the blackboard, the
// workers), worked out off the tick path against base, the state in force when it was
// prepared. Everything else a tick needs (runtimes, breakers, slots, workers, summary
// order) is in the state already: installing it is a swap plus these few changes, each
// proportional to what the change of configuration changed. A worker that a runtime of st
// took over is pointed at it by the module's first run under st (tierRun.process), not
// here: a boundary that touched every worker would cost a cache miss per module.
type carry struct {
	base         *state               // the state st was prepared against
	breakers     []*breaker.Breaker   // made for st (new names, or changed settings), to register
	dropBreakers []string             // base's breakers st does not want
	ttls         []*modRT             // runtimes whose key's TTL is new or changed
	stopped      []*worker            // base's workers no runtime of st took over
	dropKeys     []string             // keys of base's that no module of st writes
	replaced     []BreakerConfigEvent // named breakers made anew because their settings changed
	bulkheads    []bulkheadUpdate     // base's bulkheads st keeps with new settings
}

// prepare derives from st's plan everything its ticks need (runtimes, breakers, slots,
// workers, summary order) against base, the state in force, and records in st.carry what
// installing st must still change. It changes neither base nor the engine's shared state
// (a breaker it makes is not registered, a worker it makes has no goroutine yet), so it can
// run off the tick path while base's ticks run; the slots it takes for keys base lacks are
// empty until st's modules write them. A module whose registration has the same identity
// as one of base's keeps its worker (a run still outstanding keeps it busy).
func (e *Engine) prepare(st, base *state) {
	old := make(map[string]*modRT, len(base.lines))
	for _, m := range base.lines {
		old[m.name] = m
	}
	want, order := st.newRuntimes(old)
	st.carry = &carry{base: base}
	e.placeRuntimes(st, base, e.prepareBreakers(st, base, want, order))
	e.prepareResilience(st, base)
	keys := make(map[string]bool, len(st.lines))
	for _, rt := range st.lines {
		keys[rt.key] = true
	}
	for _, m := range old { // the runtimes no module of st took over
		st.carry.stopped = append(st.carry.stopped, m.w)
		if !keys[m.key] { // a key still written (by a new implementation) keeps its history
			st.carry.dropKeys = append(st.carry.dropKeys, m.key)
		}
	}
}

// install makes st, prepared against the state in force (st.carry.base == e.active), the
// state in force. Called with tickMu held, at a tick boundary: it builds nothing.
func (e *Engine) install(st *state) {
	c := st.carry
	for _, b := range c.breakers {
		e.circ.remove(b.Name()) // a breaker replaced by one with new settings starts closed
		e.breakers.Put(b)
	}
	for _, name := range c.dropBreakers {
		e.removeBreaker(name)
	}
	for i := range c.replaced {
		e.emit(event{kind: evBreakerConfig, brConfig: &c.replaced[i]})
	}
	for _, u := range c.bulkheads {
		u.b.Update(u.s)
	}
	e.lg.SetDefaultTTL(st.cfg.DefaultTTL) // a reload may change it (lastgood.default_ttl)
	for _, rt := range c.ttls {
		e.lg.SetTTL(rt.key, rt.spec.TTL)
	}
	for _, w := range c.stopped {
		w.stop()
	}
	for _, k := range c.dropKeys {
		e.lg.Delete(k)
		e.board.Remove(k)
	}
	st.carry = nil // keeps no chain of earlier states alive
	e.active = st
	e.activeView.Store(st)
	e.emit(event{kind: evApply, version: st.version})
}

// publish makes st, just built, the desired state, prepared against the state in force.
// Called with cfgMu held. If a tick boundary installed another state while st was being
// prepared, st is prepared again (as a copy: the boundary may already read st) so that the
// next boundary finds it prepared against the state it replaces; should that race be lost
// again, the boundary prepares it itself (applyPending).
func (e *Engine) publish(st *state) {
	base := e.activeView.Load()
	if e.pending.Load().version == base.version { // nothing was pending: st waits from now
		e.pendingSince.Store(e.clock.Now().UnixNano())
	}
	e.prepare(st, base)
	for range 2 {
		e.desired = st
		e.pending.Store(st)
		now := e.activeView.Load()
		if now == base || now.version == st.version { // not moved, or moved to st itself
			e.wakeup()
			return
		}
		base, st = now, st.unprepared()
		e.prepare(st, base)
	}
	e.desired = st
	e.pending.Store(st)
	e.wakeup()
}

// unprepared returns a copy of st without what prepare derives from it.
func (st *state) unprepared() *state {
	cp := *st
	cp.tierMods, cp.lines, cp.named, cp.carry, cp.degraded, cp.async, cp.resil = nil, nil, nil, nil, nil, nil, nil
	cp.kept, cp.keptTiers = nil, nil
	return &cp
}
