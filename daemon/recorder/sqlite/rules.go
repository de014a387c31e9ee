package sqlite

import (
	"github.com/cycled/cycled/daemon/recorder"
	"sync/atomic"

	"github.com/cycled/cycled/cycle"
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
	r.Event(recorder.KindRules, recorder.RulesOf(e, 0))
}

// applied records the rules of generation gen, if an engine is watched.
func (r *Recorder) applied(gen uint64) {
	if e := r.engine.Load(); e != nil {
		r.Event(recorder.KindRules, recorder.RulesOf(e, gen))
	}
}
