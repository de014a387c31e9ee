package cycle

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/faultsummary/check"
	"github.com/cycled/cycled/internal/setting"
	"github.com/cycled/cycled/tiers"
)

// This file applies two decisions of package decide that guard the cycle as a whole: load
// shedding on overrun (decide.Shedding) and the startup state (decide.Startup). Neither
// costs a tick anything when it is not configured: the shed set is nil and startup is
// over before the first tick.

// SheddingConfig configures load shedding on overrun: when ticks keep overrunning, the
// modules of the lowest priority class still running are shed (not run; their
// last-known-good value served), one class per step, and restored one class per step
// once ticks fit again. The safety tier, critical modules and modules at or above Floor
// are never shed.
type SheddingConfig struct {
	// AfterOverruns is how many consecutive overrunning ticks shed one more step. Zero means 3.
	AfterOverruns int
	// RestoreAfter is how many consecutive ticks that fit restore one step. Zero means 10.
	RestoreAfter int
	// Floor, if set, is the priority at or above which modules are never shed.
	Floor *int
	// Target is the wall time (from the scheduled start) a tick must fit in. Zero means the
	// period; in step mode (period 0) without a target nothing is ever shed.
	Target time.Duration
}

// Check reports the settings out of their bounds (each a field as a configuration file
// names it, under "shedding"); a zero field means its default. The one set of rules for
// load shedding's settings.
func (c SheddingConfig) Check() error {
	var es []*setting.Error
	if c.AfterOverruns < 0 {
		es = append(es, setting.Errorf("after_overruns", "must be >= 0 (0 means 3)"))
	}
	if c.RestoreAfter < 0 {
		es = append(es, setting.Errorf("restore_after", "must be >= 0 (0 means 10)"))
	}
	if c.Target < 0 {
		es = append(es, setting.Errorf("target", "must be >= 0 (0 means the period)"))
	}
	return setting.Join(es)
}

// StartupConfig configures the startup state: until every safety module has succeeded
// once, only the safety tier runs, no emergency is raised, and Ready reports false.
type StartupConfig struct {
	// Timeout, if positive, ends startup in emergency mode (reason "startup_timeout") when
	// it has not ended this long after its first tick.
	Timeout time.Duration
}

// ShedEvent is one step of load shedding, as the hooks receive it and the stream carries
// it: the one type of the event (see faultsummary.ShedEvent).
type ShedEvent = faultsummary.ShedEvent

// StartupEvent is the end of startup.
type StartupEvent struct {
	// TickID is the tick in which startup ended.
	TickID uint64
	// TimedOut is true when startup.timeout ended it (emergency mode follows), false when
	// every safety module succeeded once.
	TimedOut bool
	// Pending names the safety modules that had not succeeded when it timed out.
	Pending []string
}

// guards is the engine's state of load shedding and startup; guarded by tickMu except
// where said.
type guards struct {
	started bool // the first tick has set startup up
	startup decide.Startup
	// starting mirrors startup.Starting for readers outside the tick (Engine.Starting).
	starting atomic.Bool

	shed     decide.Shedding
	shedFor  *state // the state classes and cands were made for
	cands    []decide.ShedCandidate
	classes  []int
	shedSet  []bool                  // per summary line: shed this tick; nil when none is
	shedView *faultsummary.ShedState // the summary's shed field while Level > 0
}

// Starting reports whether the cycle is starting: some safety module has not succeeded
// once yet (only with a startup configuration). A starting cycle is not ready.
func (e *Engine) Starting() bool { return e.guard.starting.Load() }

// beginGuards sets the tick's startup and shedding fields in s before its tiers run.
func (e *Engine) beginGuards(st *state, s *faultsummary.Summary) {
	g := &e.guard
	if !g.started {
		g.started = true
		g.startup.Starting = st.cfg.Startup != nil
	} else if g.startup.Starting && st.cfg.Startup == nil {
		g.startup.Starting = false // a reload removed startup: nothing to wait for
	}
	if g.starting.Load() != g.startup.Starting {
		g.starting.Store(g.startup.Starting)
	}
	if st.cfg.Shedding == nil && g.shedSet != nil {
		g.shed, g.shedSet, g.shedView = decide.Shedding{}, nil, nil // a reload turned it off
	}
	if g.shedSet != nil && g.shedFor != st {
		g.refreshShed(st) // a reload at this boundary: the set must fit its lines
	}
	s.Shed = g.shedView
	if g.startup.Starting {
		s.CycleState = faultsummary.CycleStarting
	}
}

