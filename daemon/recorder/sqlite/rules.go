package sqlite

import (
	"sync/atomic"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/recorder"
)

// engineRef is the engine whose rules the recorder writes (see Watch).
type engineRef = atomic.Pointer[cycle.Engine]

// Watch records e's rules now and at every configuration e applies from now on, so that
// "cycled replay --check" judges each recorded line under its own module's policy. The
// rules are read when the applied configuration's event is handled, after the tick
// boundary that applied it: two reloads applied at consecutive ticks may record the second
// configuration under the first generation as well.
func (r *Recorder) Watch(e *cycle.Engine) {
	r.engine.Store(e)
	r.rules(recorder.RulesOf(e, 0))
}

// applied records the rules of generation gen, if an engine is watched.
func (r *Recorder) applied(gen uint64) {
	if e := r.engine.Load(); e != nil {
		r.rules(recorder.RulesOf(e, gen))
	}
}

// rules records full as a delta against the rules recorded last, or whole (see
// recorder.Rules).
func (r *Recorder) rules(full recorder.Rules) {
	r.rulesMu.Lock()
	ev := full
	if r.rulesN%recorder.RulesFullEvery != 0 {
		ev = recorder.Delta(r.lastRules, full)
	}
	r.rulesN++
	r.lastRules = full.Modules
	r.rulesMu.Unlock()
	r.Event(recorder.KindRules, ev)
}
