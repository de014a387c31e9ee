package replaycheck

import (
	"fmt"
	"strings"

	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
)

// tickRun is the recomputation of one recorded tick.
type tickRun struct {
	c     *Checker
	rec   *faultsummary.Summary
	diffs []Diff
	em    decide.Emergency
	known bool // the emergency state before the tick is known (the tick before was checked)
	lines []faultsummary.Module
}

// Tick recomputes recorded tick s and returns its differences. Ticks are given oldest
// first: the emergency state carries from one tick to the next when their ids follow.
func (c *Checker) Tick(s *faultsummary.Summary) []Diff {
	r := &tickRun{c: c, rec: s, lines: append([]faultsummary.Module(nil), s.Modules()...)}
	c.rules = rulesFor(c.recorded, s)
	if p := c.prev; p != nil && p.TickID+1 == s.TickID && p.RunID == s.RunID {
		r.em, r.known = emergencyOf(p.Emergency), true
		if r.em.Latched && !s.Emergency.Latched && s.Emergency.Active && s.Emergency.SinceTick == r.em.Since {
			r.em = r.em.Reset() // an operator reset between the two ticks
		}
	} else {
		// The first tick, or one after a gap: the state before it is unknown, the state it
		// records (set by its safety tier, before the other tiers ran) is taken as given.
		r.em = emergencyOf(s.Emergency)
	}
	finish, stop := faultsummary.Completed, ""
	tierStatus := make([]faultsummary.TierStatus, len(s.Tiers))
	for ti := range s.Tiers {
		st, fin, why := r.tier(ti, stop)
		tierStatus[ti] = st
		if why != "" && stop == "" {
			finish, stop = fin, why
		}
	}
	r.tick(finish, tierStatus)
	c.prev = s
	return r.diffs
}

func (r *tickRun) diff(module, field, rec, now string) {
	if rec != now {
		r.diffs = append(r.diffs, Diff{TickID: r.rec.TickID, Module: module, Field: field, Recorded: rec, Recomputed: now})
	}
}

// tier recomputes tier ti given why the tick stopped before it, and returns its status and
// how the tick ends if the tier stops it (why set).
func (r *tickRun) tier(ti int, stop string) (faultsummary.TierStatus, faultsummary.Finish, string) {
	rt := &r.rec.Tiers[ti]
	inEmergency := rt.Status == faultsummary.TierSkipped && rt.Reason == "emergency mode"
	if reason, skip := decide.SkipTier(stop, r.em.Active, inEmergency); skip {
		r.diff("", fmt.Sprintf("tiers[%d].status", ti), string(rt.Status), string(faultsummary.TierSkipped))
		r.diff("", fmt.Sprintf("tiers[%d].reason", ti), rt.Reason, reason)
		r.modules(ti, true)
		return faultsummary.TierSkipped, "", ""
	}
	res, reason := r.modules(ti, false)
	r.diff("", fmt.Sprintf("tiers[%d].status", ti), string(rt.Status), string(res.Status()))
	if ti == 0 && r.known {
		r.em, _ = r.em.Next(decide.SafetyTick{Tick: r.rec.TickID, Failed: res.SafetyFailed, Healthy: res.Healthy(),
			Reason: reason}, r.c.emergencyConfig(r.em, r.rec))
	}
	fin, ok := res.Stop(ti)
	if !ok {
		return res.Status(), "", ""
	}
	why := "tier " + rt.Name + " failed"
	if res.Aborted {
		why = "short-circuited by " + r.tierLine(ti, res.AbortBy)
	}
	return res.Status(), fin, why
}

// tierLine returns the name of the j-th module line of tier ti.
func (r *tickRun) tierLine(ti, j int) string {
	for i := range r.lines {
		if r.lines[i].TierIndex == ti {
			if j == 0 {
				return r.lines[i].Name
			}
			j--
		}
	}
	return ""
}

// modules judges the lines of tier ti (skipped: the tier did not run) and returns the
// tier's result and the safety reason its first safety failure gives.
func (r *tickRun) modules(ti int, skipped bool) (decide.TierResult, string) {
	var res decide.TierResult
	var reason string
	j := 0
	for i := range r.lines {
		m := &r.lines[i]
		if m.TierIndex != ti {
			continue
		}
		o := OutcomeOf(m, skipped || r.rec.Tiers[ti].Status == faultsummary.TierSkipped)
		if skipped {
			o = decide.Outcome{Refusal: decide.TierSkipped}
		}
		v := r.verdict(o, r.c.policyOf(r.rec, m))
		r.diff(m.Name, "status", string(m.Status), string(v.Status.Public()))
		if want, differs := served(v.Serve, m.Served.Source); differs {
			r.diff(m.Name, "served.source", m.Served.Source.String(), want)
		}
		if v.SafetyFailure && !res.SafetyFailed {
			reason = m.Name + ": " + string(v.Status.Public())
			if m.Error != "" {
				reason += ": " + m.Error
			}
		}
		m.Status = v.Status.Public()
		res.Add(v, j)
		j++
	}
	return res, reason
}

func (r *tickRun) verdict(o decide.Outcome, p decide.Policy) decide.Verdict {
	v := r.c.judge(o, p)
	if r.c.statusOf != nil {
		v.Status = r.c.statusOf(o)
	}
	return v
}

