package check

import (
	"slices"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/faultsummary"
)

// This file holds the rules of load shedding (RuleShed), the startup state (RuleStarting)
// and asynchronous modules (RuleAsync).

// guardPrev is what the checker keeps of the previous summary for these rules.
type guardPrev struct {
	starting bool // the cycle was starting
}

// StartupReason is the emergency reason of a startup that timed out.
const StartupReason = "startup_timeout"

// guards checks the rules of load shedding, startup and asynchronous modules.
func (r *run) guards() {
	r.shedLines()
	r.starting()
	r.asyncRuns()
}

// shedLines checks that only a module load shedding may shed is shed, and that the
// summary's shed field lists exactly the lines shed (or refused earlier: not due, skipped).
func (r *run) shedLines() {
	s, c := r.s, r.c
	if s.Shed != nil && (!c.cfg.Shedding || s.Shed.Level < 1 || s.Shed.Reason == "" || s.Shed.SinceTick > s.TickID) {
		r.add(RuleShed, "shed %+v with shedding configured %v", *s.Shed, c.cfg.Shedding)
	}
	for i := range r.mods {
		m, mc := &r.mods[i], r.cfgOf[i]
		listed := s.Shed != nil && slices.Contains(s.Shed.Modules, m.Name)
		if m.Status != faultsummary.StatusShed {
			if listed && m.Status != faultsummary.StatusNotDue && m.Status != faultsummary.StatusSkipped {
				r.add(RuleShed, "module %q listed as shed has status %s", m.Name, m.Status)
			}
			continue
		}
		switch {
		case !listed:
			r.add(RuleShed, "module %q is shed but the summary's shed does not list it", m.Name)
		case mc == nil:
		case mc.Tier == 0:
			r.add(RuleShed, "safety module %q was shed", m.Name)
		case mc.Critical:
			r.add(RuleShed, "critical module %q was shed", m.Name)
		case c.cfg.ShedFloor != nil && mc.Priority >= *c.cfg.ShedFloor:
			r.add(RuleShed, "module %q of priority %d was shed, at or above the floor %d", m.Name, mc.Priority, *c.cfg.ShedFloor)
		case mc.EmergencyOnly:
			r.add(RuleShed, "emergency-only module %q was shed", m.Name)
		}
		if m.Attempts != 0 || m.Served.Source == blackboard.Live {
			r.add(RuleShed, "shed module %q ran (%d attempts, served %s)", m.Name, m.Attempts, m.Served.Source)
		}
	}
}

// starting checks the startup state: only with a startup configuration, only from the
// first ticks on (once over it never comes back), and with what it waits for.
func (r *run) starting() {
	s, c := r.s, r.c
	if s.CycleState != "" && s.CycleState != faultsummary.CycleStarting {
		r.add(RuleStarting, "unknown cycle_state %q", s.CycleState)
	}
	st := s.CycleState == faultsummary.CycleStarting
	switch {
	case st && !c.cfg.Startup:
		r.add(RuleStarting, "cycle starting without a startup configuration")
	case st && r.hasPrev && c.started && !c.guard.starting && c.prev.id+1 == s.TickID:
		r.add(RuleStarting, "cycle starting again after startup ended")
	case st && (s.Startup == nil || len(s.Startup.Pending) == 0):
		r.add(RuleStarting, "cycle starting with nothing pending: %+v", s.Startup)
	case !st && s.Startup != nil:
		r.add(RuleStarting, "startup %+v outside startup", *s.Startup)
	}
}

// startingEmergency checks a tick of a starting cycle: no emergency is raised or latched.
func (r *run) startingEmergency() {
	if em := r.s.Emergency; r.s.EmergencyMode || em.Active || em.Latched {
		r.add(RuleStarting, "emergency %+v while the cycle is starting", em)
	}
}

// startupTimedOut reports whether emergency mode entered in this tick is startup's
// timeout: a startup configuration, the previous tick starting, and its reason.
func (r *run) startupTimedOut() bool {
	s, c := r.s, r.c
	return c.cfg.Startup && c.guard.starting && s.Emergency.Reason == StartupReason && s.Emergency.SinceTick == s.TickID
}

// asyncRuns checks the ends of asynchronous runs a summary reports.
func (r *run) asyncRuns() {
	s, c := r.s, r.c
	for _, a := range s.Async {
		if !slices.Contains(c.cfg.Async, a.Name) {
			r.add(RuleAsync, "async run of %q, which is not an asynchronous module", a.Name)
		}
		if a.OriginTick >= s.TickID {
			r.add(RuleAsync, "async run of %q from tick %d reported in tick %d: a run starts after its tick", a.Name, a.OriginTick, s.TickID)
		}
		switch a.Status {
		case faultsummary.StatusOK:
		case faultsummary.StatusFailed, faultsummary.StatusTimedOut:
			if a.Failures < 1 || a.Error == "" {
				r.add(RuleAsync, "async run of %q %s with %d failures and error %q", a.Name, a.Status, a.Failures, a.Error)
			}
		default:
			r.add(RuleAsync, "async run of %q has status %s", a.Name, a.Status)
		}
	}
}
