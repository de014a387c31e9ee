package recorder

import (
	"sync/atomic"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/tiers"
)

// KindRules is the kind of the event that records what a replay of the decisions needs of
// the configuration: each module's effective error policy and on_open, and the emergency
// configuration. It is written when Watch is called and at every configuration applied.
const KindRules = "decision_rules"

// ModuleRules is one module's part of Rules.
type ModuleRules struct {
	Policy    tiers.Policy `json:"policy"` // the effective error policy
	OnOpen    tiers.OnOpen `json:"on_open"`
	TierIndex int          `json:"tier_index"`
}

// Rules is the data of a KindRules event: the configuration in force from the event's
// tick on, for the generation it names (0: the one in force when the recorder was
// attached).
type Rules struct {
	Generation   uint64                 `json:"generation"`
	Latch        bool                   `json:"latch"`
	RecoverAfter int                    `json:"recover_after"`
	Modules      map[string]ModuleRules `json:"modules"`
}

// RulesOf returns the rules of engine e's configuration in force, as generation gen.
func RulesOf(e *cycle.Engine, gen uint64) Rules {
	cfg := e.Config()
	r := Rules{Generation: gen, Latch: cfg.Emergency.Latch, RecoverAfter: cfg.Emergency.RecoverAfter,
		Modules: make(map[string]ModuleRules)}
	for _, m := range e.Modules() {
		if !m.Pending {
			r.Modules[m.Spec.Name] = ModuleRules{Policy: m.Policy, OnOpen: m.Spec.OnOpen, TierIndex: m.TierIndex}
		}
	}
	return r
}

// engineRef is the engine whose rules the recorder writes (see Watch).
type engineRef = atomic.Pointer[cycle.Engine]

// Watch records e's rules now and at every configuration e applies from now on, so that
// "cycled replay --check" judges each recorded line under its own module's policy. The
// rules are read when the applied configuration's event is handled, after the tick
// boundary that applied it: two reloads applied at consecutive ticks may record the second
// configuration under the first generation as well.
func (r *Recorder) Watch(e *cycle.Engine) {
	r.engine.Store(e)
	r.Event(KindRules, RulesOf(e, 0))
}

// applied records the rules of generation gen, if an engine is watched.
func (r *Recorder) applied(gen uint64) {
	if e := r.engine.Load(); e != nil {
		r.Event(KindRules, RulesOf(e, gen))
	}
}