// evalStartup moves the startup state machine on the safety tier's lines of tick s (the
// engine's decision in place of emergency mode while starting), and returns why the
// later tiers are skipped ("" once startup is over). In the tick startup ends, the
// safety tier's outcome out then moves the emergency state machine as in any other.
func (e *Engine) evalStartup(st *state, s *faultsummary.Summary, tl *tickLines, out tierOutcome) string {
	g := &e.guard
	var safety, ok, failed []string
	for _, rt := range st.tierMods[0] {
		if rt.spec.Emergency {
			continue // runs only in emergency mode: nothing to wait for
		}
		safety = append(safety, rt.name)
		switch ln := &tl.recs[rt.idx]; {
		case ln.status.Produced():
			ok = append(ok, rt.name)
		case ln.flags&lineFailed != 0 || ln.late == decide.Abandoned:
			failed = append(failed, rt.name)
		}
	}
	next, change := g.startup.Next(decide.StartupTick{Now: s.StartedAt, Safety: safety, Succeeded: ok, Failed: failed},
		st.cfg.Startup.Timeout)
	pending := next.Pending(safety)
	g.startup = next
	g.starting.Store(next.Starting)
	switch change {
	case decide.Ready:
		s.CycleState = ""
		e.emit(event{kind: evStartup, tick: s.TickID, startup: StartupEvent{TickID: s.TickID}})
		e.evalEmergency(st, s.TickID, out)
		return ""
	case decide.StartupTimedOut:
		s.CycleState = ""
		e.emit(event{kind: evStartup, tick: s.TickID, startup: StartupEvent{TickID: s.TickID, TimedOut: true, Pending: pending}})
		e.evalEmergency(st, s.TickID, tierOutcome{TierResult: decide.TierResult{SafetyFailed: true}, safetyReason: decide.StartupReason})
		return ""
	}
	s.Startup = &faultsummary.StartupState{Pending: pending, TimeoutMs: float64(st.cfg.Startup.Timeout) / float64(time.Millisecond),
		Failures: next.Failures}
	return faultsummary.CycleStarting
}

// endGuards moves load shedding on tick s, which ended at end: a step shed or restored
// applies from the next tick.
func (e *Engine) endGuards(st *state, s *faultsummary.Summary, end time.Time) {
	c := st.cfg.Shedding
	if c == nil {
		return
	}
	g := &e.guard
	target := c.Target
	if target <= 0 {
		target = st.cfg.Period
	}
	if target <= 0 {
		return
	}
	if g.shedFor != st {
		g.refreshShed(st)
	}
	wall := end.Sub(s.ScheduledAt)
	next, change := g.shed.Next(decide.ShedTick{Tick: s.TickID, Overrun: wall > target, Wall: wall, Target: target},
		decide.SheddingConfig{AfterOverruns: c.AfterOverruns, RestoreAfter: c.RestoreAfter}, len(g.classes))
	g.shed = next
	viewLevel := 0
	if g.shedView != nil {
		viewLevel = g.shedView.Level
	}
	if change == decide.NoShedChange && viewLevel == next.Level {
		return
	}
	g.setShed(st)
	if change != decide.NoShedChange {
		ev := ShedEvent{TickID: s.TickID, Shed: change == decide.ShedStep, Level: next.Level, Reason: next.Reason}
		if g.shedView != nil {
			ev.Modules = g.shedView.Modules
		}
		e.emit(event{kind: evShed, tick: s.TickID, shed: ev})
	}
}

// refreshShed takes the modules of a changed configuration st: their candidates and
// classes, and the set shed at the same level (at most the number of classes now).
func (g *guards) refreshShed(st *state) {
	g.shedFor = st
	g.cands = shedCandidates(st)
	g.classes = decide.ShedClasses(g.cands, st.cfg.Shedding.Floor)
	g.shed.Level = min(g.shed.Level, len(g.classes))
	g.setShed(st)
}

// setShed makes the shed set and the summary's view of the current level.
func (g *guards) setShed(st *state) {
	if g.shed.Level == 0 {
		g.shedSet, g.shedView = nil, nil
		return
	}
	c := st.cfg.Shedding
	set := make([]bool, len(st.lines))
	view := &faultsummary.ShedState{Level: g.shed.Level, Reason: g.shed.Reason, SinceTick: g.shed.Since, Modules: []string{}}
	for i, rt := range st.lines {
		if decide.Sheds(g.cands[i], g.classes, g.shed.Level, c.Floor) {
			set[i] = true
			view.Modules = append(view.Modules, rt.name)
		}
	}
	g.shedSet, g.shedView = set, view
}

// shedCandidates returns what decides whether each line's module may be shed.
func shedCandidates(st *state) []decide.ShedCandidate {
	cs := make([]decide.ShedCandidate, len(st.lines))
	for i, rt := range st.lines {
		cs[i] = decide.ShedCandidate{Tier: rt.planned.TierIndex, Priority: rt.spec.Priority, Critical: rt.spec.Critical,
			EmergencyOnly: rt.spec.Emergency}
	}
	return cs
}

// validateGuards checks the shedding and startup configuration.
func validateGuards(cfg Config) tiers.Problems {
	var ps tiers.Problems
	add := func(path, msg string, warn bool) {
		ps = append(ps, tiers.Problem{Path: path, Message: msg, Warning: warn})
	}
	if sh := cfg.Shedding; sh != nil {
		setting.Report("shedding", sh.Check(), func(path, format string, args ...any) {
			add(path, fmt.Sprintf(format, args...), false)
		})
		if sh.Target <= 0 && cfg.Period == 0 {
			add("shedding.target", "step mode has no period: without a target nothing is ever shed", true)
		}
	}
	if su := cfg.Startup; su != nil && su.Timeout < 0 {
		add("startup.timeout", "must be >= 0 (0: no timeout)", false)
	}
	return ps
}

// checkGuards adds what the checker needs of load shedding and startup to out (each
// module's priority is set with the module, in CheckConfig).
func checkGuards(cfg Config, out *check.Config) {
	out.Shedding = cfg.Shedding != nil
	if cfg.Shedding != nil && cfg.Shedding.Floor != nil {
		f := *cfg.Shedding.Floor
		out.ShedFloor = &f
	}
	out.Startup = cfg.Startup != nil
}