// tick compares the tick's finish, emergency state and overall severity.
func (r *tickRun) tick(finish faultsummary.Finish, tierStatus []faultsummary.TierStatus) {
	s := r.rec
	r.diff("", "finish", string(s.Finish), string(finish))
	now := *s
	now.Finish = finish
	now.Tiers = append([]faultsummary.Tier(nil), s.Tiers...)
	for i := range now.Tiers {
		now.Tiers[i].Status = tierStatus[i]
	}
	if r.known {
		now.EmergencyMode = r.em.Active
		now.Emergency = faultsummary.Emergency{Active: r.em.Active, SinceTick: r.em.Since, Reason: r.em.Reason,
			Latched: r.em.Active && r.em.Latched, HealthyTicks: r.em.Healthy, EndedTick: r.em.EndedTick}
		was, is := emergencyFields(s.EmergencyMode, s.Emergency), emergencyFields(now.EmergencyMode, now.Emergency)
		for i := range was {
			r.diff("", was[i][0], was[i][1], is[i][1])
		}
	}
	now.SetModules(r.lines)
	r.diff("", "overall_severity", string(s.OverallSeverity), string(now.ComputeSeverity()))
}

// emergencyOf returns the state machine's state a summary's emergency records.
func emergencyOf(e faultsummary.Emergency) decide.Emergency {
	return decide.Emergency{Active: e.Active, Since: e.SinceTick, Reason: e.Reason, Latched: e.Latched,
		Healthy: e.HealthyTicks, EndedTick: e.EndedTick}
}

// refusalOf is the inverse of decide.StatusOf on refusals: the refusal that decides each
// status of a module that was not run, found by asking StatusOf (so a refusal with a
// status of its own needs no line here). Skipped has several (a skipped tier, an
// emergency-only module, a stopped engine), which OutcomeOf tells apart.
var refusalOf = func() (inv [256]decide.Refusal) {
	for r := 255; r > int(decide.NotRefused); r-- { // the lowest refusal of a status wins
		inv[decide.StatusOf(decide.Outcome{Refusal: decide.Refusal(r)})] = decide.Refusal(r)
	}
	return inv
}()

// ignoredContext ends the error of a line refused as busy whose outstanding run ignored
// its context (decide.CauseBusyIgnored), whatever tick it names.
var ignoredContext = strings.TrimPrefix(decide.CauseBusyIgnored.Err().Error(), decide.CauseBusy.Err().Error())

// OutcomeOf returns the facts of recorded module line m (in a tier recorded as skipped
// when tierSkipped): the inputs of decide.Judge. The refusal is read from the status the
// line records (a refusal has no other trace), whether the deadline caught it from the
// error its cause gives, the rest from the attempts, fault kind and error recorded.
func OutcomeOf(m *faultsummary.Module, tierSkipped bool) decide.Outcome {
	kind, _ := fault.ParseKind(m.FaultKind)
	switch code := m.Status.Code(); {
	case code == decide.Skipped:
		if tierSkipped {
			return decide.Outcome{Refusal: decide.TierSkipped}
		}
		return decide.Outcome{Refusal: decide.EmergencyOnly}
	case refusalOf[code] != decide.NotRefused:
		o := decide.Outcome{Refusal: refusalOf[code]}
		if o.Refusal == decide.StillBusy && strings.HasSuffix(m.Error, ignoredContext) {
			o.Overdue = decide.IgnoreGrace + 1 // past its deadline's grace: CauseBusyIgnored
		}
		return o
	}
	o := decide.Outcome{Attempts: m.Attempts, Kind: kind, Probe: m.Status == faultsummary.StatusProbeOK ||
		m.Status == faultsummary.StatusProbeFailed}
	switch {
	case isCause(m, decide.CauseAbandoned):
		o.Late, o.Kind = decide.Abandoned, fault.KindNone
	case isCause(m, decide.CauseUnstarted):
		o.Late, o.Failed = decide.Unstarted, true
	case isCause(m, decide.CauseTickCanceled):
		o.Late, o.Failed, o.Kind = decide.Unstarted, true, fault.KindCanceled
	default:
		o.Failed = m.Error != "" || kind != fault.KindNone
	}
	return o
}

// emergencyConfig returns the emergency configuration for tick s, the state before it
// being before: WithEmergency's, else the recorded rules'. Without either (a database
// written before the recorder kept the rules), latch is what s records, and recover_after is learned from the ticks, the count of
// healthy ticks at which the recorded emergency ended, at least one more than a count at
// which it went on (default 3, the configuration's).
func (c *Checker) emergencyConfig(before decide.Emergency, s *faultsummary.Summary) decide.EmergencyConfig {
	if c.emSet {
		return c.em
	}
	if c.rules != nil && c.rules.RecoverAfter > 0 {
		return decide.EmergencyConfig{Latch: c.rules.Latch, RecoverAfter: c.rules.RecoverAfter}
	}
	e := s.Emergency
	c.em.Latch = e.Latched
	switch {
	case before.Active && !e.Active && e.EndedTick == s.TickID:
		c.em.RecoverAfter = e.HealthyTicks
	case e.Active && e.HealthyTicks >= c.em.RecoverAfter && !e.Latched:
		c.em.RecoverAfter = e.HealthyTicks + 1
	}
	return c.em
}
